#!/usr/bin/env bash
# On the device machine, in one call: the timeout suite on NCCL 2.28.9 at 4 and 8 fake nodes and in
# hybrid mode at 4 (2 x 2); a CTA x chunk sweep of the expert load balancing kernels on NCCL 2.30.7
# (the reduction needs GIN get); then (EPX_SWEEP_SUITES, default 1) the EP suites on 2.28.9 at 4
# and 8 fake nodes (EPX_SWEEP_STEPS: gpu-run.sh fakenodes steps, default ep4,ep8).
# Carry .devbuild (scripts/gpu-bundle.sh, NCCL 2.28.9), .devbuild-lb (the same built with
# cmake -DEPX_NCCL_HOME=<NCCL 2.30.7>, EPX_BUILD_DIR set) and .nccl/2.30.7/libnccl.so.2.gz.
# Sweep: epx-bench --algo lb at 2 fake nodes, one DeepSeek-V3 expert, emulated NIC 50 GB/s + 3 us,
# EPX_SWEEP (default "8:2048 4:2048 16:2048 8:8192 16:8192 8:2048") CTAs:chunk KiB, one run each.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; export OUT
for t in 4:0 8:0 4:2; do
  scripts/gpu-fn-suites.sh "${t%:*}" 90 timeout EPX_TEST_HYBRID="${t#*:}" | head -3
  grep -ahE "error: in" "$OUT/fn${t%:*}-timeout"/rank*.log | head -4
  mv "$OUT/fn${t%:*}-timeout" "$OUT/fn${t%:*}-timeout-h${t#*:}"
done
gunzip -c .nccl/2.30.7/libnccl.so.2.gz > .devbuild-lb/lib/libnccl.so.2
i=0
for v in ${EPX_SWEEP:-8:2048 4:2048 16:2048 8:8192 16:8192 8:2048}; do
  c=${v%:*} k=${v#*:} i=$((i + 1))
  EPX_AB_BUILD=.devbuild-lb scripts/gpu-fn-bench.sh 2 60 "lb$i-c$c-k$k" --algo lb --iters 5 --warmup 2 \
    --coll-ctas "$c" --chunk-kib "$k" > /dev/null
  echo "-- $c CTAs, $k KiB"; grep -E "^lb .* epx" "$OUT/bench-fn2-lb$i-c$c-k$k.txt"
done
[ "${EPX_SWEEP_SUITES:-1}" = 0 ] && exit 0
EPX_FAKENODES_BUDGET_S=${EPX_FAKENODES_BUDGET_S:-420} EPX_FAKENODES_STEPS=${EPX_SWEEP_STEPS:-ep4,ep8} scripts/gpu-run.sh fakenodes > /dev/null 2>&1
cat "$OUT/fakenodes-summary.txt"
for f in ep-mp4 ep-mp8; do grep -ahE "error: in" "$OUT/fakenodes/$f"/rank*.log | head -10; done
exit 0
