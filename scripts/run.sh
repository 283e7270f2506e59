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
# The runtime NCCL (README, "NCCL versions"): a build on 2.28.9 headers (the quick start's, from
# /usr/local/cuda) runs on 2.28.9 only, a build on 2.30+ headers on the same or a newer 2.x. The
# binary finds the NCCL it was built with through its RUNPATH; a pip nvidia-nccl install (e.g.
# PyTorch's) is put first when it can run this build, and skipped with a note when it cannot.
# EPX_NCCL_LIB=<lib dir> chooses the runtime NCCL outright.
ncclCode() { sed -n 's/^#define NCCL_VERSION_CODE *\([0-9]*\).*/\1/p' "$1/nccl.h" 2>/dev/null | head -1; }
libCode() { "$1" -c 'import ctypes, sys; v = ctypes.c_int(); ctypes.CDLL(sys.argv[1]).ncclGetVersion(ctypes.byref(v)); print(v.value)' "$2" 2>/dev/null; }
if [ -z "${EPX_NCCL_LIB:-}" ]; then
  built=$(ncclCode "$(sed -n 's/^NCCL_INCLUDE_DIR:PATH=//p' "$BUILD/CMakeCache.txt")")
  for py in python3 /opt/torch/.venv/bin/python3; do
    d=$($py -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null) || continue
    [ -e "$d/libnccl.so.2" ] || continue
    have=$(libCode "$py" "$d/libnccl.so.2")
    if [ -n "$built" ] && [ -n "$have" ] && { [ "$have" = "$built" ] ||
         { [ "$built" -ge 23000 ] && [ "$have" -ge "$built" ] && [ "$have" -lt 30000 ]; }; }; then
      EPX_NCCL_LIB=$d && break
    fi
    echo "run.sh: not using the NCCL in $d (version code ${have:-unknown}; this build needs ${built:-unknown}$([ "${built:-0}" -ge 23000 ] && echo ' or newer'))"
  done
fi
[ -n "${EPX_NCCL_LIB:-}" ] && export LD_LIBRARY_PATH=$EPX_NCCL_LIB:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}  # epx never needs NVLink multicast
exec "$BUILD/tools/epx-bench/epx-bench" "$@"
