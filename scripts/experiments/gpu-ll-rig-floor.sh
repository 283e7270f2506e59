#!/usr/bin/env bash
# On the device machine (bundled .devbuild): what the one-GPU rig itself costs a low-latency call.
# epx-bench --algo low-latency (hidden 7168, top-8, 256 experts, 8 SMs, BF16; 0 and 128 tokens per
# rank) at 2, 4 and 8 fake nodes with the emulated NIC (50 GB/s, 3 us) and at 8 with it off (no
# pacing, no added latency: what is left is the processes' GIN work on the one GPU), with the
# `# gin` lines (copy latency per operation). Lines in $OUT/ll-rig.txt.
#   scripts/experiments/gpu-ll-rig-floor.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/devbuild-env.sh
log="$OUT/ll-rig.txt"
. scripts/experiments/gpu-ab-lib.sh
for n in 2 4 8; do ab_ll "$n" emu 0,128; done
ab_ll 8 off 0,128 EPX_GIN_EMU_GBPS=off
cat "$log"
