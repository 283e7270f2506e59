#!/usr/bin/env bash
# Quick start #1: install dependencies, build epx-bench, and run EP dispatch/combine on all local
# GPUs at the DeepSeek-V3 shape (4096 tokens/rank, hidden 7168, top-8, 256 experts) against the
# NCCL all-to-all baseline and the NVLink copy ceiling. Without GPUs it says so and exits 0.
# Extra arguments go to epx-bench (see docs/bench.md).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
BUILD=${EPX_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" --target epx-bench -j"$(nproc)"
# The quick start builds against /usr/local/cuda's NCCL 2.28.9, which needs that exact runtime
# (README, "NCCL versions"): prefer a pip nvidia-nccl-cu13 install (e.g. PyTorch's) when the system
# one is different; EPX_NCCL_LIB=<lib dir> chooses another.
if [ -z "${EPX_NCCL_LIB:-}" ]; then
  for py in python3 /opt/torch/.venv/bin/python3; do
    d=$($py -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null) || continue
    [ -e "$d/libnccl.so.2" ] && EPX_NCCL_LIB=$d && break
  done
fi
[ -n "${EPX_NCCL_LIB:-}" ] && export LD_LIBRARY_PATH=$EPX_NCCL_LIB:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}  # epx never needs NVLink multicast
exec "$BUILD/tools/epx-bench/epx-bench" "$@"
