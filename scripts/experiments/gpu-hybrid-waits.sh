#!/usr/bin/env bash
# On the device machine, in one call (bundle: scripts/gpu-bundle.sh; carry .devbuild): hybrid mode's
# bounded waits and graph capture on fake nodes grouped into virtual nodes: the timeout suite and the
# dead-peer test (exact and capacity mode) at 4 fake nodes as 2 x 2, the graph suite at 8 as 4 x 2.
# Then, when EPX_WAITS_ENGRAM=1, epx-bench --algo engram at 8 fake nodes with 2 MiB GIN chunks (the
# default when it ran) against 8 MiB (the default since), side by side. Logs under $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
REAL_OUT=${OUT:-gpu-logs}; export OUT=/tmp/logs; mkdir -p "$OUT" "$REAL_OUT"
. scripts/devbuild-env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
bash scripts/gpu-fn-suites.sh 4 60 timeout EPX_TEST_HYBRID=2 | head -5
for m in exact capacity; do
  bash scripts/gpu-fn-suites.sh 4 60 dead_peer EPX_TEST_HYBRID=2 EPX_DEAD_PEER_MODE=$m | head -5
  mv "$OUT/fn4-dead_peer" "$OUT/fn4-dead_peer-$m"
  grep -hiE "remote|peer|rank [0-9]" "$OUT/fn4-dead_peer-$m/rank0.log" | head -4
done
bash scripts/gpu-fn-suites.sh 8 120 graph EPX_TEST_HYBRID=2 | head -4
if [ "${EPX_WAITS_ENGRAM:-0}" = 1 ]; then
  for c in 2048 8192; do
    timeout 90 bash scripts/gpu-fn-bench.sh 8 80 engram-c$c --algo engram --chunk-kib $c > /dev/null
    echo "-- engram, chunk $c KiB"; grep -vE '^\s*$' "$OUT/bench-fn8-engram-c$c.txt" | tail -8
  done
fi
tar czf "$REAL_OUT/logs.tgz" -C /tmp logs
