#!/usr/bin/env bash
# On the device machine (bundled .devbuild): the GIN ipc backend's kernel paths (EPX_GIN_COPY=kernel
# EPX_GIN_SIGNAL=kernel) against the old defaults (ce, readback), emulated NIC 50 GB/s + 3 us:
# low-latency bench at 8 fake nodes (0, 128 tokens) old / new / new with EPX_GIN_STREAMS=process:8,
# high-throughput bench at 8 fake nodes (14 SMs) old / new; the low-latency tables (1, 32, 128,
# 256 tokens) at 2, 4, 8 fake nodes with the kernels; epx-bench --algo bucket / pp at 4 fake nodes; suites at 2 and 4
# fake nodes (quick), all with the kernels. (The 2026-12-03 run had both as defaults; now only the
# signal kernel is: docs/performance.md, "Choices measured".) Compact lines in $OUT/kernels.txt,
# printed at the end.
#   scripts/experiments/gpu-kernels-check.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/devbuild-env.sh
log="$OUT/kernels.txt"
. scripts/experiments/gpu-ab-lib.sh
ab_ll 8 old 0,128 EPX_GIN_COPY=ce EPX_GIN_SIGNAL=readback
kernels=(EPX_GIN_COPY=kernel EPX_GIN_SIGNAL=kernel)
ab_ll 8 new 0,128 "${kernels[@]}"
ab_ll 8 new-p8 0,128 EPX_GIN_STREAMS=process:8 "${kernels[@]}"
ab_ht old EPX_GIN_COPY=ce EPX_GIN_SIGNAL=readback
ab_ht new "${kernels[@]}"
for n in 2 4 8; do ab_ll "$n" table 1,32,128,256 "${kernels[@]}"; done
coll_bench 4 kernels 4 bucket,pp "${kernels[@]}" | grep " epx " | sed "s/^/coll4:/" >> "$log"
for n in 2 4; do
  EPX_TEST_QUICK=1 scripts/gpu-fn-suites.sh "$n" 150 modes,low_latency,pp,bucket EPX_TEST_QUICK=1 "${kernels[@]}" > /dev/null
done
grep -h "exit" "$OUT/summary.txt" >> "$log"
cat "$log"
