#!/usr/bin/env bash
# On the device machine (bundled .devbuild): the randomized bucket, PP and low-latency suites at 1
# rank and across 2, 4 and 8 fake nodes (EPX_RANDOM_SECONDS per suite and rank count, default 20),
# then epx-bench --algo bucket at 4 fake nodes (64 MiB FP32, 4 and 8 CTAs, emulated NIC 50 GB/s +
# 3 us). Summary lines (counts, tallies, failures) in $OUT/summary.txt, bench lines in
# $OUT/coll.txt, every log in $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/devbuild-env.sh
. scripts/experiments/gpu-ab-lib.sh
secs=${EPX_RANDOM_SECONDS:-20}
suites=random_bucket,random_pp,random_ll
EPX_TEST_GPUS=1 EPX_RANDOM_SECONDS=$secs timeout 200 .devbuild/bin/epx_ep_tests --run_test=$suites --log_level=message \
  > "$OUT/r1.txt" 2>&1
echo "1 rank, $suites: exit $?" | tee -a "$OUT/summary.txt"
grep -hE "cases in|covered|FAILED|error" "$OUT/r1.txt" | head -20 | tee -a "$OUT/summary.txt"
for n in 2 4 8; do
  scripts/gpu-fn-suites.sh "$n" 200 "$suites" EPX_RANDOM_SECONDS="$secs"
  grep -hE "cases in|covered|FAILED|error" "$OUT"/fn$n-random_*/rank0.log | head -20 | tee -a "$OUT/summary.txt"
done
log="$OUT/coll.txt"
coll_lines 4 bucket4 bucket >> "$log"
coll_lines 4 bucket8 bucket -- --coll-ctas 8 >> "$log"
cat "$log"
(cd "$OUT" && tar czf /tmp/epx-logs.tgz . && find . -mindepth 1 -maxdepth 1 ! -name coll.txt ! -name summary.txt \
  -exec rm -rf {} + && mv /tmp/epx-logs.tgz logs.tgz)
