#!/usr/bin/env bash
# On the device machine, in one call: low-latency dispatch in send rounds against the build before
# them. Bundles (scripts/gpu-bundle.sh on each, NCCL 2.28.9): .devbuild-main (before) and
# .devbuild-llr (send rounds); carry both. Steps of EPX_LLR_STEPS (default "rank1 fn2 ab fn8"):
#   rank1 / fnN  the low_latency and random_ll suites of the branch at 1 rank / across N fake nodes
#   ab           epx-bench --algo low-latency at 2 fake nodes, emulated NIC, --ll-align, 1 and 128
#                tokens, main / branch / main / branch
# Prediction (written before any run): BF16 dispatch at 128 tokens from ~370 us (main, aligned) to
# ~250 us (the wire overlapping 3/4 of the staging and the receiver's copy of earlier rounds);
# 1 token as on main (one GIN operation per destination: empty later rounds ride on round 0's).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; export OUT
[ -d .devbuild-main ] && [ -d .devbuild-llr ] || { echo "need .devbuild-main and .devbuild-llr" >&2; exit 2; }
rm -rf .devbuild && cp -a .devbuild-llr .devbuild
. scripts/devbuild-env.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
for step in ${EPX_LLR_STEPS:-rank1 fn2 ab fn8}; do
  echo "== $step ($(date +%T))"
  case $step in
    rank1)
      EPX_TEST_GPUS=1 EPX_RANDOM_SECONDS=15 timeout 90 .devbuild/bin/epx_ep_tests --run_test=low_latency:random_ll \
        --log_level=test_suite > "$OUT/llr-1rank.txt" 2>&1
      echo "1 rank: exit $?"; grep -E "random_ll:|error|did not" "$OUT/llr-1rank.txt" | head -8 ;;
    fn*)
      n=${step#fn}
      scripts/gpu-fn-suites.sh "$n" 120 low_latency:random_ll EPX_RANDOM_SECONDS=20 ;;
    ab)
      for run in ${EPX_LLR_RUNS:-a b}; do for b in main llr; do
        ab=(); [ $b = main ] && ab=(EPX_AB_BUILD=.devbuild-main)
        env "${ab[@]}" scripts/gpu-fn-bench.sh 2 100 ll-$b-$run --algo low-latency --ll-tokens 1,128 --hidden 7168 \
          --topk 8 --experts 256 --sms 8 --iters 20 --warmup 5 --ll-align > /dev/null
        echo "-- $b ($run)"; grep -E '^ +[0-9]' "$OUT/bench-fn2-ll-$b-$run.txt"
      done; done ;;
  esac
done
