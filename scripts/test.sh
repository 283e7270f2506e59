#!/usr/bin/env bash
# Quick start #2: install dependencies, build everything, run the test suites with CTest.
# GPU suites (label "gpu") report themselves skipped, loudly, on a machine without GPUs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
BUILD=${EPX_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j"$(nproc)"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
ctest --test-dir "$BUILD" --output-on-failure -j"$(nproc)" "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
# CTest counts a skipped test as passed in its headline: say how many were skipped, and why.
skipped=$(grep -c '(Skipped)' "$log" || true)
if [ "$skipped" -gt 0 ]; then
  echo "test.sh: $skipped of the tests above were SKIPPED, not run (GPU suites on a machine without a usable GPU;"
  echo "         ctest --test-dir $BUILD -V -R <name> shows each one's reason)"
fi
exit "$rc"
