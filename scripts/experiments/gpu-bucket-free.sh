#!/usr/bin/env bash
# On the device machine (bundled .devbuild): the bucket suite at 1 rank and 2, 4, 8 fake nodes
# (quick lists), then epx-bench --algo bucket at 2 and 4 fake nodes (4 CTAs, twice at 4; 8 CTAs),
# emulated NIC 50 GB/s + 3 us. Lines in $OUT/bucket-free.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/devbuild-env.sh
log="$OUT/bucket-free.txt"
export EPX_TEST_QUICK=1
EPX_TEST_GPUS=1 timeout 120 .devbuild/bin/epx_ep_tests --run_test=bucket --log_level=test_suite > "$OUT/bucket1.txt" 2>&1
echo "1 rank, bucket: exit $?" | tee -a "$log"
for n in 2 4 8; do scripts/gpu-fn-suites.sh "$n" 90 bucket | grep -E "exit|error|FAIL" | head -6 | tee -a "$log"; done
run() {  # run <nodes> <label> [epx-bench args]
  local n=$1 label=$2; shift 2
  scripts/gpu-fn-bench.sh "$n" 60 "bf-$label" --algo bucket --iters 20 --warmup 3 "$@" > /dev/null
  grep -hE " epx " "$OUT/bench-fn$n-bf-$label.txt" | sed -E "s/ +/ /g; s/^/$n $label: /" | tee -a "$log"
}
run 4 c4 --coll-ctas 4
run 4 c4-again --coll-ctas 4
run 4 c8 --coll-ctas 8
run 2 c4 --coll-ctas 4
