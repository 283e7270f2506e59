#!/usr/bin/env bash
# CI, second NCCL: the whole tree built against the NCCL 2.32.3 pip wheel (headers and library from
# the wheel, kernels included) and every CPU test run against it, as scripts/test.sh does for the
# default NCCL. About 300 MB download; 6-8 min on 2 cores. A failed download skips (exit 0, loudly).
set -euo pipefail
cd "$(dirname "$0")/.."
ver=${EPX_CI_NCCL:-2.32.3}
prefix=$PWD/.nccl/$ver
# pip downloads the wheel (Debian's python3 comes without it).
if ! python3 -m pip --version >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-pip
fi
if ! EPX_NCCL_PREFIX=$prefix scripts/install-deps.sh --nccl "$ver"; then
  echo "nccl-next.sh: SKIPPED: could not download NCCL $ver (nvidia-nccl-cu13) — no NCCL $ver check in this run"
  exit 0
fi
BUILD=${EPX_BUILD_DIR_NEXT:-build-nccl-$ver}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEPX_NCCL_HOME="$prefix/nvidia/nccl" | grep -E 'NCCL|plugin/'
start=$(date +%s)
if ! cmake --build "$BUILD" -j"$(nproc)" > "$BUILD/build.log" 2>&1; then
  grep -E 'error|Error' "$BUILD/build.log" | head -40
  echo "nccl-next.sh: the build against NCCL $ver failed (log: $BUILD/build.log)"
  exit 1
fi
echo "nccl-next.sh: built against NCCL $ver in $(( $(date +%s) - start )) s"
ctest --test-dir "$BUILD" --output-on-failure -LE gpu
