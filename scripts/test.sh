#!/usr/bin/env bash
# Quick start #2: install dependencies, build everything, run the test suites with CTest.
# GPU suites (label "gpu") report themselves skipped, loudly, on a machine without GPUs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
BUILD=${EPX_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j"$(nproc)"
ctest --test-dir "$BUILD" --output-on-failure -j"$(nproc)" "$@"
