#!/usr/bin/env bash
# On the device machine (bundled .devbuild): every GIN put copied by the ipc backend's copy kernel
# (EPX_GIN_COPY=kernel-all) against the copy engines (default), where the one-GPU test rig's
# copy-engine ops cost tens to hundreds of µs each: PP ring at 4 and 8 fake nodes (16 MiB, 4 CTAs,
# 1 MiB and 4 MiB chunks), the collectives at 4, LL 128 tokens at 4 and 8, HT at 8; then the
# low_latency and pp suites at 4 fake nodes with kernel-all. Emulated NIC 50 GB/s + 3 us.
# Lines in $OUT/copy-kernel-ab.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/devbuild-env.sh
log="$OUT/copy-kernel-ab.txt"
. scripts/experiments/gpu-ab-lib.sh
coll() {  # coll <nodes> <label> <algo> [VAR=value...] [-- epx-bench args]
  local n=$1 label=$2 algo=$3; shift 3
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  [ "${1:-}" = -- ] && shift
  env "${envs[@]}" scripts/gpu-fn-bench.sh "$n" 60 "k-$label" --algo "$algo" --coll-ctas 4 --iters 20 --warmup 3 "$@" > /dev/null
  grep -hE " epx |^# gin " "$OUT/bench-fn$n-k-$label.txt" | sed -E "s/ +/ /g; s/^/$n $label: /" | tee -a "$log"
}
K=EPX_GIN_COPY=kernel-all
coll 4 pp-kall pp $K
coll 4 pp-kall-c4m pp $K -- --pp-chunk-kib 4096
coll 8 pp-c4m pp -- --pp-chunk-kib 4096
coll 8 pp-kall-c4m pp $K -- --pp-chunk-kib 4096
coll 4 bucket-kall bucket $K
ab_ll 4 def 128
ab_ll 4 kall 128 $K
ab_ll 8 def 128
ab_ll 8 kall 128 $K
ab_ht kall $K
grep -E "^ll|^ht" "$log"
scripts/gpu-fn-suites.sh 4 90 low_latency,pp $K | grep -E "exit|error|FAIL" | head -8 | tee -a "$log"
