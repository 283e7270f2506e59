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
# The runtime NCCL (README, "NCCL versions"): the binary finds the NCCL it was built with through
# its RUNPATH; a pip nvidia-nccl install (e.g. PyTorch's) is put first when libepx accepts it
# (ncclEpGetNcclVersions, with that libnccl loaded first), and skipped with libepx's reason when
# not. EPX_NCCL_LIB=<lib dir> chooses the runtime NCCL outright.
if [ -n "${EPX_NCCL_LIB:-}" ] && [ ! -e "$EPX_NCCL_LIB/libnccl.so.2" ]; then
  echo "run.sh: EPX_NCCL_LIB=$EPX_NCCL_LIB holds no libnccl.so.2 (it names NCCL's lib directory)" >&2
  exit 2
fi
if [ -z "${EPX_NCCL_LIB:-}" ]; then
  for py in python3 /opt/torch/.venv/bin/python3; do
    d=$($py -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null) || continue
    [ -e "$d/libnccl.so.2" ] || continue
    why=$($py - "$d/libnccl.so.2" "$BUILD/host/libepx.so" <<'PY' 2>&1
import ctypes, sys
ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)  # libepx's libnccl.so.2 is then this one
epx = ctypes.CDLL(sys.argv[2])
epx.ncclEpGetLastError.restype = ctypes.c_char_p
runtime, build = ctypes.c_int(), ctypes.c_int()
if epx.ncclEpGetNcclVersions(ctypes.byref(runtime), ctypes.byref(build)) != 0:
    print(epx.ncclEpGetLastError().decode())
PY
    ) && [ -z "$why" ] && EPX_NCCL_LIB=$d && break
    echo "run.sh: not using the NCCL in $d: ${why:-its check did not run}"
  done
fi
[ -n "${EPX_NCCL_LIB:-}" ] && export LD_LIBRARY_PATH=$EPX_NCCL_LIB:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}  # epx never needs NVLink multicast
exec "$BUILD/tools/epx-bench/epx-bench" "$@"
