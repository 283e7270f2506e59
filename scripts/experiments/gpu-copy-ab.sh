#!/usr/bin/env bash
# On the device machine (bundled .devbuild): where the ipc GIN backend's per-operation copy latency
# at 8 fake nodes comes from (docs/low-latency.md, "Where the time goes"). The low-latency bench at
# 8 fake nodes (0 and 128 tokens) under copy-stream plans, copy modes and signal modes:
# EPX_GIN_STREAMS=process (one copy stream per process, what fake-nodes.sh sets above 2 processes
# per GPU) against process:8 (one per peer), EPX_GIN_COPY=kernel (small puts by the backend's copy
# kernel), EPX_GIN_SIGNAL=kernel (signals by device atomics), both, and EPX_GIN_COPY=memcpy; the
# EP/LL/PP suites at 8 fake nodes with both kernel modes; the high-throughput bench at 8 fake
# nodes (14 SMs) for process, both kernel modes, process:8.
# Lines in $OUT/copy-ab.txt.
#   scripts/experiments/gpu-copy-ab.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/devbuild-env.sh
log="$OUT/copy-ab.txt"
. scripts/experiments/gpu-ab-lib.sh
ab_ll 8 process 0,128 EPX_GIN_STREAMS=process
ab_ll 8 kboth 0,128 EPX_GIN_STREAMS=process EPX_GIN_COPY=kernel EPX_GIN_SIGNAL=kernel
ab_ll 8 process8 0,128 EPX_GIN_STREAMS=process:8
ab_ll 8 kcopy 0,128 EPX_GIN_STREAMS=process EPX_GIN_COPY=kernel
ab_ll 8 ksignal 0,128 EPX_GIN_STREAMS=process EPX_GIN_SIGNAL=kernel
ab_ll 8 memcpy 0,128 EPX_GIN_STREAMS=process EPX_GIN_COPY=memcpy
# The kernel paths must be correct before they are fast: EP, LL, PP suites with both (quick lists).
EPX_TEST_QUICK=1 scripts/gpu-fn-suites.sh 8 150 modes,low_latency,pp EPX_TEST_QUICK=1 EPX_GIN_COPY=kernel \
  EPX_GIN_SIGNAL=kernel | grep -E "exit|error|FAIL" | sed "s/^/kboth: /" >> "$log"
ab_ht process EPX_GIN_STREAMS=process
ab_ht kboth EPX_GIN_STREAMS=process EPX_GIN_COPY=kernel EPX_GIN_SIGNAL=kernel
ab_ht process8 EPX_GIN_STREAMS=process:8
cat "$log"
