#!/usr/bin/env bash
# On the device machine (bundled .devbuild): the bucket suite (quick: odd shards, BF16 wire) at 2
# and 4 fake nodes; the one-token exact-combine repeats at 8 fake nodes with the emulated NIC off
# and on; epx-bench --algo bucket (64 MiB FP32, 4 CTAs, NIC on) and --algo pp (16 MiB, NIC on and
# off) at 4 fake nodes. Lines in $OUT/summary.txt and $OUT/coll.txt; every log in $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/devbuild-env.sh
. scripts/experiments/gpu-ab-lib.sh
repeats=${EPX_PRECISION_REPEATS:-64}
test=precision/one_token_every_contribution_repeated
scripts/gpu-fn-suites.sh 8 200 "$test" EPX_PRECISION_REPEATS="$repeats"
grep -h "one token, every contribution\|error" "$OUT"/fn8-precision_*/rank0.log | head -5 | tee -a "$OUT/summary.txt"
mv "$OUT"/fn8-precision_one_token_every_contribution_repeated "$OUT/fn8-repeats-emu-off"
scripts/gpu-fn-suites.sh 8 200 "$test" EPX_PRECISION_REPEATS="$repeats" EPX_GIN_EMU_GBPS=50 EPX_GIN_EMU_LATENCY_US=3
grep -h "one token, every contribution\|error" "$OUT"/fn8-precision_*/rank0.log | head -5 | tee -a "$OUT/summary.txt"
for n in 2 4; do
  scripts/gpu-fn-suites.sh "$n" 150 bucket EPX_TEST_QUICK=1
done
log="$OUT/coll.txt"
coll_lines 4 bucket bucket >> "$log"
coll_lines 4 pp-emu pp >> "$log"
coll_lines 4 pp-off pp EPX_GIN_EMU_GBPS=off -- >> "$log"
cat "$log"
(cd "$OUT" && tar czf /tmp/epx-logs.tgz . && find . -mindepth 1 -maxdepth 1 ! -name coll.txt ! -name summary.txt \
  -exec rm -rf {} + && mv /tmp/epx-logs.tgz logs.tgz)
