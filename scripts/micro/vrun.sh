# Device-call bundle of this session's combine variants and checks (experiment script).
. scripts/devbuild-env.sh
S=$OUT/summary.txt
for v in cur new vC vD; do
  dir=.devbuild-$v; [ $v = new ] && dir=.devbuild
  LD_LIBRARY_PATH=$PWD/$dir/lib:$LD_LIBRARY_PATH timeout 50 .devbuild/bin/epx-bench --gpus 1 --layout expanded --sms 24 --routing uniform --iters 30 --warmup 10 --no-ceiling --no-baseline > $OUT/v-$v.txt 2>&1
  echo "== $v exit $?" | tee -a $S; grep -E "^  uniform|combine reads" $OUT/v-$v.txt | tee -a $S
done
EPX_TEST_GPUS=1 EPX_TEST_QUICK=1 timeout 90 .devbuild/bin/epx_ep_tests '--run_test=!coll_perf' --log_level=test_suite > "$OUT/1rank.log" 2>&1
echo "1 rank, every suite (quick): exit $?" | tee -a "$S"
timeout 60 scripts/gpu-fn-suites.sh 2 50 modes,graph,edge EPX_TEST_QUICK=1 > /dev/null 2>&1
timeout 40 scripts/gpu-fn-suites.sh 4 35 shapes EPX_TEST_QUICK=1 > /dev/null 2>&1
for which in cur new; do
  dir=.devbuild-$which; [ $which = new ] && dir=.devbuild
  EPX_GIN_EMU_GBPS=50 EPX_GIN_EMU_LATENCY_US=3 LD_LIBRARY_PATH=$PWD/$dir/lib:$LD_LIBRARY_PATH timeout 45 scripts/fake-nodes.sh -n 2 -t 40 -l "$OUT/ab2-$which" -- \
    .devbuild/bin/epx-bench --layout expanded --sms 16 --routing uniform --iters 10 --warmup 3 --no-baseline --no-ceiling --no-check > /dev/null 2>&1
  echo "== 2 fake nodes expanded, $which: exit $?" | tee -a $S; grep -E "^  uniform|combine reads|dispatch writes" "$OUT/ab2-$which/rank0.log" | tee -a $S
done
cd $OUT && tar czf logs.tgz --exclude=summary.txt --exclude=logs.tgz . 2>/dev/null; find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt -exec rm -rf {} +
