#!/usr/bin/env bash
# On the device machine (bundled .devbuild): how often the low-latency send/receive split case fails
# at 2 fake nodes with EPX_GIN_SIGNAL=readback (default) and =kernel (docs/low-latency.md, "why the
# kernels are opt-in"): `reps` runs of low_latency/send_receive_split under each, alternating.
# One line per run in $OUT/signal-repeat.txt: mode, run, ok/FAIL and the first error with its case.
#   scripts/gpu-signal-repeat.sh [reps, default 4]
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/devbuild-env.sh
reps=${1:-4}
t=low_latency/send_receive_split
for i in $(seq "$reps"); do
  for mode in readback kernel; do
    EPX_TEST_QUICK=1 scripts/gpu-fn-suites.sh 2 60 "$t" EPX_TEST_QUICK=1 EPX_GIN_SIGNAL=$mode > /dev/null 2>&1
    d="$OUT/fn2-${t//\//_}"
    if grep -q "result: OK" "$d.txt"; then r=ok; else r=FAIL; fi
    e=$(grep -h -A2 "error" "$d"/rank*.log 2>/dev/null | grep -E "combine token|dispatch|H=" | head -2 | tr '\n' ' ' | cut -c1-260)
    echo "$mode run $i: $r $e" | tee -a "$OUT/signal-repeat.txt"
    rm -rf "$d"
  done
done
