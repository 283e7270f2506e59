#!/usr/bin/env bash
# On the device machine, in one call: hybrid mode's first run (bundle of the hybrid branch:
# scripts/gpu-bundle.sh, then mv .devbuild .devbuild-hybrid; carry .devbuild-hybrid). Steps of
# EPX_HYBRID_STEPS in order (default "direct4 v4x2 v8x4 v8x2 bench"):
#   direct4   direct mode still passes (modes, zero_copy) across 4 fake nodes
#   vNxR      the EP suites and the randomized test in hybrid mode across N fake nodes grouped into
#             virtual nodes of R (EPX_TEST_HYBRID=R; the forward hop runs over GIN)
#   bench     epx-bench at 8 fake nodes, virtual nodes of 4, direct against hybrid, emulated NIC
# EPX_HYBRID_SUITES overrides the fixed suites of vNxR, EPX_HYBRID_RANDOM_S the randomized test's
# seconds. Logs and the summary under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; export OUT
[ -d .devbuild-hybrid ] || { echo "need .devbuild-hybrid" >&2; exit 2; }
rm -rf .devbuild && cp -a .devbuild-hybrid .devbuild
. scripts/devbuild-env.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
for step in ${EPX_HYBRID_STEPS:-direct4 v4x2 v8x4 v8x2 bench}; do
  echo "== $step ($(date +%T))"
  case $step in
    direct4) scripts/gpu-fn-suites.sh 4 90 modes,zero_copy ;;
    v*x*)
      n=${step#v}; n=${n%x*}; rpn=${step#*x}
      scripts/gpu-fn-suites.sh "$n" 90 "${EPX_HYBRID_SUITES:-modes,edge,zero_copy,precision}" EPX_TEST_HYBRID="$rpn"
      scripts/gpu-fn-suites.sh "$n" 90 random EPX_TEST_HYBRID="$rpn" EPX_RANDOM_SECONDS="${EPX_HYBRID_RANDOM_S:-30}"
      grep -hE "random:|seed" "$OUT/fn$n-random/rank0.log" | head -6 ;;
    bench)
      for fw in direct hybrid; do
        extra=(); [ $fw = hybrid ] && extra=(--hybrid 4)
        scripts/gpu-fn-bench.sh 8 150 hybrid-$fw --tokens 4096 --hidden 7168 --topk 8 --experts 256 --sms 8 \
          --iters 10 --warmup 3 "${extra[@]}" > /dev/null
        echo "-- $fw"; grep -vE '^\s*$' "$OUT/bench-fn8-hybrid-$fw.txt" | tail -14
      done ;;
  esac
done
