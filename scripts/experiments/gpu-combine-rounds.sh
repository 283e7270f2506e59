#!/usr/bin/env bash
# On the device machine (bundled .devbuild, and .devbuild-old2: bin/epx-bench + lib/libepx.so* of the
# build before the change): combine put rounds that carry a share of every network source's rows
# (protocol.h combineRoundRows) against rounds over contiguous rows in source order.
# High-throughput at 8 fake nodes (14 SMs) old / new three times, 4 fake nodes (16 SMs) twice, both
# uniform, dedup into the window, capacity, emulated NIC 50 GB/s + 3 us; then the EP suites at 4 and
# 8 fake nodes and the dead-peer test at 4 (quick lists) with the new build. Lines in
# $OUT/combine-rounds.txt; everything else packed into $OUT/logs.tgz.
#   scripts/experiments/gpu-combine-rounds.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/devbuild-env.sh
log="$OUT/combine-rounds.txt"
. scripts/experiments/gpu-ab-lib.sh
for round in 1 2 3; do
  ab_ht "old$round" EPX_AB_BUILD=.devbuild-old2
  ab_ht "new$round"
done
for round in 1 2; do
  ht_bench 4 16 "old$round" EPX_AB_BUILD=.devbuild-old2
  ht_bench 4 16 "new$round"
done
cat "$log"
EPX_FAKENODES_STEPS=${SUITE_STEPS:-ep4,ep8,dead4} EPX_FAKENODES_BUDGET_S=${SUITE_BUDGET_S:-330} scripts/gpu-run.sh fakenodes > /dev/null 2>&1
tee -a "$log" < "$OUT/fakenodes-summary.txt"
grep -hE "error|FAIL" "$OUT"/fakenodes/ep-mp*/rank*.log 2>/dev/null | grep -v "argument_errors\|max error 0" | head -10
(cd "$OUT" && tar czf /tmp/epx-logs.tgz --exclude=logs.tgz . && find . -mindepth 1 -maxdepth 1 ! -name combine-rounds.txt -exec rm -rf {} + && mv /tmp/epx-logs.tgz logs.tgz)
