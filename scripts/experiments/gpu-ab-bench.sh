#!/usr/bin/env bash
# On the device machine: the same epx-bench run across N fake nodes (emulated NIC 50 GB/s, 3 us) with
# two builds of epx, .devbuild-old/ (bin/epx-bench + lib/libepx.so*; the rest from .devbuild/) and
# .devbuild/, one after the other, to tell a code change from the machine (docs/performance.md).
#   scripts/experiments/gpu-ab-bench.sh N limit_s [epx-bench args...]
set -uo pipefail
cd "$(dirname "$0")/../.."
n=$1 limit=$2; shift 2
. scripts/devbuild-env.sh
export EPX_GIN_EMU_GBPS=${EPX_GIN_EMU_GBPS:-50} EPX_GIN_EMU_LATENCY_US=${EPX_GIN_EMU_LATENCY_US:-3}
for which in old new; do
  dir=.devbuild; [ $which = old ] && dir=.devbuild-old
  tag=ab-fn$n-$which
  LD_LIBRARY_PATH=$PWD/$dir/lib:$LD_LIBRARY_PATH scripts/fake-nodes.sh -n "$n" -t "$limit" -l "$OUT/$tag" -- \
    $dir/bin/epx-bench "$@" > "$OUT/$tag.run.txt" 2>&1
  echo "== $which build, $n fake nodes: exit $?"
  grep -E "^  (uniform|grouped) |dispatch_bf16 |combine_bf16 |dispatch_fp8 " "$OUT/$tag/rank0.log"
done
