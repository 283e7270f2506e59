#!/usr/bin/env bash
# On the device machine, in one call (bundle: scripts/gpu-bundle.sh, NCCL 2.28.9; carry .devbuild):
# the steps of EPX_ENGRAM_STEPS in order (default "fn2 bench8 rank1 fn8 bench2"): rankN / fnN the
# Engram suites (engram, random_engram) at 1 rank / across N fake nodes, benchN epx-bench --algo
# engram across N fake nodes with the emulated NIC (50 GB/s + 3 us; arguments from
# EPX_ENGRAM_BENCH_ARGS). Logs and the summary under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; export OUT
. scripts/devbuild-env.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
for step in ${EPX_ENGRAM_STEPS:-fn2 bench8 rank1 fn8 bench2}; do
  echo "== $step ($(date +%T))"
  case $step in
    rank1)
      EPX_TEST_GPUS=1 EPX_RANDOM_SECONDS=10 timeout 60 .devbuild/bin/epx_ep_tests --run_test=engram:random_engram \
        --log_level=test_suite > "$OUT/engram-1rank.txt" 2>&1
      echo "1 rank: exit $?"; grep -E "random_engram:|error|Test case .* did not" "$OUT/engram-1rank.txt" | head -20 ;;
    fn*)
      n=${step#fn}
      scripts/gpu-fn-suites.sh "$n" 90 engram:random_engram EPX_RANDOM_SECONDS=8
      grep -hE "random_engram:|error" "$OUT/fn$n-engram:random_engram/rank0.log" | head -20 ;;
    bench*)
      n=${step#bench}
      scripts/gpu-fn-bench.sh "$n" 80 engram --algo engram ${EPX_ENGRAM_BENCH_ARGS:-}
      grep -vE '^\s*$' "$OUT/bench-fn$n-engram.txt" | tail -16 ;;
  esac
done
