#!/usr/bin/env bash
# Quick start: install dependencies, build epx-bench, run it on all local GPUs at the DeepSeek-V3
# shape (extra arguments go to epx-bench; see docs/bench.md). Without a GPU it says so and exits 0.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/install-deps.sh
BUILD=${EPX_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE:-RelWithDebInfo} >/dev/null
cmake --build "$BUILD" --target epx-bench -j"$(nproc)"
exec "$BUILD/tools/epx-bench/epx-bench" "$@"
