#!/usr/bin/env bash
# On the device machine (bundled .devbuild): PP ring at 4 fake nodes (16 MiB, 4 CTAs, one stream and
# receives on a second stream) under the GIN ipc backend's copy-path settings, to find what makes
# its copies slow (the `# gin` copy latency) when the receives run on their own stream. Emulated NIC
# 50 GB/s + 3 us unless the label says off. Lines in $OUT/pp-copy-ab.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/devbuild-env.sh
log="$OUT/pp-copy-ab.txt"
pp() {  # pp <label> [VAR=value...] -- [epx-bench args]
  local label=$1; shift
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  [ "${1:-}" = -- ] && shift
  env "${envs[@]}" scripts/gpu-fn-bench.sh 4 60 "c-$label" --algo pp --coll-ctas 4 --iters 20 --warmup 3 "$@" > /dev/null
  grep -hE " epx |^# gin " "$OUT/bench-fn4-c-$label.txt" | sed -E "s/ +/ /g; s/^/$label: /" | tee -a "$log"
}
pp base
pp memcpy EPX_GIN_COPY=memcpy
pp kernelcopy EPX_GIN_COPY=kernel
pp peerstreams EPX_GIN_STREAMS=peer
pp process4 EPX_GIN_STREAMS=process:4
pp readback EPX_GIN_SIGNAL=readback
pp emuoff EPX_GIN_EMU_GBPS=off
pp mib32 -- --pp-mib 32
pp mib8 -- --pp-mib 8
