#!/usr/bin/env bash
# On the device machine (bundled .devbuild): every GIN put copied by the ipc backend's copy kernel
# (EPX_GIN_COPY=kernel-all) against the copy engines (default), where the one-GPU test rig's
# copy-engine ops cost tens to hundreds of µs each: PP ring at 4 and 8 fake nodes (16 MiB, 4 CTAs,
# 1 MiB and 4 MiB chunks), the collectives at 4, LL 128 tokens at 4 and 8, HT at 8; then the
# low_latency and pp suites at 4 fake nodes with kernel-all. Emulated NIC 50 GB/s + 3 us.
# Lines in $OUT/copy-kernel-ab.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/devbuild-env.sh
log="$OUT/copy-kernel-ab.txt"
. scripts/experiments/gpu-ab-lib.sh
coll() { coll_lines "$@" | tee -a "$log"; }  # coll <nodes> <label> <algo> [VAR=value...] [-- epx-bench args]
K=EPX_GIN_COPY=kernel-all
coll 4 pp-kall pp $K
coll 4 pp-kall-c4m pp $K -- --chunk-kib 4096
coll 8 pp-c4m pp -- --chunk-kib 4096
coll 8 pp-kall-c4m pp $K -- --chunk-kib 4096
coll 4 bucket-kall bucket $K
ab_ll 4 def 128
ab_ll 4 kall 128 $K
ab_ll 8 def 128
ab_ll 8 kall 128 $K
ab_ht kall $K
grep -E "^ll|^ht" "$log"
scripts/gpu-fn-suites.sh 4 90 low_latency,pp $K | grep -E "exit|error|FAIL" | head -8 | tee -a "$log"
