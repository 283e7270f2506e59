#!/usr/bin/env bash
# On the device machine (bundled .devbuild): the GIN chunk size of the bucket collectives and PP
# (ncclEpBucketConfig_t / ncclEpPpConfig_t .chunkBytes, epx-bench --chunk-kib) at 2, 4 and 8 fake
# nodes (emulated NIC 50 GB/s + 3 us, 4 CTAs, 64 MiB FP32 tensor / 16 MiB PP messages); then the
# bucket and pp suites at 2 and 4 fake nodes. Lines in $OUT/chunk-ab.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/devbuild-env.sh
log="$OUT/chunk-ab.txt"
. scripts/experiments/gpu-ab-lib.sh
coll() { coll_lines "$@" | tee -a "$log"; }  # coll <nodes> <label> <algo> [-- epx-bench args]
coll 4 bucket-def bucket
coll 4 bucket-4m bucket -- --chunk-kib 4096
coll 4 bucket-8m bucket -- --chunk-kib 8192
coll 2 bucket-4m bucket -- --chunk-kib 4096
coll 8 bucket-def bucket
coll 8 bucket-8m bucket -- --chunk-kib 8192
coll 4 pp-4m pp -- --chunk-kib 4096
coll 8 pp-16m pp -- --chunk-kib 16384
export EPX_TEST_QUICK=1
for n in 2 4; do scripts/gpu-fn-suites.sh "$n" 90 bucket,pp | grep -E "exit|error|FAIL" | head -8 | tee -a "$log"; done
