#!/usr/bin/env bash
# CI, second NCCL: what depends on NCCL's host ABI, built against the NCCL 2.32.3 pip wheel — the
# host file that fills ncclDevComm's requirements (devcomm.cu), libepx's core and the plugin — and
# the plugin's CPU tests run against it. The kernels are not compiled again (their code is the same
# for every NCCL the build supports; a full build on 2.32.3 is in README, "NCCL versions").
# About 300 MB download; a few minutes on 2 cores. A failed download skips (exit 0, loudly).
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
tests=(plugin_gin_tables plugin_gin_logic plugin_net_socket plugin_socket_logic plugin_tuner)
cmake --build "$BUILD" -j"$(nproc)" --target epx_devcomm epx_core nccl-net-epx "${tests[@]}"
ctest --test-dir "$BUILD" --output-on-failure -LE gpu -R "^($(IFS='|'; echo "${tests[*]}"))\$"
