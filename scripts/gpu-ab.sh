#!/usr/bin/env bash
# On the device machine: the standard epx-bench lines with two builds, .devbuild-old/ (the
# reference: its bin/epx-bench, lib/libepx.so* and plugin) and .devbuild/ (the change), run
# old/new back to back for each line so that the machine's drift falls on both. The one A/B driver:
# build the reference bundle first (scripts/gpu-bundle.sh, then mv .devbuild .devbuild-old), then
# the change's, carry both (12 MiB each).
#   scripts/gpu-ab.sh [line,line...]    default: ht4,ht8,ll2,ll8,bucket4,pp4
# Lines (emulated NIC 50 GB/s + 3 us, docs/performance.md's conditions):
#   htN      high-throughput, N fake nodes, 4096 tokens, hidden 7168, top-8 of 256, uniform, dedup
#            into the window, capacity; 16 SMs (14 at 8 fake nodes); --iters 6 --warmup 2
#   llN      low-latency, N fake nodes, 128 tokens, hidden 7168, top-8 of 256, 8 SMs; --iters 20
#   bucketN  bucket all-gather / reduce-scatter / all-reduce, 64 MiB FP32, 4 CTAs; --iters 20
#   ppN      PP ring, 16 MiB, 4 CTAs, one and two streams; --iters 20
#   bucketNxC, ppNxC: the same with C CTAs
#   lbN      expert load balancing (--algo lb: one DeepSeek-V3 expert, prefetch FP8 / BF16, FP32
#            reduction), 8 CTAs; --iters 5 --warmup 2
#   engramN  Engram fetch (--algo engram), N fake nodes, 4 layers of 2^20 rows x 1 KiB, 4096 tokens x
#            16 entries per rank, 8 CTAs, 2 MiB chunks; per layer and fetch against the network floor
#            (target: <= 1.3 x per layer at 8 fake nodes); --iters 20 --warmup 3
# Writes $OUT/ab.txt: "<line> <old|new>: <data line>" (spaces squeezed); logs under $OUT/bench-*.
set -uo pipefail
cd "$(dirname "$0")/.."
lines=${1:-ht4,ht8,ll2,ll8,bucket4,pp4}
[ -d .devbuild-old ] && [ -d .devbuild ] || { echo "gpu-ab: need .devbuild-old/ and .devbuild/" >&2; exit 2; }
ab=$OUT/ab.txt
for line in ${lines//,/ }; do
  shape=${line//[!0-9x]/}   # N or NxC
  n=${shape%%x*} ctas=4
  [ "$shape" != "$n" ] && ctas=${shape#*x}
  case $line in
    ht*) sms=16; [ "$n" -ge 8 ] && sms=14
         args=(--sms "$sms" --routing uniform --iters 6 --warmup 2 --no-baseline) pick='^  (uniform|grouped) ' ;;
    ll*) args=(--algo low-latency --ll-tokens 128 --hidden 7168 --topk 8 --experts 256 --sms 8 --iters 20 --warmup 5)
         pick='^ +[0-9]' ;;
    bucket*) args=(--algo bucket --coll-ctas "$ctas" --iters 20 --warmup 3) pick=' epx ' ;;
    pp*) args=(--algo pp --coll-ctas "$ctas" --iters 20 --warmup 3) pick=' epx ' ;;
    lb*) args=(--algo lb --coll-ctas 8 --iters 5 --warmup 2) pick=' epx |^# lb' ;;
    engram*) args=(--algo engram --engram-layers 4 --engram-tokens 4096 --engram-entries 16 --engram-row-bytes 1024
                   --engram-rows 1048576 --coll-ctas 8 --iters 20 --warmup 3)
             pick='^engram |^# engram|^# result' ;;
    *) echo "gpu-ab: unknown line $line" >&2; exit 2 ;;
  esac
  for which in old new; do
    build=.devbuild; [ $which = old ] && build=.devbuild-old
    EPX_AB_BUILD=$build scripts/gpu-fn-bench.sh "$n" 300 "$line-$which" "${args[@]}" > /dev/null
    echo "$line $which: exit $?" >> "$ab"
    grep -hE "$pick" "$OUT/bench-fn$n-$line-$which.txt" | sed -E "s/ +/ /g; s/^/$line $which:/" >> "$ab"
  done
done
cat "$ab"
