#!/usr/bin/env bash
# On the device machine (bundled .devbuild, and .devbuild-old: bin/epx-bench + lib/libepx.so* of the
# build before the change): combine without the start handshake over GIN (session.cuh
# ginReadyTarget) against the build before, high-throughput at 8 fake nodes (14 SMs) and 4 fake
# nodes (16 SMs), old / new / old / new, emulated NIC 50 GB/s + 3 us; then the EP suites at 4 fake
# nodes and the dead-peer test at 4 (quick lists) with the new build. Lines in $OUT/combine-free.txt.
#   scripts/gpu-combine-free.sh
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/devbuild-env.sh
log="$OUT/combine-free.txt"
. scripts/gpu-ab-lib.sh
ht4() {  # ht4 <label> [VAR=value...]: 4 fake nodes, 16 SMs, same shape as ab_ht
  local label=$1; shift
  env "$@" scripts/gpu-fn-bench.sh 4 150 "ht4-$label" --tokens 4096 --hidden 7168 --topk 8 --experts 256 \
    --routing uniform --layout dedup --mode capacity --sms 16 --iters 6 --warmup 2 --no-baseline > /dev/null
  grep -E "^  uniform" "$OUT/bench-fn4-ht4-$label.txt" | sed -E "s/ +/ /g; s/^/ht4 $label:/" >> "$log"
}
for round in 1 2; do
  ab_ht "old$round" EPX_AB_BUILD=.devbuild-old
  ab_ht "new$round"
done
ht4 old EPX_AB_BUILD=.devbuild-old
ht4 new
cat "$log"
EPX_FAKENODES_STEPS=ep4,dead4 EPX_FAKENODES_BUDGET_S=${SUITE_BUDGET_S:-300} scripts/gpu-run.sh fakenodes > /dev/null 2>&1
cat "$OUT/fakenodes-summary.txt" | tee -a "$log"
grep -hE "error|FAIL" "$OUT"/fakenodes/ep-mp4/rank*.log 2>/dev/null | head -10
# The device tool brings back at most 8 files: everything else goes into $OUT/logs.tgz.
(cd "$OUT" && tar czf /tmp/epx-logs.tgz --exclude=logs.tgz . && find . -mindepth 1 -maxdepth 1 ! -name combine-free.txt -exec rm -rf {} + && mv /tmp/epx-logs.tgz logs.tgz)
