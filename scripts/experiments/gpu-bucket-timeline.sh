#!/usr/bin/env bash
# On the device machine: where a bucket call's time goes. Needs a bundle built with
# bucket-timeline.patch applied (git apply scripts/experiments/bucket-timeline.patch; build;
# scripts/gpu-bundle.sh; then revert the patch): that build stamps each phase of every bucket call
# with the GPU's global timer (EPX_BUCKET_TIMELINE=1) and prints the stamps at destroy. Runs
# epx-bench --algo bucket at 4 fake nodes (20 calls after 3 per op): 64 MiB with 8 and 4 CTAs, 64 MiB
# with 8 CTAs and the emulated NIC off, and 32 MiB with 8 CTAs (its FP32-wire reduce-scatter puts the
# bytes that 64 MiB puts with the BF16 wire). Writes $OUT/tl-<run>.txt (the stamps) and
# $OUT/bucket-timeline.csv (bucket-timeline.py). EPX_AB_BUILD=<dir>: the patched bundle's folder.
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/devbuild-env.sh
runs=()
one() {  # one <run> <emulated NIC: on|off> [epx-bench args]
  local run=$1 nic=$2; shift 2
  local emu=(); [ "$nic" = off ] && emu=(EPX_GIN_EMU_GBPS=off)
  env "${emu[@]}" EPX_BUCKET_TIMELINE=1 scripts/gpu-fn-bench.sh 4 150 "tl-$run" --algo bucket --iters 20 --warmup 3 "$@" > /dev/null
  grep -h "^TL" "$OUT/bench-fn4-tl-$run"/rank*.log > "$OUT/tl-$run.txt"
  grep -hE " epx " "$OUT/bench-fn4-tl-$run.txt" | sed -E "s/ +/ /g; s/^/$run: /" | tee -a "$OUT/bucket-timeline-bench.txt"
  runs+=("$run" "$OUT/tl-$run.txt")
}
one 64mib-c8 on --coll-ctas 8
one 64mib-c4 on --coll-ctas 4
one 64mib-c8-nic-off off --coll-ctas 8
one 32mib-c8 on --coll-ctas 8 --coll-mib 32
python3 scripts/experiments/bucket-timeline.py "${runs[@]}" --csv "$OUT/bucket-timeline.csv"
cat "$OUT/bucket-timeline.csv"
