#!/usr/bin/env bash
# On the device machine (bundled .devbuild, and .devbuild-old: bin/epx-bench + lib/libepx.so* of the
# build before the change): combine without the start handshake over GIN (session.cuh
# ginReadyTarget) against the build before, high-throughput at 8 fake nodes (14 SMs) and 4 fake
# nodes (16 SMs), old / new / old / new, emulated NIC 50 GB/s + 3 us; then the EP suites at 4 fake
# nodes and the dead-peer test at 4 (quick lists) with the new build (SUITES=0: none; SUITE_STEPS:
# gpu-run.sh fakenodes steps). Also the buckets at 4 fake nodes, old / new twice (the
# reduce-scatter's tapered last chunk). Lines in $OUT/combine-free.txt.
#   scripts/experiments/gpu-combine-free.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/devbuild-env.sh
log="$OUT/combine-free.txt"
. scripts/experiments/gpu-ab-lib.sh
for round in 1 2; do
  ab_ht "old$round" EPX_AB_BUILD=.devbuild-old
  ab_ht "new$round"
done
ht_bench 4 16 old EPX_AB_BUILD=.devbuild-old
ht_bench 4 16 new
# Buckets at 4 fake nodes (4 CTAs, 64 MiB): the reduce-scatter's tapered last chunk, old / new twice.
for round in 1 2; do
  coll_bench 4 "old$round" 4 bucket EPX_AB_BUILD=.devbuild-old | grep " epx " | sed "s/^/coll4 old$round:/" >> "$log"
  coll_bench 4 "new$round" 4 bucket | grep " epx " | sed "s/^/coll4 new$round:/" >> "$log"
done
cat "$log"
if [ "${SUITES:-1}" = 1 ]; then
  EPX_FAKENODES_STEPS=${SUITE_STEPS:-ep4,dead4} EPX_FAKENODES_BUDGET_S=${SUITE_BUDGET_S:-300} scripts/gpu-run.sh fakenodes > /dev/null 2>&1
  cat "$OUT/fakenodes-summary.txt" | tee -a "$log"
  grep -hE "error|FAIL" "$OUT"/fakenodes/ep-mp*/rank*.log 2>/dev/null | head -10
fi
# The device tool brings back at most 8 files: everything else goes into $OUT/logs.tgz.
(cd "$OUT" && tar czf /tmp/epx-logs.tgz --exclude=logs.tgz . && find . -mindepth 1 -maxdepth 1 ! -name combine-free.txt -exec rm -rf {} + && mv /tmp/epx-logs.tgz logs.tgz)
