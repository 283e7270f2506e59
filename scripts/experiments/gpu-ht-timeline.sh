#!/usr/bin/env bash
# EXPERIMENT. On the device machine: where a high-throughput dispatch's time goes at 4 fake nodes
# (direct mode, GIN put rounds), with the emulated NIC on (50 GB/s + 3 us) and off, BF16 and FP8.
# Question: the fixed ~300 us above the network floor that puts FP8 dispatch at 1.20 x where BF16
# is at 1.08-1.10 x (docs/performance.md, "Open: FP8 dispatch is 1.2-1.4 x"): is it before the
# first put (per-row arrays and round 0 staged, peers' readiness), between the last round's put and
# the last arrival, or after it (completeGin, end())?
# Needs a bundle built with ht-timeline.patch applied (a throwaway instrumentation, not in the
# product): with EPX_HT_TIMELINE=1 its epx-bench passes each timed dispatch a buffer of pinned host
# memory, the dispatch kernel stamps its phases there with the GPU's global timer (one clock for
# every process on the GPU; ht_timeline.h in the patch lists the points), and epx-bench prints one
# "THT ..." line per launch into each rank's log. Build it here (no GPU needed), next to the plain
# bundle: the plugin and the other libraries come from .devbuild/, and gpu-fn-bench.sh puts
# EPX_AB_BUILD's lib/ before .devbuild/lib (whose libepx is the unpatched one); the bundle's lib/
# must not hold another NCCL:
#   scripts/gpu-bundle.sh                                      # .devbuild/ of the unpatched tree
#   git apply scripts/experiments/ht-timeline.patch
#   cmake -S . -B build-tl -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build build-tl -j2 --target epx epx-bench
#   rm -rf .devbuild-tl && mkdir -p .devbuild-tl/bin .devbuild-tl/lib
#   cp build-tl/tools/epx-bench/epx-bench .devbuild-tl/bin/ && cp -P build-tl/host/libepx.so* .devbuild-tl/lib/
#   find .devbuild-tl -type f -exec strip --strip-debug {} +
#   git apply -R scripts/experiments/ht-timeline.patch
# then the device tool's `run` with command `OUT=$OUT scripts/experiments/gpu-ht-timeline.sh` and
# carry [".devbuild", ".devbuild-tl"]. Steps: the same bundle without EPX_HT_TIMELINE (no stamps,
# no added barriers) with the NIC on, as the reference for what the stamps cost; then with the
# stamps, NIC on and off. Per step the bench table, then ht-timeline.py: per rank and dtype the
# median of each phase since the launch start, the gap from the last round's post to the last
# arrival, and across ranks each round's put-to-arrival time. All in $OUT/ht-timeline.txt.
# Not run yet (written 2026-12-08).
#   EPX_AB_BUILD=<bundle dir> OUT=<dir> scripts/experiments/gpu-ht-timeline.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; export OUT
export EPX_AB_BUILD=${EPX_AB_BUILD:-.devbuild-tl}
[ -x "$EPX_AB_BUILD/bin/epx-bench" ] || { echo "gpu-ht-timeline: no $EPX_AB_BUILD/bin/epx-bench (see the header)" >&2; exit 2; }
log=$OUT/ht-timeline.txt
: > "$log"
A="--tokens 4096 --hidden 7168 --topk 8 --experts 256 --routing uniform --layout dedup --mode capacity --sms 14
   --iters 6 --warmup 2 --no-baseline"
# The bench table of one run (rank 0's log less the THT lines).
table() { sed -n '/^# routing/,/^# result/p' "$OUT/bench-fn4-$1.txt" | grep -v '^THT '; }
EPX_GIN_EMU_GBPS=50 scripts/gpu-fn-bench.sh 4 150 htl-ref $A > /dev/null
{ echo "== emulated NIC 50 GB/s + 3 us, no stamps (reference)"; table htl-ref; } >> "$log"
for emu in 50 off; do
  EPX_HT_TIMELINE=1 EPX_GIN_EMU_GBPS=$emu scripts/gpu-fn-bench.sh 4 150 htl-$emu $A > /dev/null
  { echo "== emulated NIC: $emu, stamped"; table htl-$emu
    python3 scripts/experiments/ht-timeline.py "$OUT"/bench-fn4-htl-$emu/rank*.log; } >> "$log" 2>&1
done
cat "$log"
