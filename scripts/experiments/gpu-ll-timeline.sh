#!/usr/bin/env bash
# On the device machine: where a low-latency dispatch's time goes at 2 fake nodes, with the emulated
# NIC on (50 GB/s + 3 us) and off. Needs a bundle built with ll-timeline.patch applied (git apply
# scripts/experiments/ll-timeline.patch; build epx-bench; copy it and libepx into a bundle, e.g.
# .devbuild-tl/; then revert the patch): with EPX_LL_TIMELINE=1 that build stamps each phase of
# every dispatch launch with the GPU's global timer (one timer for all processes on the GPU) and
# prints the stamps (lines "TLL ...") at exit. ll-timeline.py prints, per kind of launch, the median
# of each phase per rank and the time from one rank's put to the other's arrival.
# Run on 2026-12-06 (one H100, NCCL 2.28.9; docs/low-latency.md, "Where the NIC-on time goes"). The
# bundle's lib/ must not hold another NCCL, nor may a stray .devbuild/ (devbuild-env.sh puts its lib first).
#   EPX_AB_BUILD=<bundle dir> OUT=<dir> scripts/experiments/gpu-ll-timeline.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
export EPX_AB_BUILD=${EPX_AB_BUILD:-.devbuild-tl} EPX_LL_TIMELINE=1
for emu in 50 off; do
  EPX_GIN_EMU_GBPS=$emu scripts/gpu-fn-bench.sh 2 120 tl-$emu --algo low-latency --ll-tokens 0,128 --hidden 7168 --topk 8 \
    --experts 256 --sms 8 --iters 20 --warmup 5 > /dev/null
  echo "== emulated NIC: $emu"
  grep -E '^ +[0-9]' "$OUT/bench-fn2-tl-$emu.txt"
  python3 scripts/experiments/ll-timeline.py "$OUT"/bench-fn2-tl-$emu/rank*.log
done
