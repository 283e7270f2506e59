# Sourced by the device-machine experiment scripts of this folder: one epx-bench run across fake
# nodes with the emulated NIC (gpu-fn-bench.sh; EPX_AB_BUILD there picks an older build), its data
# lines with spaces squeezed and a "<tag>:" prefix (ab_ll, ht_bench, ab_ht: appended to $log, set
# by the caller; coll_bench, coll_lines: printed).
#   ab_ll <nodes> <label> <tokens> [VAR=value...]   low-latency: hidden 7168, top-8, 256 experts, 8 SMs
#   ht_bench <nodes> <sms> <label> [VAR=value...]   high-throughput: 4096 tokens, uniform, dedup into
#                                                   the window, capacity (tag "ht<nodes> <label>")
#   ab_ht <label> [VAR=value...]                    ht_bench at 8 fake nodes, 14 SMs
ab_ll() {
  local n=$1 label=$2 tokens=$3; shift 3
  env "$@" scripts/gpu-fn-bench.sh "$n" 150 "ll-$label" --algo low-latency --ll-tokens "$tokens" --hidden 7168 \
    --topk 8 --experts 256 --sms 8 --iters 20 --warmup 5 > /dev/null
  grep -E "^ +[0-9]|^# gin " "$OUT/bench-fn$n-ll-$label.txt" | sed -E "s/ +/ /g; s/^/ll$n $label:/" >> "$log"
}
ht_bench() {
  local n=$1 sms=$2 label=$3; shift 3
  env "$@" scripts/gpu-fn-bench.sh "$n" 200 "ht$n-$label" --tokens 4096 --hidden 7168 --topk 8 --experts 256 \
    --routing uniform --layout dedup --mode capacity --sms "$sms" --iters 6 --warmup 2 --no-baseline > /dev/null
  grep -E "^  uniform" "$OUT/bench-fn$n-ht$n-$label.txt" | sed -E "s/ +/ /g; s/^/ht$n $label:/" >> "$log"
}
ab_ht() {
  local label=$1; shift
  ht_bench 8 14 "$label" "$@"
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
# coll_lines <nodes> <label> <algo> [VAR=value...] [-- epx-bench args]: epx-bench --algo <algo>
# (bucket or pp; 4 CTAs, --iters 20 --warmup 3, which later args may override) across fake nodes;
# its epx and `# gin` lines, spaces squeezed, prefixed "<nodes> <label>: ".
coll_lines() {
  local n=$1 label=$2 algo=$3; shift 3
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  [ "${1:-}" = -- ] && shift
  env "${envs[@]}" scripts/gpu-fn-bench.sh "$n" 120 "cl-$label" --algo "$algo" --coll-ctas 4 --iters 20 --warmup 3 \
    "$@" > /dev/null
  grep -hE " epx |^# gin " "$OUT/bench-fn$n-cl-$label.txt" | sed -E "s/ +/ /g; s/^/$n $label: /"
}
