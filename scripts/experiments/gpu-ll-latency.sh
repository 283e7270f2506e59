#!/usr/bin/env bash
# On the device machine (bundled .devbuild): where the time of a low-latency call goes across fake
# nodes. epx-bench --algo low-latency at 2 and 8 fake nodes (emulated NIC 50 GB/s, 3 us),
# with the host threads' GPU waits spinning (CUDA's default) and blocking (--host-sync blocking),
# the ipc backend's latency line ("# gin") under each configuration, and a snapshot of the busiest
# host threads during the 8-node run. Optionally a high-throughput pair at 8 fake nodes (HT=1).
#   scripts/experiments/gpu-ll-latency.sh [tokens list, default 1,128] [nodes list, default "2 8"] [waits, default "auto blocking"]
set -uo pipefail
cd "$(dirname "$0")/../.."
tokens=${1:-1,128} nodes=${2:-2 8} syncs=${3:-auto blocking}
export NCCL_SET_THREAD_NAME=1  # NCCL's threads by name in the snapshot
. scripts/devbuild-env.sh
nproc > "$OUT/host-cores.txt"
snap() {  # the busiest threads, $2 s after start, into $OUT/threads-$1.txt
  ( sleep "$2"; { top -H -b -n 1 -w 200 2>/dev/null || ps -eLo pid,tid,pcpu,comm --sort=-pcpu; } | head -45 > "$OUT/threads-$1.txt" ) &
}
for n in $nodes; do
  for sync in $syncs; do
    [ "$n" -ge 8 ] && snap "ll-fn$n-$sync" 15
    scripts/gpu-fn-bench.sh "$n" $(( 90 + 20 * n )) "ll-$sync" --algo low-latency --ll-tokens "$tokens" --hidden 7168 \
      --topk 8 --experts 256 --sms 8 --iters 20 --warmup 5 --host-sync "$sync" > /dev/null
    grep -vE "^#  " "$OUT/bench-fn$n-ll-$sync.txt" | grep -E "^ +[0-9]|^# gin" | sed "s/^/fn$n $sync: /"
  done
done
if [ "${HT:-0}" = 1 ]; then
  for sync in $syncs; do
    scripts/gpu-fn-bench.sh 8 300 "ht-$sync" --tokens 4096 --hidden 7168 --topk 8 --experts 256 --routing uniform \
      --layout dedup --mode capacity --sms 14 --iters 6 --warmup 2 --no-baseline --host-sync "$sync" > /dev/null
    tail -12 "$OUT/bench-fn8-ht-$sync.txt" | sed "s/^/ht $sync: /"
  done
fi
wait
