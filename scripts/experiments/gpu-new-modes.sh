#!/usr/bin/env bash
# On the device machine (bundled .devbuild): the low-latency, PP and bucket GPU suites at 1 rank
# and across fake nodes (EPX_TEST_QUICK=1), the low-latency epx-bench with the emulated NIC, and
# optionally the 8-fake-node A/B of the high-throughput path (when .devbuild-old/ was carried).
# Every log is packed into $OUT/logs.tgz (the device tool brings back a few files only);
# $OUT/summary.txt has one line per step.
#   scripts/experiments/gpu-new-modes.sh [fake-node counts, default "2"] [suites, default low_latency,pp,bucket]
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/devbuild-env.sh
counts=${1:-2} suites=${2:-low_latency,pp,bucket}
S=$OUT/summary.txt
pack() { (cd "$OUT" && tar czf /tmp/epx-logs.tgz --exclude=summary.txt --exclude=logs.tgz . && mv /tmp/epx-logs.tgz logs.tgz &&
          find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt -exec rm -rf {} +); }
trap pack EXIT
t0=$(date +%s)
EPX_TEST_GPUS=1 EPX_TEST_QUICK=1 timeout 200 .devbuild/bin/epx_ep_tests --run_test="$suites" --log_level=test_suite \
  > "$OUT/1rank.log" 2>&1
echo "1 rank, $suites: exit $? ($(( $(date +%s) - t0 )) s)" | tee -a "$S"
grep -E "error:|fatal|timed out" "$OUT/1rank.log" | head -15
for n in $counts; do scripts/gpu-fn-suites.sh "$n" $(( 120 + 40 * n )) "$suites" EPX_TEST_QUICK=1; done
scripts/gpu-fn-bench.sh 2 90 ll --algo low-latency --ll-tokens 1,32,128 --hidden 7168 --topk 8 --experts 256 --sms 8 \
  --iters 20 --warmup 5 > /dev/null
grep -v "^#" "$OUT/bench-fn2-ll.txt" 2>/dev/null | grep -v "^$" | head -20
if [ -x .devbuild-old/bin/epx-bench ]; then
  scripts/experiments/gpu-ab-bench.sh 8 120 --tokens 4096 --hidden 7168 --topk 8 --experts 256 --routing uniform --iters 6 --warmup 2 \
    --no-baseline --sms 16
fi
echo "total $(( $(date +%s) - t0 )) s" | tee -a "$S"
