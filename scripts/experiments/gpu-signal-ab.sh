#!/usr/bin/env bash
# On the device machine (bundled .devbuild), after the destroy-time drain: which of the GIN ipc
# backend's kernels to make defaults. Emulated NIC 50 GB/s + 3 us. Each setting in one call:
#   read-back + copy engines (today's defaults), signal kernel only, signal + copy kernels:
#   high-throughput at 8 fake nodes (ab_ht), low-latency 0/128 tokens at 8 fake nodes (ab_ll),
#   epx-bench --algo bucket / pp at 4 fake nodes (4 CTAs, 64 MiB / PP 16 MiB).
# Compact lines in $OUT/signal-ab.txt, printed at the end.
#   scripts/experiments/gpu-signal-ab.sh [settings: any of rb,sig,both; default rb,sig,both]
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/devbuild-env.sh
log="$OUT/signal-ab.txt"
. scripts/experiments/gpu-ab-lib.sh
settings=${1:-rb,sig,both}
envOf() {
  case $1 in
    rb) echo "EPX_GIN_COPY=ce EPX_GIN_SIGNAL=readback" ;;
    sig) echo "EPX_GIN_COPY=ce EPX_GIN_SIGNAL=kernel" ;;
    both) echo "EPX_GIN_COPY=kernel EPX_GIN_SIGNAL=kernel" ;;
  esac
}
for s in ${settings//,/ }; do
  # shellcheck disable=SC2046
  ab_ht "$s" $(envOf "$s")
  # shellcheck disable=SC2046
  ab_ll 8 "$s" 0,128 $(envOf "$s")
done
for s in ${settings//,/ }; do
  # shellcheck disable=SC2046
  coll_bench 4 "$s" 4 bucket,pp $(envOf "$s") | grep " epx " | sed "s/^/coll4 $s:/" >> "$log"
done
cat "$log"
