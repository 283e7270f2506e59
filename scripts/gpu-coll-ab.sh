#!/usr/bin/env bash
# On the device machine: the coll_perf suite (bucket collectives and PP bus bandwidth) at N fake nodes
# with the emulated NIC (50 GB/s, 3 us), 4 CTAs, alternating two bundles: .devbuild (new) and the
# bundle given (old), `reps` times each, so drift of the machine shows in both. Lines under
# $OUT/coll-ab.txt (from rank 0's log), prefixed new/old.
#   scripts/gpu-coll-ab.sh N .devbuild-old [reps, default 2] [filter regex, default "pp ring"] [test, default coll_perf;
#                          coll_perf/pp_send_recv: PP only]
set -uo pipefail
cd "$(dirname "$0")/.."
n=$1 old=$2 reps=${3:-2} filter=${4:-pp ring} test=${5:-coll_perf}
[ -d "$old" ] || { echo "gpu-coll-ab: no bundle $old" >&2; exit 2; }
swap() { mv .devbuild .devbuild-swap && mv "$old" .devbuild && mv .devbuild-swap "$old"; }
for i in $(seq "$reps"); do
  for v in new old; do
    [ $v = old ] && swap
    scripts/gpu-fn-suites.sh "$n" 300 "$test" EPX_GIN_EMU_GBPS=50 EPX_GIN_EMU_LATENCY_US=3 EPX_COLL_PERF_CTAS=4 > /dev/null
    grep -hE "$filter" "${OUT:-gpu-logs}/fn$n-${test//\//_}/rank0.log" | sed "s/^/$v /" | tee -a "${OUT:-gpu-logs}/coll-ab.txt"
    [ $v = old ] && swap
  done
done
