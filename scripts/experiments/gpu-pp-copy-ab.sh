#!/usr/bin/env bash
# On the device machine (bundled .devbuild): PP ring (16 MiB, 4 CTAs, one stream and receives on a
# second stream) under the GIN chunk size, the message size and with the emulated NIC off, to find
# what makes its copies slow (the `# gin` copy latency) when the receives run on their own stream; then
# the pp suite at 2 and 4 fake nodes (the chunk-size change). Emulated NIC 50 GB/s + 3 us unless
# EPX_GIN_EMU_GBPS=off. Lines in $OUT/pp-copy-ab.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/devbuild-env.sh
log="$OUT/pp-copy-ab.txt"
pp() {  # pp <nodes> <label> [VAR=value...] [-- epx-bench args]
  local n=$1 label=$2; shift 2
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  [ "${1:-}" = -- ] && shift
  env "${envs[@]}" scripts/gpu-fn-bench.sh "$n" 60 "c-$label" --algo pp --coll-ctas 4 --iters 20 --warmup 3 "$@" > /dev/null
  grep -hE " epx |^# gin " "$OUT/bench-fn$n-c-$label.txt" | sed -E "s/ +/ /g; s/^/$n $label: /" | tee -a "$log"
}
pp 4 base
pp 4 chunk4m -- --pp-chunk-kib 4096
pp 4 chunk8m -- --pp-chunk-kib 8192
pp 4 emuoff EPX_GIN_EMU_GBPS=off
pp 4 mib8 -- --pp-mib 8
pp 8 chunk4m -- --pp-chunk-kib 4096
pp 2 chunk4m -- --pp-chunk-kib 4096
for n in 2 4; do scripts/gpu-fn-suites.sh "$n" 90 pp | grep -E "exit|error|FAIL" | head -8 | tee -a "$log"; done
