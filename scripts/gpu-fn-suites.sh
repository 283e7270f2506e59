#!/usr/bin/env bash
# On the device machine (bundled .devbuild): EP suites one by one across N fake nodes, each under
# its own time limit so one hang does not hide the others. Logs under $OUT/fn<N>-<suite>/.
#   scripts/gpu-fn-suites.sh N limit_s suite[,suite...] [extra env assignments...]
set -uo pipefail
cd "$(dirname "$0")/.."
n=$1 limit=$2 suites=$3; shift 3
. scripts/devbuild-env.sh
for s in ${suites//,/ }; do
  start=$(date +%s)
  env "$@" scripts/fake-nodes.sh -n "$n" -t "$limit" -l "$OUT/fn$n-${s//\//_}" -- .devbuild/bin/epx_ep_tests \
    --log_level=test_suite --run_test="$s" > "$OUT/fn$n-${s//\//_}.txt" 2>&1
  rc=$?
  echo "$n fake nodes, $s: exit $rc ($(( $(date +%s) - start )) s)" | tee -a "$OUT/summary.txt"
  grep -hE "error|FAIL|timed out" "$OUT/fn$n-${s//\//_}"/rank*.log | head -8
done
