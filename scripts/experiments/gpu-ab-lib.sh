# Sourced by the device-machine A/B scripts (gpu-pump-ab.sh, gpu-copy-ab.sh, gpu-kernels-check.sh,
# gpu-signal-ab.sh, gpu-full-coll.sh, gpu-coll-ab.sh, gpu-gin-checks.sh, gpu-merge-check.sh):
# one epx-bench run across fake nodes with the emulated NIC (gpu-fn-bench.sh), its data lines
# appended to $log (set by the caller) with spaces squeezed and a "<tag>:" prefix.
#   ab_ll <nodes> <label> <tokens> [VAR=value...]   low-latency: hidden 7168, top-8, 256 experts, 8 SMs
#   ab_ht <label> [VAR=value...]                    high-throughput at 8 fake nodes: 4096 tokens, 14 SMs,
#                                                   uniform, dedup into the window, capacity
ab_ll() {
  local n=$1 label=$2 tokens=$3; shift 3
  env "$@" scripts/gpu-fn-bench.sh "$n" 150 "ll-$label" --algo low-latency --ll-tokens "$tokens" --hidden 7168 \
    --topk 8 --experts 256 --sms 8 --iters 20 --warmup 5 > /dev/null
  grep -E "^ +[0-9]|^# gin " "$OUT/bench-fn$n-ll-$label.txt" | sed -E "s/ +/ /g; s/^/ll$n $label:/" >> "$log"
}
ab_ht() {
  local label=$1; shift
  env "$@" scripts/gpu-fn-bench.sh 8 200 "ht-$label" --tokens 4096 --hidden 7168 --topk 8 --experts 256 \
    --routing uniform --layout dedup --mode capacity --sms 14 --iters 6 --warmup 2 --no-baseline > /dev/null
  grep -E "^  uniform" "$OUT/bench-fn8-ht-$label.txt" | sed -E "s/ +/ /g; s/^/ht8 $label:/" >> "$log"
}
# coll_bench <nodes> <label> <ctas> <algos> [VAR=value...]: epx-bench --algo bucket and/or pp
# (<algos>: bucket, pp or bucket,pp; 64 MiB FP32 tensor / 16 MiB PP messages, 20 calls after 3)
# across fake nodes with the emulated NIC; prints its epx and nccl lines, spaces squeezed.
coll_bench() {
  local n=$1 label=$2 ctas=$3 algos=$4 algo; shift 4
  for algo in ${algos//,/ }; do
    env "$@" scripts/gpu-fn-bench.sh "$n" 200 "coll-$label-$algo" --algo "$algo" --coll-ctas "$ctas" --iters 20 \
      --warmup 3 > /dev/null
    grep -hE " (epx|nccl) " "$OUT/bench-fn$n-coll-$label-$algo.txt" | sed -E "s/ +/ /g"
  done
}
