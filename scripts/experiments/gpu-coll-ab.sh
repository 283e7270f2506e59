#!/usr/bin/env bash
# On the device machine: epx-bench --algo bucket / pp (bus bandwidth of the bucket collectives and
# PP against the emulated NIC, 50 GB/s + 3 us) at N fake nodes, 4 CTAs, alternating two bundles:
# .devbuild (new) and the bundle given (old), `reps` times each, so drift of the machine shows in
# both. Lines matching `filter` under $OUT/coll-ab.txt, prefixed new/old.
#   scripts/experiments/gpu-coll-ab.sh N .devbuild-old [reps, default 2] [filter regex, default "pp ring"]
#                          [algos, default bucket,pp; pp: PP only]
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/devbuild-env.sh
. scripts/experiments/gpu-ab-lib.sh
n=$1 old=$2 reps=${3:-2} filter=${4:-pp ring} algos=${5:-bucket,pp}
[ -d "$old" ] || { echo "gpu-coll-ab: no bundle $old" >&2; exit 2; }
swap() { mv .devbuild .devbuild-swap && mv "$old" .devbuild && mv .devbuild-swap "$old"; }
for i in $(seq "$reps"); do
  for v in new old; do
    [ $v = old ] && swap
    coll_bench "$n" "$v$i" 4 "$algos" | grep -E "$filter" | sed "s/^/$v /" | tee -a "$OUT/coll-ab.txt"
    [ $v = old ] && swap
  done
done
