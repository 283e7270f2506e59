#!/usr/bin/env bash
# On the device machine (bundled .devbuild): A/B of the GIN ipc backend's progress, EPX_GIN_PUMP=each
# (recvmsg on every peer socket on every progress call: contexts x ranks^2 per NCCL proxy loop) against
# poll (one poll(), recvmsg only where readable; the default), with the emulated NIC (50 GB/s, 3 us):
# the low-latency bench at 8 fake nodes (0, 1, 128 tokens; '# gin' lines with copy / gapMean), the
# high-throughput bench at 8 fake nodes (14 SMs), the PP ring at 4 fake nodes; then the EP, LL and PP
# suites at 2 and 8 fake nodes with the default (quick lists). Lines under $OUT/pump-ab.txt.
#   scripts/experiments/gpu-pump-ab.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/devbuild-env.sh
log="$OUT/pump-ab.txt"
. scripts/experiments/gpu-ab-lib.sh
for mode in each poll; do
  ab_ll 8 "$mode" 0,1,128 EPX_GIN_PUMP=$mode
  ab_ht "$mode" EPX_GIN_PUMP=$mode
  coll_bench 4 "pump-$mode" 4 pp EPX_GIN_PUMP=$mode | grep " epx " | sed "s/^/pp4 $mode: /" >> "$log"
done
for n in 2 8; do
  EPX_TEST_QUICK=1 scripts/gpu-fn-suites.sh "$n" 150 modes,low_latency,pp EPX_TEST_QUICK=1 | grep -E "exit" >> "$log"
done
cat "$log"
