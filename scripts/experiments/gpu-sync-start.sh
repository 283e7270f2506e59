#!/usr/bin/env bash
# On the device machine, in one call (carry .devbuild): epx-bench without and with --sync-start
# (an untimed one-value all-reduce before every timed op), emulated NIC 50 GB/s + 3 us, hidden
# 7168, top-8 of 256. Steps (EPX_SYNC_STEPS, default "ll2 ht4 ht8 hy8"):
#   llN  low-latency at N fake nodes, 128 tokens, 8 SMs, --iters 20 --warmup 5
#   htN  high-throughput at N fake nodes, 4096 tokens, uniform, dedup, capacity, 14 SMs, --iters 6 --warmup 2
#   hyN  hybrid (--hybrid 4) at N fake nodes, 4096 tokens, 8 SMs, --iters 3 --warmup 1
# Question: is FP8 dispatch's 1.2-1.4 x (high-throughput) and low-latency's 3.4 x at 2 fake nodes
# the op's own cost, or the skew between ranks that the op before leaves?
# Prediction (written before the run): with --sync-start high-throughput FP8 dispatch falls to
# ~1.15 x at 8 fake nodes (BF16 dispatch and combine move by < 3 %); low-latency BF16 dispatch at
# 2 fake nodes falls from ~500 to ~350 us (the 140-180 us offset between the ranks goes).
# Lines (spaces squeezed, "<step> <plain|sync>:" first) in $OUT/sync-start.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; export OUT
log=$OUT/sync-start.txt
S="--hidden 7168 --topk 8 --experts 256"
for step in ${EPX_SYNC_STEPS:-ll2 ht4 ht8 hy8}; do
  n=${step#??}
  case $step in
    ll*) args="--algo low-latency --ll-tokens 128 $S --sms 8 --iters 20 --warmup 5"; pat="^ +[0-9]|^# gin " ;;
    ht*) args="--tokens 4096 $S --routing uniform --layout dedup --mode capacity --sms 14 --iters 6 --warmup 2 --no-baseline"; pat="^  uniform" ;;
    hy*) args="--tokens 4096 $S --sms 8 --iters 3 --warmup 1 --no-baseline --hybrid 4"; pat="^  (uniform|grouped) " ;;
  esac
  for v in plain sync; do
    extra=""; [ $v = sync ] && extra=--sync-start
    scripts/gpu-fn-bench.sh "$n" 150 "$step-$v" $args $extra > /dev/null
    grep -E "$pat|^# result" "$OUT/bench-fn$n-$step-$v.txt" | sed -E "s/ +/ /g; s/^/$step $v:/" >> "$log"
  done
done
cat "$log"
