#!/usr/bin/env bash
# On the device machine (bundled .devbuild): EP suites one by one across N fake nodes, each under
# its own time limit so one hang does not hide the others. Logs under $OUT/fn<N>-<suite>/.
#   scripts/gpu-fn-suites.sh N limit_s suite[,suite...] [extra env assignments...]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
n=$1 limit=$2 suites=$3; shift 3
PIPNCCL=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib
export LD_LIBRARY_PATH=$PWD/.devbuild/lib:$PIPNCCL:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 NCCL_MNNVL_ENABLE=0 CUDA_MODULE_LOADING=EAGER
for s in ${suites//,/ }; do
  start=$(date +%s)
  env "$@" scripts/fake-nodes.sh -n "$n" -t "$limit" -l "$OUT/fn$n-${s//\//_}" -- .devbuild/bin/epx_ep_tests \
    --log_level=test_suite --run_test="$s" > "$OUT/fn$n-${s//\//_}.txt" 2>&1
  rc=$?
  echo "$n fake nodes, $s: exit $rc ($(( $(date +%s) - start )) s)" | tee -a "$OUT/summary.txt"
  grep -hE "error|FAIL|timed out" "$OUT/fn$n-${s//\//_}"/rank*.log | head -8
done
