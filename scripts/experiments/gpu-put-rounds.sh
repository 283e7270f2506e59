#!/usr/bin/env bash
# On the device machine (bundled .devbuild): epx-bench across fake nodes with the emulated NIC (50 GB/s,
# 3 us) at the DeepSeek-V3 shape (4096 tokens, hidden 7168, top-8 of 256, uniform), once per
# EPX_GIN_PUT_ROUNDS value, to choose the put-round policy
# (docs/performance.md). Prints each run's epx row and GIN-op lines.
#   scripts/experiments/gpu-put-rounds.sh "N:R1,R2 N:R..." [extra epx-bench args]
# e.g. scripts/experiments/gpu-put-rounds.sh "8:1,2 2:8 4:8" --sms 16
set -uo pipefail
cd "$(dirname "$0")/../.."
plan=$1; shift
. scripts/devbuild-env.sh
for item in $plan; do
  n=${item%%:*}
  IFS=, read -r -a rounds <<< "${item#*:}"
  for r in "${rounds[@]}"; do
    EPX_GIN_PUT_ROUNDS=$r scripts/gpu-fn-bench.sh "$n" $(( 60 + 20 * n )) "rounds$r" --tokens 4096 --hidden 7168 --topk 8 \
      --experts 256 --routing uniform --iters 6 --warmup 2 --no-baseline "$@" > /dev/null
    echo "== $n fake nodes, EPX_GIN_PUT_ROUNDS=$r"
    grep -E "^  (uniform|grouped) |dispatch_bf16 |combine_bf16 |dispatch_fp8 " "$OUT/bench-fn$n-rounds$r.txt"
  done
done
