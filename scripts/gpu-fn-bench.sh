#!/usr/bin/env bash
# On the device machine (bundled .devbuild): one epx-bench run across N fake nodes with the emulated
# NIC (EPX_GIN_EMU_GBPS / EPX_GIN_EMU_LATENCY_US from the environment; default 50 GB/s and 3 us, "off"
# to disable), under its own time limit. Rank 0's table goes to $OUT/<tag>.txt, every rank's log under
# $OUT/<tag>/ (tag = bench-fn<N>-<label>). EPX_AB_BUILD=<dir> runs <dir>/bin/epx-bench with
# <dir>/lib first on the library path (an older build for an A/B; the rest from .devbuild/).
#   scripts/gpu-fn-bench.sh N limit_s label [epx-bench args...]
set -uo pipefail
cd "$(dirname "$0")/.."
n=$1 limit=$2 label=$3; shift 3
. scripts/devbuild-env.sh
if [ "${EPX_GIN_EMU_GBPS:-}" = off ]; then unset EPX_GIN_EMU_GBPS EPX_GIN_EMU_LATENCY_US
else export EPX_GIN_EMU_GBPS=${EPX_GIN_EMU_GBPS:-50} EPX_GIN_EMU_LATENCY_US=${EPX_GIN_EMU_LATENCY_US:-3}; fi
tag=bench-fn$n-$label
start=$(date +%s)
build=${EPX_AB_BUILD:-.devbuild}
LD_LIBRARY_PATH=$PWD/$build/lib:$LD_LIBRARY_PATH scripts/fake-nodes.sh -n "$n" -t "$limit" -l "$OUT/$tag" -- \
  "$build/bin/epx-bench" "$@" > "$OUT/$tag.run.txt" 2>&1
rc=$?
cp "$OUT/$tag/rank0.log" "$OUT/$tag.txt" 2>/dev/null
echo "$n fake nodes, bench $label (emu ${EPX_GIN_EMU_GBPS:-off} GB/s): exit $rc ($(( $(date +%s) - start )) s)" | tee -a "$OUT/summary.txt"
[ $rc -ne 0 ] && grep -hE "error|FAIL|timed out" "$OUT/$tag"/rank*.log | head -8
exit $rc
