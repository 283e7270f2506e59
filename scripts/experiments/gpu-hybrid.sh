#!/usr/bin/env bash
# On the device machine, in one call (bundle: scripts/gpu-bundle.sh, NCCL 2.28.9; carry .devbuild):
# hybrid forwarding across fake nodes grouped into virtual nodes. Steps of EPX_HYBRID_STEPS in order
# (default "direct4 v4x2 v8x4 v8x2 bench"):
#   direct4   direct mode's suites modes and zero_copy across 4 fake nodes
#   vNxR      the EP suites (default modes, edge, zero_copy, precision, graph) and the randomized test in
#             hybrid mode across N fake nodes grouped into virtual nodes of R (EPX_TEST_HYBRID=R;
#             the forward hop runs over GIN): v4x2 is 2 x 2, v8x4 2 x 4, v8x2 4 x 2
#   bench     epx-bench at 8 fake nodes, direct against --hybrid 4 (2 x 4), 4096 tokens, hidden
#             7168, top-8 of 256, 8 SMs, emulated NIC 50 GB/s + 3 us (gpu-fn-bench.sh)
# EPX_HYBRID_SUITES overrides the fixed suites of vNxR, EPX_HYBRID_RANDOM_S the randomized test's
# seconds, EPX_HYBRID_BENCH_ARGS the bench's iterations (default --iters 3 --warmup 1). Logs and the summary under $OUT; results in docs/hybrid.md.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; export OUT
. scripts/devbuild-env.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
for step in ${EPX_HYBRID_STEPS:-direct4 v4x2 v8x4 v8x2 bench}; do
  echo "== $step ($(date +%T))"
  case $step in
    direct4) scripts/gpu-fn-suites.sh 4 90 modes,zero_copy ;;
    v*x*)
      n=${step#v}; n=${n%x*}; rpn=${step#*x}
      scripts/gpu-fn-suites.sh "$n" 90 "${EPX_HYBRID_SUITES:-modes,edge,zero_copy,precision,graph}" EPX_TEST_HYBRID="$rpn"
      scripts/gpu-fn-suites.sh "$n" 90 random EPX_TEST_HYBRID="$rpn" EPX_RANDOM_SECONDS="${EPX_HYBRID_RANDOM_S:-30}"
      grep -hE "^random: " "$OUT/fn$n-random/rank0.log" | head -6 ;;
    bench)
      for fw in direct hybrid; do
        extra=(); [ $fw = hybrid ] && extra=(--hybrid 4)
        scripts/gpu-fn-bench.sh 8 150 hybrid-$fw --tokens 4096 --hidden 7168 --topk 8 --experts 256 --sms 8 \
          ${EPX_HYBRID_BENCH_ARGS:---iters 3 --warmup 1} "${extra[@]}" > /dev/null
        echo "-- $fw"; grep -vE '^\s*$' "$OUT/bench-fn8-hybrid-$fw.txt" | tail -24
      done ;;
  esac
done
