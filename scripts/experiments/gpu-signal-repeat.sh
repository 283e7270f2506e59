#!/usr/bin/env bash
# On the device machine (bundled .devbuild): how often a low-latency test fails at 2 fake nodes
# under several GIN ipc backend settings (docs/low-latency.md, "Tests and benchmark"):
# `reps` rounds, each running the test once per variant, alternating. A variant is
# label:VAR=value[+VAR=value...]; default "readback:EPX_GIN_SIGNAL=readback kernel:EPX_GIN_SIGNAL=kernel".
# One line per run in $OUT/signal-repeat.txt (variant, round, ok/FAIL, the first two errors), then
# a count per variant; printed at the end.
#   scripts/experiments/gpu-signal-repeat.sh [reps, default 4] [test, default low_latency] [variant...]
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/devbuild-env.sh
reps=${1:-4}
t=${2:-low_latency}
shift 2 2>/dev/null || shift $#
variants=("$@")
[ ${#variants[@]} -eq 0 ] && variants=(readback:EPX_GIN_SIGNAL=readback kernel:EPX_GIN_SIGNAL=kernel)
log="$OUT/signal-repeat.txt"
for i in $(seq "$reps"); do
  for v in "${variants[@]}"; do
    label=${v%%:*} assigns=${v#*:}
    d="$OUT/rep-$label-$i"
    # shellcheck disable=SC2086
    env EPX_TEST_QUICK=1 ${assigns//+/ } scripts/fake-nodes.sh -n 2 -t 100 -l "$d" -- .devbuild/bin/epx_ep_tests \
      --log_level=test_suite --run_test="$t" > "$d.txt" 2>&1
    if grep -q "result: OK" "$d.txt"; then r=ok; else r=FAIL; fi
    e=$(grep -hE "error: in" "$d"/rank*.log 2>/dev/null | sed -E 's/.*error: in "([^"]*)".*\[(.*)\]/\1: \2/' | head -2 | tr '\n' ' ' | cut -c1-260)
    echo "$label run $i: $r $e" >> "$log"
    [ "$r" = ok ] && rm -rf "$d" "$d.txt"
  done
done
for v in "${variants[@]}"; do
  label=${v%%:*}
  echo "$label: $(grep -c "^$label run .*: FAIL" "$log") of $reps runs failed" >> "$log"
done
cat "$log"
