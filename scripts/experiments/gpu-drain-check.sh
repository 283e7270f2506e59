#!/usr/bin/env bash
# On the device machine: the destroy-time GIN drain (host/src/link.cc linkDrain) against the
# LL combine mismatches once blamed on the signal kernel (docs/low-latency.md; the cause was a test bug).
# With .devbuild-base/ carried too (a build without the drain), first the same runs on it, so one
# call shows before and after. Steps, in order, while the call's budget lasts (EPX_DRAIN_BUDGET_S,
# default 540 s): group_churn (reps), the whole low_latency suite (reps), the dead-peer test at 2
# ranks, and the modes, pp and bucket suites at 2 fake nodes. One line per step in $OUT/drain-summary.txt (printed at the end).
#   scripts/experiments/gpu-drain-check.sh [reps, default 3]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
reps=${1:-3}
budget=${EPX_DRAIN_BUDGET_S:-540}
t0=$(date +%s)
sum="$OUT/drain-summary.txt"
left() { echo $(( budget - ($(date +%s) - t0) )); }
# one <label> <limit> <suite> [env...]: one fake-node run at 2 nodes, one summary line.
one() {
  local label=$1 lim=$2 suite=$3; shift 3
  if (( $(left) < lim )); then echo "$label $suite: skipped (budget)" >> "$sum"; return; fi
  local s=$(date +%s) d="$OUT/$label-${suite//\//_}"
  env EPX_TEST_QUICK=1 "$@" scripts/fake-nodes.sh -n 2 -t "$lim" -l "$d" -- .devbuild/bin/epx_ep_tests \
    --log_level=test_suite --run_test="$suite" > "$d.txt" 2>&1
  local rc=$? r=ok
  grep -q "No errors detected\|result: OK" "$d.txt" "$d"/rank*.log 2>/dev/null || r=FAIL
  [ $rc -ne 0 ] && r=FAIL
  local e; e=$(grep -hE "error: in|check .* has failed|timed out" "$d"/rank*.log 2>/dev/null | head -2 | tr '\n' ' ' | cut -c1-300)
  echo "$label $suite $*: $r rc=$rc $(( $(date +%s) - s )) s $e" >> "$sum"
}
dead() {
  local label=$1 lim=90
  if (( $(left) < lim )); then echo "$label dead_peer: skipped (budget)" >> "$sum"; return; fi
  local d="$OUT/$label-dead" s=$(date +%s)
  EPX_DEAD_PEER_MODE=exact scripts/fake-nodes.sh -n 2 -t $lim -l "$d" -- .devbuild/bin/epx_ep_tests \
    --run_test=dead_peer --log_level=message > "$d.txt" 2>&1
  local rc=$?
  echo "$label dead_peer exact 2: rc=$rc $(( $(date +%s) - s )) s $(grep -h "ncclEpGroupDestroy\|error" "$d"/rank*.log | head -2 | tr '\n' ' ' | cut -c1-240)" >> "$sum"
}
churn() { for i in $(seq "$2"); do one "$1-churn$i" 100 low_latency/group_churn; done; }
if [ -d .devbuild-base ]; then  # before: group_churn only (EPX_DRAIN_BASE_REPS times, default 2)
  mv .devbuild .devbuild-new && mv .devbuild-base .devbuild
  . scripts/devbuild-env.sh
  churn base "${EPX_DRAIN_BASE_REPS:-2}"
  mv .devbuild .devbuild-base && mv .devbuild-new .devbuild
fi
. scripts/devbuild-env.sh
churn new "$reps"
for i in $(seq "$reps"); do one "new-ll$i" 150 low_latency; done
dead new
for s in timeout modes pp bucket; do one new-def 200 $s; done
echo "total $(( $(date +%s) - t0 )) s" >> "$sum"
cat "$sum"
