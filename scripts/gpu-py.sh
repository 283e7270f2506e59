#!/usr/bin/env bash
# The Python package on the GPU machine (device tool, .devbuild/ carried), with the bundled libepx
# and net/GIN plugin and the torch of /opt/torch/.venv. Steps, each under its own time limit, logs
# under $OUT (default ./gpu-logs), one line per step in $OUT/py-summary.txt:
#   1. smoke     python/tests/gpu_smoke.py, 1 rank (world size 1)
#   2. example   python/examples/moe_layer.py at 1 rank: expanded/exact, then dedup/capacity
#   3. multirank-1  python/tests/gpu_multirank.py at 1 rank (graph capture, events, zero-copy, ...)
#   4. fnN       python/tests/gpu_multirank.py as N processes, each its own fake NCCL node on the
#                one GPU (scripts/fake-nodes.sh: NCCL_HOSTID per process, NCCL_NET_PLUGIN =
#                .devbuild/lib/libnccl-net-epx.so, MPS, CUDA_DEVICE_MAX_CONNECTIONS, EAGER loading);
#                per-rank logs in $OUT/py-fnN/
#   bench        (not in the default steps) python/bench/overhead.py at 1 rank: µs of Python per
#                dispatch/combine beyond the libepx calls at the DeepSeek-V3 shape (for docs/performance.md)
#
#   scripts/gpu-py.sh [N fake nodes (default 2)] [steps (default "smoke example multirank1 fn")]
#
# Time limits: smoke 150 s, each example run 120 s, multirank1 180 s, fnN 300 s (+ fake-nodes'
# teardown); the device tool allows 600 s per command, so split the steps over two calls when
# needed, e.g. scripts/gpu-py.sh 2 "smoke example" and scripts/gpu-py.sh 2 "multirank1 fn".
# EPX_PYTHON: the interpreter (default /opt/torch/.venv/bin/python3). EPX_PACK_LOGS=1 packs the
# logs into $OUT/py-logs.tgz at exit (the device tool brings back few files). Exit status: 0 when
# every step passed, else 1.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
n=${1:-2}; steps=${2:-"smoke example multirank1 fn"}
PY=${EPX_PYTHON:-/opt/torch/.venv/bin/python3}
PIPNCCL=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib
pack_logs() {
  local t; t=$(mktemp /tmp/epx-pylogs.XXXXXX.tgz)
  (cd "$OUT" && tar czf "$t" --exclude='*summary*.txt' --exclude='*.tgz' . && mv "$t" py-logs.tgz &&
     find . -mindepth 1 -maxdepth 1 ! -name '*.tgz' ! -name '*summary*.txt' -exec rm -rf {} +)
}
[ "${EPX_PACK_LOGS:-0}" = 1 ] && trap pack_logs EXIT
export EPX_LIBRARY=$PWD/.devbuild/lib/libepx.so.0
export EPX_PLUGIN_SO=$PWD/.devbuild/lib/libnccl-net-epx.so
export LD_LIBRARY_PATH=$PWD/.devbuild/lib:$PIPNCCL:${LD_LIBRARY_PATH:-}
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
export NCCL_NVLS_ENABLE=0 NCCL_MNNVL_ENABLE=0 PYTHONUNBUFFERED=1
for f in "$EPX_LIBRARY" "$EPX_PLUGIN_SO" "$PY"; do
  [ -e "$f" ] || { echo "gpu-py: $f missing (carry .devbuild; scripts/gpu-bundle.sh builds it)" | tee -a "$OUT/py-summary.txt"; exit 1; }
done
summary=$OUT/py-summary.txt
failed=0
# step <name> <limit s> <command...>: runs it under timeout, logs $OUT/<name>.log, one summary line.
step() {
  local name=$1 limit=$2 start rc; shift 2
  start=$(date +%s)
  timeout -k 10 "$limit" "$@" > "$OUT/$name.log" 2>&1; rc=$?
  [ "$rc" -eq 0 ] || failed=1
  echo "$name: exit $rc ($(( $(date +%s) - start )) s, limit $limit s)" | tee -a "$summary"
  grep -E "PASS|FAIL|Error|error:|Traceback|result:| us " "$OUT/$name.log" | tail -40
}
for s in $steps; do
  case $s in
    smoke) step smoke 150 "$PY" python/tests/gpu_smoke.py ;;
    example)
      step example-1rank 120 "$PY" python/examples/moe_layer.py
      step example-1rank-dedup-capacity 120 "$PY" python/examples/moe_layer.py --layout dedup --mode capacity ;;
    bench) step bench-overhead 240 "$PY" python/bench/overhead.py ;;
    multirank1) step multirank-1rank 180 "$PY" python/tests/gpu_multirank.py ;;
    fn) rm -rf "$OUT/py-fn$n"
        step "fn$n" 330 scripts/fake-nodes.sh -n "$n" -t 300 -l "$OUT/py-fn$n" -- "$PY" python/tests/gpu_multirank.py
        for f in "$OUT/py-fn$n"/rank*.log; do
          [ -e "$f" ] && { echo "== $f"; grep -E "PASS|FAIL|ALL PASSED|refused|borrowed|Error" "$f" | head -40; }
        done ;;
    *) echo "gpu-py: unknown step '$s' (smoke, example, multirank1, fn, bench)" | tee -a "$summary"; failed=1 ;;
  esac
done
echo "gpu-py: $([ $failed = 0 ] && echo "ALL STEPS PASSED" || echo "SOME STEPS FAILED")" | tee -a "$summary"
exit $failed
