#!/usr/bin/env bash
# On the device machine (bundled .devbuild): the GIN ipc backend's kernel paths as defaults
# (EPX_GIN_SIGNAL=kernel by default; fake-nodes.sh sets EPX_GIN_COPY=kernel above 2 processes per
# GPU) against the previous defaults (EPX_GIN_COPY=ce EPX_GIN_SIGNAL=readback), emulated NIC 50 GB/s +
# 3 us: low-latency bench at 8 fake nodes (0, 128 tokens) old / new / new with EPX_GIN_STREAMS=process:8,
# high-throughput bench at 8 fake nodes (14 SMs) old / new; the issue-9 low-latency tables (1, 32, 128,
# 256 tokens) at 2, 4, 8 fake nodes; coll_perf at 4 fake nodes; suites with the new defaults at 2 and
# 4 fake nodes (quick). Compact lines in $OUT/kernels.txt, printed at the end.
#   scripts/gpu-kernels-check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/devbuild-env.sh
log="$OUT/kernels.txt"
ll() {  # ll <nodes> <label> <tokens> [VAR=value...]
  local n=$1 label=$2 tokens=$3; shift 3
  env "$@" scripts/gpu-fn-bench.sh "$n" 120 "ll-$label" --algo low-latency --ll-tokens "$tokens" --hidden 7168 \
    --topk 8 --experts 256 --sms 8 --iters 20 --warmup 5 > /dev/null
  grep -E "^ +[0-9]|^# gin " "$OUT/bench-fn$n-ll-$label.txt" | sed -E "s/ +/ /g; s/^/ll$n $label:/" >> "$log"
}
ht() {  # ht <label> [VAR=value...]
  local label=$1; shift
  env "$@" scripts/gpu-fn-bench.sh 8 200 "ht-$label" --tokens 4096 --hidden 7168 --topk 8 --experts 256 \
    --routing uniform --layout dedup --mode capacity --sms 14 --iters 6 --warmup 2 --no-baseline > /dev/null
  grep -E "^  uniform" "$OUT/bench-fn8-ht-$label.txt" | sed -E "s/ +/ /g; s/^/ht8 $label:/" >> "$log"
}
ll 8 old 0,128 EPX_GIN_COPY=ce EPX_GIN_SIGNAL=readback
ll 8 new 0,128
ll 8 new-p8 0,128 EPX_GIN_STREAMS=process:8
ht old EPX_GIN_COPY=ce EPX_GIN_SIGNAL=readback
ht new
for n in 2 4 8; do ll "$n" table 1,32,128,256; done
scripts/gpu-fn-suites.sh 4 150 coll_perf EPX_GIN_EMU_GBPS=50 EPX_GIN_EMU_LATENCY_US=3 EPX_COLL_PERF_CTAS=4 > /dev/null
grep -hE " epx " "$OUT/fn4-coll_perf/rank0.log" | sed -E "s/ +/ /g; s/^/coll4:/" >> "$log"
for n in 2 4; do
  EPX_TEST_QUICK=1 scripts/gpu-fn-suites.sh "$n" 150 modes,low_latency,pp,bucket EPX_TEST_QUICK=1 > /dev/null
done
grep -h "exit" "$OUT/summary.txt" >> "$log"
cat "$log"
