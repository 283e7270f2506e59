#!/usr/bin/env bash
# On the device machine (bundled .devbuild): the bucket collectives at 4 fake nodes (64 MiB FP32,
# emulated NIC 50 GB/s + 3 us) with 4 and 8 CTAs and 1 / 2 MiB GIN chunks: does the reduce-scatter's
# last-chunk reduction (its drain) hold it below 85 %? Lines in $OUT/rs-ctas.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/devbuild-env.sh
log="$OUT/rs-ctas.txt"
run() {  # run <label> [epx-bench args]
  local label=$1; shift
  scripts/gpu-fn-bench.sh 4 60 "rs-$label" --algo bucket --iters 20 --warmup 3 "$@" > /dev/null
  grep -hE " epx " "$OUT/bench-fn4-rs-$label.txt" | sed -E "s/ +/ /g; s/^/$label: /" | tee -a "$log"
}
run c4 --coll-ctas 4
run c8 --coll-ctas 8
run c4-1m --coll-ctas 4 --chunk-kib 1024
run c8-1m --coll-ctas 8 --chunk-kib 1024
run c4-again --coll-ctas 4
run c8-again --coll-ctas 8
