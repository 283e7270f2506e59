#!/usr/bin/env bash
# On the device machine, in one call (bundle: scripts/gpu-bundle.sh, NCCL 2.28.9; carry .devbuild):
# the Engram suites at 1 rank and 2 and 8 fake nodes (EPX_ENGRAM_NODES), then epx-bench --algo engram at 2 and 8 fake
# nodes with the emulated NIC (50 GB/s + 3 us). Logs and the summary under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; export OUT
. scripts/devbuild-env.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
echo "== 1 rank"
EPX_TEST_GPUS=1 EPX_RANDOM_SECONDS=15 timeout 100 .devbuild/bin/epx_ep_tests --run_test=engram:random_engram \
  --log_level=test_suite > "$OUT/engram-1rank.txt" 2>&1
echo "1 rank: exit $?"; grep -E "random_engram:|error|FAIL|Leaving test suite" "$OUT/engram-1rank.txt" | head -12
for n in ${EPX_ENGRAM_NODES:-2 8}; do
  scripts/gpu-fn-suites.sh "$n" 150 engram:random_engram EPX_RANDOM_SECONDS=15
  grep -hE "random_engram:" "$OUT/fn$n-engram:random_engram/rank0.log" | head -3
done
echo "== bench"
for n in 8 2; do
  scripts/gpu-fn-bench.sh "$n" 120 engram --algo engram ${EPX_ENGRAM_BENCH_ARGS:-}
  grep -vE '^\s*$' "$OUT/bench-fn$n-engram.txt" | tail -20
done
