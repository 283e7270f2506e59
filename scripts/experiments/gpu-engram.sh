#!/usr/bin/env bash
# On the device machine, in one call (bundle: scripts/gpu-bundle.sh, NCCL 2.28.9; carry .devbuild):
# the Engram suites at 1 rank (stops here if they fail, printing the failures), epx-bench
# --algo engram at 8 fake nodes with the emulated NIC (50 GB/s + 3 us), the suites at 2 and 8 fake
# nodes, the bench at 2. Logs and the summary under $OUT. Bench arguments: EPX_ENGRAM_BENCH_ARGS.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; export OUT
. scripts/devbuild-env.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
echo "== 1 rank"
EPX_TEST_GPUS=1 EPX_RANDOM_SECONDS=10 timeout 90 .devbuild/bin/epx_ep_tests --run_test=engram:random_engram \
  --log_level=test_suite > "$OUT/engram-1rank.txt" 2>&1
rc=$?
echo "1 rank: exit $rc"; grep -E "random_engram:|Leaving test suite|Test case .* did not" "$OUT/engram-1rank.txt" | head -8
if [ $rc -ne 0 ]; then grep -E "error|fail|FAIL" "$OUT/engram-1rank.txt" | head -40; exit 1; fi
bench() {
  scripts/gpu-fn-bench.sh "$1" 100 engram --algo engram ${EPX_ENGRAM_BENCH_ARGS:-}
  grep -vE '^\s*$' "$OUT/bench-fn$1-engram.txt" | tail -16
}
echo "== bench, 8 fake nodes"; bench 8
for n in 2 8; do
  scripts/gpu-fn-suites.sh "$n" 120 engram:random_engram EPX_RANDOM_SECONDS=10
  grep -hE "random_engram:" "$OUT/fn$n-engram:random_engram/rank0.log" | head -3
done
echo "== bench, 2 fake nodes"; bench 2
