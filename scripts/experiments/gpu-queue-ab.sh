#!/usr/bin/env bash
# On the device machine (bundled .devbuild): do the caller's streams and the GIN ipc backend's
# streams share CUDA hardware queues (a backend copy then waits behind a kernel that waits for a
# peer)? PP ring at 4 fake nodes, 16 MiB, 4 CTAs, with the side stream moved across queues
# (EPX_BENCH_STREAM_SHIFT=0..4) and with the backend's streams at high priority
# (EPX_GIN_STREAM_PRIORITY=high); then PP at 8, the collectives at 4, LL (128 tokens) and HT at 8
# fake nodes, default against high. Emulated NIC 50 GB/s + 3 us. Lines in $OUT/queue-ab.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/devbuild-env.sh
log="$OUT/queue-ab.txt"
. scripts/experiments/gpu-ab-lib.sh
pp() {  # pp <nodes> <label> <algo> [VAR=value...]
  local n=$1 label=$2 algo=$3; shift 3
  env "$@" scripts/gpu-fn-bench.sh "$n" 120 "q-$label" --algo "$algo" --coll-ctas 4 --iters 20 --warmup 3 > /dev/null
  grep -hE " epx |^# gin " "$OUT/bench-fn$n-q-$label.txt" | sed -E "s/ +/ /g; s/^/$n $label: /" | tee -a "$log"
}
for k in 0 1 2 3 4; do pp 4 "shift$k" pp EPX_BENCH_STREAM_SHIFT=$k; done
for k in 0 2; do pp 4 "high-shift$k" pp EPX_GIN_STREAM_PRIORITY=high EPX_BENCH_STREAM_SHIFT=$k; done
pp 8 def pp
pp 8 high pp EPX_GIN_STREAM_PRIORITY=high
pp 4 bucket-high bucket EPX_GIN_STREAM_PRIORITY=high
ab_ll 8 def 128
ab_ll 8 high 128 EPX_GIN_STREAM_PRIORITY=high
ab_ht def
ab_ht high EPX_GIN_STREAM_PRIORITY=high
grep -E "^ll|^ht" "$log"
