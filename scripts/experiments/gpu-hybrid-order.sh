#!/usr/bin/env bash
# On the device machine, in one call: A/B of the hybrid hops' order at 8 fake nodes as 2 x 4 virtual
# nodes (epx-bench --hybrid 4, 4096 tokens, hidden 7168, top-8 of 256, 8 SMs, emulated NIC 50 GB/s
# + 3 us, --iters 3 --warmup 1). base (.devbuild-base, carry it): the records went out after the
# rows for the own node, and the partials for the forwarders after the rows returned directly; new
# (.devbuild): the hop that feeds the forwarders first. Direct mode in the same call for reference,
# then the new build's suites in hybrid mode (2 x 4 modes; 4 x 2 suites and random).
# Prediction (written before the run): the emulated NIC serializes a rank's puts, and the forwarder
# sat idle waiting for records that left last; records first takes uniform BF16 dispatch from
# 1.32 x to about 1.10 x of its two-hop floor, combine from 1.37 x to about 1.2 x.
# Result (2026-12-07, one H100): dispatch as predicted (uniform BF16 1.32 -> 1.11 x, FP8 1.69 ->
# 1.33 x); combine no faster with uniform routing and 13 % slower with grouped, so only the
# dispatch order was kept (docs/performance.md, "Choices measured"). Rerunning it needs the builds
# of 00304b4 (new, both orders changed) and its parent (base).
# Logs under $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
REAL_OUT=${OUT:-gpu-logs}; export OUT=/tmp/logs; mkdir -p "$OUT" "$REAL_OUT"
. scripts/devbuild-env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
B="--tokens 4096 --hidden 7168 --topk 8 --experts 256 --sms 8 --iters 3 --warmup 1 --no-baseline"
show() { echo "-- $1"; grep -E "^  (uniform|grouped) |floor  |^# result" "$OUT/bench-fn8-$1.txt"; }
for v in base new; do
  b=.devbuild; [ $v = base ] && b=.devbuild-base
  EPX_AB_BUILD=$b timeout 100 bash scripts/gpu-fn-bench.sh 8 90 hyb-$v $B --hybrid 4 > /dev/null; show hyb-$v
done
timeout 100 bash scripts/gpu-fn-bench.sh 8 90 direct $B > /dev/null; show direct
bash scripts/gpu-fn-suites.sh 8 60 modes EPX_TEST_HYBRID=4 | head -4
EPX_HYBRID_STEPS=v8x2 EPX_HYBRID_SUITES=${EPX_ORDER_SUITES:-modes,edge,precision,zero_copy} EPX_HYBRID_RANDOM_S=20 \
  timeout 250 bash scripts/experiments/gpu-hybrid.sh 2>&1 | grep -E "fake nodes|random:|==|error|FAIL" | head -30
tar czf "$REAL_OUT/logs.tgz" -C /tmp logs
