#!/usr/bin/env bash
# On the device machine (bundled .devbuild): the checks of a change to the EP dispatch/combine
# kernels at 1 rank and across fake nodes, and the expanded-layout benchmark at 1 rank with its
# memory floor, A/B against earlier builds: EPX_AB names them (default "old": .devbuild-old/, with
# lib/libepx.so* and optionally bin/epx-bench; the bundled epx-bench otherwise), then this build.
#   scripts/experiments/gpu-expanded.sh [fake-node suites, default shapes,modes,precision,edge,graph,zero_copy]
# One line per step in $OUT/summary.txt; logs packed into $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/devbuild-env.sh
suites=${1:-shapes,modes,precision,edge,graph,zero_copy}
S=$OUT/summary.txt
pack() { (cd "$OUT" && tar czf /tmp/epx-logs.tgz --exclude=summary.txt --exclude=logs.tgz --exclude='bench-*.txt' . &&
          mv /tmp/epx-logs.tgz logs.tgz &&
          find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt ! -name 'bench-*.txt' -exec rm -rf {} +); }
trap pack EXIT
t0=$(date +%s)
bench=(--gpus 1 --layout both --sms 24,16 --routing uniform --iters 30 --warmup 10 --no-ceiling)
for which in ${EPX_AB-old} new; do
  dir=.devbuild; [ $which = new ] || dir=.devbuild-$which
  [ -d $dir/lib ] || continue
  bin=$dir/bin/epx-bench; [ -x $bin ] || bin=.devbuild/bin/epx-bench
  LD_LIBRARY_PATH=$PWD/$dir/lib:$LD_LIBRARY_PATH timeout 240 $bin "${bench[@]}" > "$OUT/bench-1rank-$which.txt" 2>&1
  echo "bench 1 rank ($which build): exit $?" | tee -a "$S"
done
EPX_TEST_GPUS=1 EPX_TEST_QUICK=1 timeout 240 .devbuild/bin/epx_ep_tests --log_level=test_suite \
  > "$OUT/1rank.log" 2>&1
echo "1 rank, every suite (quick): exit $? ($(( $(date +%s) - t0 )) s)" | tee -a "$S"
grep -E "error:|fatal" "$OUT/1rank.log" | head -10 | tee -a "$S"
scripts/gpu-fn-suites.sh 2 200 "$suites" EPX_TEST_QUICK=1
echo "total $(( $(date +%s) - t0 )) s" | tee -a "$S"
