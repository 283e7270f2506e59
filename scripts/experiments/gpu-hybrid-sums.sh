#!/usr/bin/env bash
# On the device machine, in one call: A/B of hybrid combine's node sums in rounds at 8 fake nodes
# as 2 x 4 virtual nodes (epx-bench --hybrid 4, 4096 tokens, hidden 7168, top-8 of 256, 8 SMs,
# emulated NIC 50 GB/s + 3 us, --iters ${EPX_SUMS_ITERS:-4} --warmup 1). base (.devbuild-base, carry it): each
# forwarder put every source node its node sums in one piece and the source reduced after all
# landed; new (.devbuild): the sums go in put rounds as they are summed and the source reduces each
# layout chunk of tokens once its prefix landed (as direct mode does). Then the new build's modes
# suite at 2 x 4 and the randomized test at 4 x 2.
# Prediction (written before the run): the source's reduction (~1.5 ms at 8 processes on one GPU)
# overlaps the wire; uniform combine ~7960 -> ~6900 us (1.36 -> ~1.18 x the two-hop floor).
# Ran 2026-12-07 (docs/performance.md, "Choices measured"); the rounds are in use. .devbuild-base
# was a build of the commit before them (scripts/gpu-bundle.sh).
# EPX_SUMS_AB: the runs in order (default "base new"; a name starting with "base" runs the base
# build), EPX_SUMS_ITERS (default 4), EPX_SUMS_SUITES=0 skips the suites. Logs under $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
REAL_OUT=${OUT:-gpu-logs}; export OUT=/tmp/logs; mkdir -p "$OUT" "$REAL_OUT"
. scripts/devbuild-env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
B="--tokens 4096 --hidden 7168 --topk 8 --experts 256 --sms 8 --iters ${EPX_SUMS_ITERS:-4} --warmup 1 --no-baseline --hybrid 4"
for v in ${EPX_SUMS_AB:-base new}; do
  b=.devbuild; case $v in base*) b=.devbuild-base ;; esac
  EPX_AB_BUILD=$b timeout 70 bash scripts/gpu-fn-bench.sh 8 65 sums-$v $B > /dev/null
  echo "-- $v"; grep -E "^  (uniform|grouped) |^# result" "$OUT/bench-fn8-sums-$v.txt" | cut -c1-190
done
if [ "${EPX_SUMS_SUITES:-1}" != 0 ]; then
  bash scripts/gpu-fn-suites.sh 8 60 modes EPX_TEST_HYBRID=4 | head -4
  bash scripts/gpu-fn-suites.sh 8 60 random EPX_TEST_HYBRID=2 EPX_RANDOM_SECONDS=15 | head -4
  grep -h "^random: " "$OUT/fn8-random/rank0.log" | head -3
fi
tar czf "$REAL_OUT/logs.tgz" -C /tmp logs
