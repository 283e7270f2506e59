#!/usr/bin/env bash
# Runs on the GPU machine (device tool) from the repo root, with .devbuild/ carried:
#   GPU tests (label gpu), epx-topo, epx-bench; logs under $OUT (or ./gpu-logs).
# Usage: scripts/gpu-run.sh [tests|plugin|bench|topo|all|fakenodes] [extra epx-bench args...]
#
# fakenodes (one GPU is enough; not part of "all"): multi-node epx with one process per rank on
# fake NCCL nodes (scripts/fake-nodes.sh, MPS), in this order, logs under $OUT/fakenodes/ and one
# line per step in $OUT/fakenodes-summary.txt:
#   1. the EP suites at 1 rank, single process (EPX_TEST_GPUS=1), the bucket-collective and PP
#      suites (pp, bucket) included
#   2. the same suites under fake-nodes.sh at 2, 4 and 8 processes (one rank per fake node)
#   3. the dead-peer test (--run_test=dead_peer): exact mode at 2 ranks, capacity mode at 4
#   (steps 1-2 leave out the randomized suites `random`, `random_bucket`, `random_pp`, `random_ll`, `random_lb`;
#   steps rand1 / rand2 run `random` alone at 1 rank and at 2 fake nodes with EPX_RANDOM_CASES
#   (default 300 cases, 100 quick) within EPX_RANDOM_SECONDS; the steps rcoll1 / rcoll2 / rcoll8, not
#   in the default list, run the other three at 1 rank and at 2 or 8 fake nodes the same way)
#   4. epx-bench at 2, 4, 8 fake nodes with EPX_GIN_EMU_GBPS=50 EPX_GIN_EMU_LATENCY_US=3: 4096
#      tokens/rank, hidden 7168, top-8 of 256 experts, SM budgets 8,16,24, uniform and grouped
#      (group-limited) routing, --iters 10 --warmup 3 (the NCCL baseline runs over TCP loopback)
# EPX_TEST_QUICK=1 unless set (the suites' quick case lists: graph replays 100 -> 10, stress
# iterations 1000 -> 100, the DeepSeek-V3 case at 1024 instead of 4096 tokens/rank, zero-copy large
# shape 1024 -> 256 tokens/rank; nothing else is left out). Each step has its own time limit, and
# all of them together at most EPX_FAKENODES_BUDGET_S (default 540) s; a step that no longer fits
# is reported as skipped; EPX_FAKENODES_STEPS picks steps (see below). At the time limit of a
# multi-process step, the ranks still running print their main-thread stack into their logs
# (fake-nodes.sh, SIGUSR1). Extra arguments go to epx-bench.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
# EPX_PACK_LOGS=1 (for the device tool, which brings back at most 8 files): at exit everything
# under $OUT except the summaries is packed into $OUT/logs.tgz (tar xzf logs.tgz to read it).
pack_logs() {
  local t; t=$(mktemp /tmp/epx-logs.XXXXXX.tgz)
  (cd "$OUT" && tar czf "$t" --exclude='*summary*.txt' --exclude=logs.tgz . && mv "$t" logs.tgz &&
     find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name '*summary*.txt' -exec rm -rf {} +)
}
[ "${EPX_PACK_LOGS:-0}" = 1 ] && trap pack_logs EXIT
what=${1:-all}; shift || true
PIPNCCL=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib
export LD_LIBRARY_PATH=$PWD/.devbuild/lib:$PIPNCCL:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
B=.devbuild/bin
rc=0
if [[ $what == all || $what == topo ]]; then
  nvidia-smi topo -m > "$OUT/nvidia-smi-topo.txt" 2>&1
  nvidia-smi nvlink -s > "$OUT/nvlink.txt" 2>&1
  [ -x $B/epx-topo ] && $B/epx-topo > "$OUT/epx-topo.txt" 2>&1
fi
if [[ $what == all || $what == tests ]]; then
  for t in $B/*_tests; do
    name=$(basename "$t")
    start=$(date +%s)
    # epx_ep_tests includes the randomized suite: at most EPX_RANDOM_SECONDS (90 here) of it; the
    # randomized bucket, PP, low-latency and load-balancing suites are left out (fakenodes steps rcoll1 / rcoll2 / rcoll8).
    args=(--log_level=test_suite)
    [ "$name" = epx_ep_tests ] && args+=('--run_test=!random_bucket:!random_pp:!random_ll:!random_lb')
    EPX_RANDOM_SECONDS=${EPX_RANDOM_SECONDS:-90} timeout 300 "$t" "${args[@]}" > "$OUT/$name.log" 2>&1; r=$?
    echo "$name: exit $r ($(( $(date +%s) - start )) s)" | tee -a "$OUT/summary.txt"
    [[ $r -ne 0 && $r -ne 77 ]] && rc=1 && tail -30 "$OUT/$name.log"
  done
fi
if [[ $what == all || $what == plugin ]] && [ -x $B/plugin_gpu_check ]; then
  # NCCL net/GIN/tuner plugin between two processes with distinct NCCL_HOSTID (docs/plugins.md).
  pdir=$(mktemp -d); cp $B/plugin_gpu_check .devbuild/lib/libnccl-net-epx.so "$pdir"/
  timeout 240 scripts/plugin-gpu-check.sh "$pdir" "$pdir/logs" > "$OUT/plugin-check.txt" 2>&1; r=$?
  echo "plugin-gpu-check: exit $r" | tee -a "$OUT/summary.txt"; tail -40 "$OUT/plugin-check.txt"
fi
if [[ $what == fakenodes ]]; then
  FN=scripts/fake-nodes.sh
  L=$OUT/fakenodes; mkdir -p "$L"
  S=$OUT/fakenodes-summary.txt; : > "$S"
  export EPX_TEST_QUICK=${EPX_TEST_QUICK:-1}
  budget=${EPX_FAKENODES_BUDGET_S:-540}; t_start=$(date +%s)
  # step <name> <limit s> <command...>: the command gets $lim (the limit, clipped to the budget).
  step() {
    local name=$1 want=$2; shift 2
    local left=$(( budget - ($(date +%s) - t_start) ))
    lim=$(( want < left ? want : left ))
    if [ "$lim" -lt 20 ]; then
      echo "$name: SKIPPED (time budget of $budget s used up)" | tee -a "$S"; rc=1; return
    fi
    local t0=$(date +%s)
    "$@"; local r=$?
    local verdict=ok; [ $r -eq 77 ] && verdict=skipped; [ $r -ne 0 ] && [ $r -ne 77 ] && verdict=FAILED && rc=1
    [ $r -eq 124 ] && verdict="TIMEOUT (${lim} s)"
    echo "$name: $verdict, exit $r, $(( $(date +%s) - t0 )) s (limit ${lim} s)" | tee -a "$S"
  }
  norand='--run_test=!random:!random_bucket:!random_pp:!random_ll:!random_lb'
  ep1() { EPX_TEST_GPUS=1 timeout "$lim" $B/epx_ep_tests --log_level=test_suite "$norand" > "$L/ep-1rank.log" 2>&1; }
  epn() { $FN -n "$1" -t "$lim" -l "$L/ep-mp$1" -- $B/epx_ep_tests --log_level=test_suite "$norand" > "$L/ep-mp$1.txt" 2>&1; }
  # The randomized suite alone; its own time limit (EPX_RANDOM_SECONDS) stays below the step's.
  rand1() { EPX_TEST_GPUS=1 EPX_RANDOM_SECONDS=$(( lim > 60 ? lim - 30 : lim / 2 )) timeout "$lim" $B/epx_ep_tests --run_test=random \
              --log_level=message > "$L/random-1rank.log" 2>&1; }
  randn() { EPX_RANDOM_SECONDS=$(( lim > 120 ? lim - 60 : lim / 2 )) $FN -n "$1" -t "$lim" -l "$L/random-mp$1" -- $B/epx_ep_tests \
              --run_test=random --log_level=message > "$L/random-mp$1.txt" 2>&1; }
  # The randomized bucket, PP, low-latency and load-balancing suites, one after another, each within
  # EPX_RANDOM_SECONDS (a quarter of the step's limit, less a margin).
  rcoll1() { EPX_TEST_GPUS=1 EPX_RANDOM_SECONDS=$(( lim > 90 ? lim / 4 - 15 : lim / 8 )) timeout "$lim" $B/epx_ep_tests \
               --run_test=random_bucket:random_pp:random_ll:random_lb --log_level=message > "$L/random-coll-1rank.log" 2>&1; }
  rcolln() { EPX_RANDOM_SECONDS=$(( lim > 180 ? lim / 4 - 30 : lim / 8 )) $FN -n "$1" -t "$lim" -l "$L/random-coll-mp$1" -- \
               $B/epx_ep_tests --run_test=random_bucket:random_pp:random_ll:random_lb --log_level=message > "$L/random-coll-mp$1.txt" 2>&1; }
  dead() { EPX_DEAD_PEER_MODE=$2 $FN -n "$1" -t "$lim" -l "$L/dead-peer-$2-mp$1" -- $B/epx_ep_tests \
             --run_test=dead_peer --log_level=message > "$L/dead-peer-$2-mp$1.txt" 2>&1; }
  bench() {
    EPX_GIN_EMU_GBPS=50 EPX_GIN_EMU_LATENCY_US=3 $FN -n "$1" -t "$lim" -l "$L/bench-mp$1" -- $B/epx-bench \
      --tokens 4096 --hidden 7168 --topk 8 --experts 256 --sms 8,16,24 --routing both --iters 10 --warmup 3 \
      --csv "$L/bench-mp$1.csv" ${bench_args[@]+"${bench_args[@]}"} > "$L/bench-mp$1.txt" 2>&1
    local r=$?
    cp "$L/bench-mp$1/rank0.log" "$L/bench-mp$1.table.txt" 2>/dev/null
    return $r
  }
  bench_args=("$@")
  # EPX_FAKENODES_STEPS: comma-separated subset of ep1,ep2,ep4,ep8,dead2,dead4,bench2,bench4,bench8,
  # rand1,rand2 (default: all of these, in this order) and rcoll1,rcoll2,rcoll8 (only when named).
  steps=",${EPX_FAKENODES_STEPS:-ep1,ep2,ep4,ep8,dead2,dead4,bench2,bench4,bench8,rand1,rand2},"
  want() { [[ $steps == *",$1,"* ]]; }
  want ep1 && step "ep suite, 1 rank (single process)" 90 ep1
  want ep2 && step "ep suite, 2 fake nodes" 200 epn 2
  want ep4 && step "ep suite, 4 fake nodes" 240 epn 4
  want ep8 && step "ep suite, 8 fake nodes" 300 epn 8
  want dead2 && step "dead peer, exact mode, 2 fake nodes" 30 dead 2 exact
  want dead4 && step "dead peer, capacity mode, 4 fake nodes" 40 dead 4 capacity
  want bench2 && step "epx-bench, 2 fake nodes" 150 bench 2
  want bench4 && step "epx-bench, 4 fake nodes" 200 bench 4
  want bench8 && step "epx-bench, 8 fake nodes" 250 bench 8
  want rand1 && step "random suite, 1 rank (single process)" 210 rand1
  want rand2 && step "random suite, 2 fake nodes" 330 randn 2
  want rcoll1 && step "random bucket/PP/LL suites, 1 rank (single process)" 540 rcoll1
  want rcoll2 && step "random bucket/PP/LL suites, 2 fake nodes" 600 rcolln 2
  want rcoll8 && step "random bucket/PP/LL suites, 8 fake nodes" 600 rcolln 8
  echo "fakenodes: total $(( $(date +%s) - t_start )) s; logs in $L" | tee -a "$S"
  for f in "$L"/bench-mp*.table.txt; do [ -e "$f" ] && { echo "== $f"; grep -v '^epx_ep\|^$' "$f" | tail -25; }; done
  exit $rc
fi
if [[ $what == all || $what == bench ]]; then
  timeout 400 $B/epx-bench "$@" 2>&1 | tee "$OUT/bench.txt"; [ "${PIPESTATUS[0]}" -ne 0 ] && rc=1
fi
exit $rc
