#!/usr/bin/env bash
# On the device machine (bundled .devbuild): where the ipc GIN backend's per-operation copy latency
# at 8 fake nodes comes from (docs/low-latency.md, "Where the time goes"). The low-latency bench at
# 8 fake nodes (0 and 128 tokens) under copy-stream plans, copy modes and signal modes:
# EPX_GIN_STREAMS=process (one copy stream per process, what fake-nodes.sh sets above 2 processes
# per GPU) against process:8 (one per peer), EPX_GIN_COPY=kernel (small puts by the backend's copy
# kernel), EPX_GIN_SIGNAL=kernel (signals by device atomics), both, and EPX_GIN_COPY=memcpy; the
# EP/LL/PP suites at 8 fake nodes with both kernel modes; the high-throughput bench at 8 fake
# nodes (14 SMs) for process, both kernel modes, process:8.
# Lines in $OUT/copy-ab.txt.
#   scripts/gpu-copy-ab.sh
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/devbuild-env.sh
log="$OUT/copy-ab.txt"
ll() {  # ll <nodes> <label> [VAR=value...]
  local n=$1 label=$2; shift 2
  env "$@" scripts/gpu-fn-bench.sh "$n" 120 "ll-$label" --algo low-latency --ll-tokens 0,128 --hidden 7168 \
    --topk 8 --experts 256 --sms 8 --iters 20 --warmup 5 > /dev/null
  grep -E "^ +[0-9]|^# gin " "$OUT/bench-fn$n-ll-$label.txt" | sed "s/^/ll$n $label: /" | tee -a "$log"
}
ht() {  # ht <label> [VAR=value...]
  local label=$1; shift
  env "$@" scripts/gpu-fn-bench.sh 8 200 "ht-$label" --tokens 4096 --hidden 7168 --topk 8 --experts 256 \
    --routing uniform --layout dedup --mode capacity --sms 14 --iters 6 --warmup 2 --no-baseline > /dev/null
  grep -E "^  uniform" "$OUT/bench-fn8-ht-$label.txt" | sed "s/^/ht8 $label: /" | tee -a "$log"
}
ll 8 process EPX_GIN_STREAMS=process
ll 8 kboth EPX_GIN_STREAMS=process EPX_GIN_COPY=kernel EPX_GIN_SIGNAL=kernel
ll 8 process8 EPX_GIN_STREAMS=process:8
ll 8 kcopy EPX_GIN_STREAMS=process EPX_GIN_COPY=kernel
ll 8 ksignal EPX_GIN_STREAMS=process EPX_GIN_SIGNAL=kernel
ll 8 memcpy EPX_GIN_STREAMS=process EPX_GIN_COPY=memcpy
# The kernel paths must be correct before they are fast: EP, LL, PP suites with both (quick lists).
EPX_TEST_QUICK=1 scripts/gpu-fn-suites.sh 8 150 modes,low_latency,pp EPX_TEST_QUICK=1 EPX_GIN_COPY=kernel \
  EPX_GIN_SIGNAL=kernel | grep -E "exit|error|FAIL" | sed "s/^/kboth: /" | tee -a "$log"
ht process EPX_GIN_STREAMS=process
ht kboth EPX_GIN_STREAMS=process EPX_GIN_COPY=kernel EPX_GIN_SIGNAL=kernel
ht process8 EPX_GIN_STREAMS=process:8
