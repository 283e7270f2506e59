#!/usr/bin/env bash
# On the device machine (bundled .devbuild): where PP's time goes across fake nodes.
# epx-bench --algo pp (ring, one stream and receives on a second stream) with its `# gin` lines,
# emulated NIC 50 GB/s + 3 us, under variations: 2 / 4 / 8 fake nodes at 16 MiB and 4 CTAs; at 4
# fake nodes 4 and 64 MiB messages, 8 CTAs, host threads blocking; then the bucket collectives at 4
# fake nodes. Compact lines in $OUT/pp-diag.txt (and on stdout).
#   scripts/experiments/gpu-pp-diag.sh [VAR=value...]
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/devbuild-env.sh
log="$OUT/pp-diag.txt"
run() {  # run <nodes> <label> <epx-bench args...>
  local n=$1 label=$2; shift 2
  scripts/gpu-fn-bench.sh "$n" 120 "pp-$label" --iters 20 --warmup 3 "$@" > /dev/null
  grep -hE " epx |^# gin " "$OUT/bench-fn$n-pp-$label.txt" | sed -E "s/ +/ /g; s/^/$n $label: /" | tee -a "$log"
}
for n in 2 4 8; do run "$n" base --algo pp --coll-ctas 4; done
run 4 mib4 --algo pp --coll-ctas 4 --pp-mib 4
run 4 mib64 --algo pp --coll-ctas 4 --pp-mib 64
run 4 ctas8 --algo pp --coll-ctas 8
run 4 blocking --algo pp --coll-ctas 4 --host-sync blocking
run 4 bucket --algo bucket --coll-ctas 4
