#!/usr/bin/env bash
# On the device machine (bundled .devbuild): a short check of a new build in one call.
# 1. epx-bench --algo bucket and --algo pp at 2 and 4 fake nodes (emulated NIC 50 GB/s + 3 us,
#    4 CTAs, 64 MiB FP32 / 16 MiB PP messages);
# 2. the modes, low_latency, pp and bucket suites at 2 and 4 fake nodes (quick case lists);
# 3. the dead-peer test in capacity mode at 4 fake nodes.
# Compact lines in $OUT/verify.txt (and on stdout).
#   scripts/experiments/gpu-verify.sh [VAR=value...]
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/devbuild-env.sh
log="$OUT/verify.txt"
. scripts/experiments/gpu-ab-lib.sh
export EPX_TEST_QUICK=${EPX_TEST_QUICK:-1}
for n in 2 4; do coll_bench "$n" verify 4 bucket,pp "$@" | sed "s/^/coll$n: /" | tee -a "$log"; done
for n in 2 4; do
  scripts/gpu-fn-suites.sh "$n" 120 modes,low_latency,pp,bucket "$@" | grep -E "exit|error|FAIL" | head -20 | tee -a "$log"
done
start=$(date +%s)
env EPX_DEAD_PEER_MODE=capacity "$@" scripts/fake-nodes.sh -n 4 -t 60 -l "$OUT/dead4" -- .devbuild/bin/epx_ep_tests \
  --run_test=dead_peer --log_level=message > "$OUT/dead4.txt" 2>&1
echo "4 fake nodes, dead_peer capacity: exit $? ($(( $(date +%s) - start )) s)" | tee -a "$log"
grep -hE "rank [0-9]|peer" "$OUT/dead4"/rank*.log | head -6 | tee -a "$log"
