#!/usr/bin/env bash
# On the device machine (bundled .devbuild): does the GIN ipc backend's copy need free SMs?
# (8 fake nodes x 16 CTAs = 128 of 132 SMs spinning ran dispatch 2x slower than 8 CTAs).
# 1. scripts/micro/copy_sm_probe.bin (carry it): a device-to-device copy while N SMs spin.
# 2. epx-bench at N fake nodes (emulated NIC 50 GB/s, 3 us) over a list of SM budgets.
#   scripts/experiments/gpu-sm-sweep.sh N "8,12,14,16" [extra epx-bench args]
set -uo pipefail
cd "$(dirname "$0")/../.."
n=${1:-8} sms=${2:-8,12,14,16}; shift 2 || true
. scripts/devbuild-env.sh
if [ -x scripts/micro/copy_sm_probe.bin ]; then
  timeout 60 scripts/micro/copy_sm_probe.bin 2>&1 | tee "$OUT/copy-sm-probe.txt"
fi
scripts/gpu-fn-bench.sh "$n" $(( 120 + 30 * n )) sweep --tokens 4096 --hidden 7168 --topk 8 --experts 256 \
  --routing uniform --sms "$sms" --iters 6 --warmup 2 --no-baseline "$@" > /dev/null
grep -E "^  (uniform|grouped) |dispatch_bf16 |combine_bf16 |dispatch_fp8 |^ *SMs|sms" "$OUT/bench-fn$n-sweep.txt" | head -60
