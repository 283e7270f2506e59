#!/usr/bin/env bash
# Runs on the GPU machine (device tool) from the repo root, with .devbuild/ carried:
#   GPU tests (label gpu), epx-topo, epx-bench; logs under $OUT (or ./gpu-logs).
# Usage: scripts/gpu-run.sh [tests|plugin|bench|topo|all] [extra epx-bench args...]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
what=${1:-all}; shift || true
PIPNCCL=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib
export LD_LIBRARY_PATH=$PWD/.devbuild/lib:$PIPNCCL:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
B=.devbuild/bin
rc=0
if [[ $what == all || $what == topo ]]; then
  nvidia-smi topo -m > "$OUT/nvidia-smi-topo.txt" 2>&1
  nvidia-smi nvlink -s > "$OUT/nvlink.txt" 2>&1
  [ -x $B/epx-topo ] && $B/epx-topo > "$OUT/epx-topo.txt" 2>&1
fi
if [[ $what == all || $what == tests ]]; then
  for t in $B/*_tests; do
    name=$(basename "$t")
    start=$(date +%s)
    timeout 300 "$t" --log_level=test_suite > "$OUT/$name.log" 2>&1; r=$?
    echo "$name: exit $r ($(( $(date +%s) - start )) s)" | tee -a "$OUT/summary.txt"
    [[ $r -ne 0 && $r -ne 77 ]] && rc=1 && tail -30 "$OUT/$name.log"
  done
fi
if [[ $what == all || $what == plugin ]] && [ -x $B/plugin_gpu_check ]; then
  # NCCL net/GIN/tuner plugin between two processes with distinct NCCL_HOSTID (docs/plugins.md).
  pdir=$(mktemp -d); cp $B/plugin_gpu_check .devbuild/lib/libnccl-net-epx.so "$pdir"/
  timeout 240 scripts/plugin-gpu-check.sh "$pdir" "$pdir/logs" > "$OUT/plugin-check.txt" 2>&1; r=$?
  echo "plugin-gpu-check: exit $r" | tee -a "$OUT/summary.txt"; tail -40 "$OUT/plugin-check.txt"
fi
if [[ $what == all || $what == bench ]]; then
  timeout 400 $B/epx-bench "$@" 2>&1 | tee "$OUT/bench.txt"; [ "${PIPESTATUS[0]}" -ne 0 ] && rc=1
fi
exit $rc
