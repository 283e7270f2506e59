#!/usr/bin/env bash
# On the device machine (bundled .devbuild): the bucket and PP checks in one call. First epx-bench --algo
# bucket / pp at 4 fake nodes (emulated NIC 50 GB/s + 3 us, 4 CTAs; bus bandwidth of all-gather,
# reduce-scatter, all-reduce at 64 MiB and the PP ring at 16 MiB against the line-rate floor),
# then the full case lists of the pp and bucket suites (no EPX_TEST_QUICK: sizes to 256 MiB with
# EPX_BUCKET_LARGE_MIB=256, 1000 iterations, 50 graph replays) at 1 rank and 2, 4, 8 fake nodes,
# each under its own limit. Extra VAR=value arguments go to every run. Lines in $OUT/full-coll.txt.
#   scripts/experiments/gpu-full-coll.sh [VAR=value...]
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/devbuild-env.sh
log="$OUT/full-coll.txt"
. scripts/experiments/gpu-ab-lib.sh
coll_bench 4 full 4 bucket,pp "$@" | sed "s/^/coll4: /" | tee -a "$log"
unset EPX_TEST_QUICK
for n in 1 2 4 8; do
  scripts/gpu-fn-suites.sh "$n" 170 pp,bucket EPX_BUCKET_LARGE_MIB=256 "$@" | grep -E "exit|error|FAIL" | tee -a "$log"
done
