#!/usr/bin/env bash
# On the device machine (bundled .devbuild), after merging work into main: every GPU suite once at
# 1 rank (quick lists), the EP suites at 2 fake nodes, the low-latency suite at 2 and 4 fake nodes,
# the low-latency epx-bench at 2 and 8 fake nodes (emulated NIC 50 GB/s, 3 us), and epx-bench --algo bucket / pp at 2
# fake nodes with 16 CTAs. One line per step in $OUT/summary.txt; every log packed into
# $OUT/logs.tgz (the device tool brings back few files).
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/devbuild-env.sh
S=$OUT/summary.txt
pack() { (cd "$OUT" && tar czf /tmp/epx-logs.tgz --exclude=summary.txt --exclude=logs.tgz . && mv /tmp/epx-logs.tgz logs.tgz &&
          find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt -exec rm -rf {} +); }
trap pack EXIT
t0=$(date +%s)
EPX_TEST_GPUS=1 EPX_TEST_QUICK=1 timeout 200 .devbuild/bin/epx_ep_tests '--run_test=!random' --log_level=test_suite \
  > "$OUT/1rank.log" 2>&1
echo "1 rank, every suite but random (quick): exit $? ($(( $(date +%s) - t0 )) s)" | tee -a "$S"
grep -E "error:|fatal" "$OUT/1rank.log" | head -10
scripts/gpu-fn-suites.sh 2 240 '!random' EPX_TEST_QUICK=1
scripts/gpu-fn-suites.sh 4 200 low_latency EPX_TEST_QUICK=1
for n in 2 8; do
  scripts/gpu-fn-bench.sh "$n" $(( 60 + 20 * n )) ll --algo low-latency --ll-tokens 1,32,128,256 --hidden 7168 --topk 8 \
    --experts 256 --sms 8 --iters 20 --warmup 5 > /dev/null
  echo "== LL bench, $n fake nodes"; grep -v "^#" "$OUT/bench-fn$n-ll.txt" 2>/dev/null | grep -v "^$" | head -12
done
. scripts/experiments/gpu-ab-lib.sh
coll_bench 2 merge 16 bucket,pp
echo "total $(( $(date +%s) - t0 )) s" | tee -a "$S"
