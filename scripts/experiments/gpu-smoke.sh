#!/usr/bin/env bash
# Quick GPU check on the device machine (bundled .devbuild): the EP suite at 1 rank, then across
# N fake nodes on one GPU (one process per rank, MPS). Logs under $OUT.
#   scripts/experiments/gpu-smoke.sh [N fake nodes (default 2)] [boost --run_test filter (default all)]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
n=${1:-2}; filter=${2:-}
PIPNCCL=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib
export LD_LIBRARY_PATH=$PWD/.devbuild/lib:$PIPNCCL:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 NCCL_MNNVL_ENABLE=0 CUDA_MODULE_LOADING=EAGER
args=(--log_level=test_suite); [ -n "$filter" ] && args+=(--run_test="$filter")
start=$(date +%s)
EPX_TEST_GPUS=1 timeout 200 .devbuild/bin/epx_ep_tests "${args[@]}" > "$OUT/rank1.log" 2>&1
echo "1 rank: exit $? ($(( $(date +%s) - start )) s)" | tee -a "$OUT/summary.txt"
tail -5 "$OUT/rank1.log"
start=$(date +%s)
scripts/fake-nodes.sh -n "$n" -t 300 -l "$OUT/fn$n" -- .devbuild/bin/epx_ep_tests "${args[@]}" > "$OUT/fn$n.txt" 2>&1
echo "$n fake nodes: exit $? ($(( $(date +%s) - start )) s)" | tee -a "$OUT/summary.txt"
tail -15 "$OUT/fn$n.txt"
for f in "$OUT/fn$n"/rank*.log; do echo "== $f"; grep -E "error|fail|FAIL|passed|Leaving|timed out" "$f" | head -20; done
