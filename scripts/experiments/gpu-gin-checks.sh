#!/usr/bin/env bash
# On the device machine (bundled .devbuild): the across-nodes checks of the high-throughput path and of
# the collectives in one call, logs packed into $OUT/logs.tgz, one line per step in $OUT/summary.txt
# (and $OUT/fakenodes-summary.txt):
#   1. A/B of epx-bench at 8 fake nodes against .devbuild-old/ (when carried; scripts/experiments/gpu-ab-bench.sh)
#   2. EP suites at 2 and 4 fake nodes; epx-bench at 2, 4, 8 fake nodes, emulated NIC 50 GB/s 3 us,
#      SM budgets 8/16/24, uniform and group-limited routing (scripts/gpu-run.sh fakenodes)
#   3. PP and bucket suites at 4 fake nodes; epx-bench --algo bucket / pp (bus bandwidth vs the NIC floor) at 2 fake nodes
#   scripts/experiments/gpu-gin-checks.sh [fakenodes steps, default ep2,ep4,bench2,bench4,bench8]
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/devbuild-env.sh
steps=${1:-ep2,ep4,bench2,bench4,bench8}
S=$OUT/summary.txt
pack() { (cd "$OUT" && tar czf /tmp/epx-logs.tgz --exclude='*summary.txt' --exclude=logs.tgz . && mv /tmp/epx-logs.tgz logs.tgz &&
          find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name '*summary.txt' -exec rm -rf {} +); }
trap pack EXIT
t0=$(date +%s)
shape=(--tokens 4096 --hidden 7168 --topk 8 --experts 256 --no-baseline)
[ -x .devbuild-old/bin/epx-bench ] &&
  scripts/experiments/gpu-ab-bench.sh 8 120 "${shape[@]}" --routing uniform --iters 6 --warmup 2 --sms 16
EPX_FAKENODES_BUDGET_S=400 EPX_FAKENODES_STEPS=$steps scripts/gpu-run.sh fakenodes --sms 8,16,24 --routing both \
  --iters 8 --warmup 2 --no-baseline | grep -E "^  (uniform|grouped) |^==|: (ok|FAILED|TIMEOUT|SKIPPED)"
scripts/gpu-fn-suites.sh 4 200 pp,bucket EPX_TEST_QUICK=1
. scripts/experiments/gpu-ab-lib.sh
coll_bench 2 gin 4 bucket,pp
echo "total $(( $(date +%s) - t0 )) s" | tee -a "$S"
