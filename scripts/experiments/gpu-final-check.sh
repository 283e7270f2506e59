#!/usr/bin/env bash
# On the device machine (bundled .devbuild): the session's closing measurements and suites with the
# final build. epx-bench --algo bucket (64 MiB FP32, 4 CTAs) at 2 fake nodes and twice at 4; --algo
# pp (16 MiB, 4 CTAs, --chunk-kib 4096) at 2 and 4; high-throughput at 2 fake nodes (16 SMs,
# uniform, dedup into the window, capacity); emulated NIC 50 GB/s + 3 us. Then the EP suites at 1
# rank and 2 fake nodes (quick lists). Lines in $OUT/final.txt; the rest packed into $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/devbuild-env.sh
log="$OUT/final.txt"
. scripts/experiments/gpu-ab-lib.sh
coll() { coll_lines "$@" >> "$log"; }  # coll <nodes> <label> <algo> [-- epx-bench args]
coll 2 bucket bucket
coll 4 bucket1 bucket
coll 4 bucket2 bucket
coll 2 pp pp -- --chunk-kib 4096
coll 4 pp pp -- --chunk-kib 4096
scripts/gpu-fn-bench.sh 2 120 ht2 --tokens 4096 --hidden 7168 --topk 8 --experts 256 --routing uniform --layout dedup \
  --mode capacity --sms 16 --iters 6 --warmup 2 --no-baseline > /dev/null
grep -E "^  uniform" "$OUT/bench-fn2-ht2.txt" | sed -E "s/ +/ /g; s/^/ht2: /" >> "$log"
cat "$log"
EPX_FAKENODES_STEPS=${SUITE_STEPS:-ep1,ep2} EPX_FAKENODES_BUDGET_S=${SUITE_BUDGET_S:-200} scripts/gpu-run.sh fakenodes > /dev/null 2>&1
tee -a "$log" < "$OUT/fakenodes-summary.txt"
(cd "$OUT" && tar czf /tmp/epx-logs.tgz --exclude=logs.tgz . && find . -mindepth 1 -maxdepth 1 ! -name final.txt -exec rm -rf {} + && mv /tmp/epx-logs.tgz logs.tgz)
