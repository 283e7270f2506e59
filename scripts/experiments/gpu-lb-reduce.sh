#!/usr/bin/env bash
# On the device machine, in one call: the expert load balancing gradient reduction on NCCL 2.30.7
# (GIN get; built here from source, sm_90 only, docs/fake-nodes.md). Carry .devbuild-lb (new, the
# bundle of scripts/gpu-bundle.sh), .devbuild-lb-base (base: its bin/epx-bench and lib/libepx.so*
# only) and .nccl/2.30.7/libnccl.so.2.gz (the stripped library, gzipped); both builds are against
# it. Replaces .devbuild with .devbuild-lb.
# Second A/B (2026-12-07): base = two lane sets, one FP32 element per thread and replica in the adds;
# new = the same with one 16-byte vector per thread and replica (the additions' order unchanged).
# Steps: epx-bench --algo lb at 2 fake nodes (one DeepSeek-V3 expert: FP8 + scales and BF16
# prefetch, FP32 reduction; 8 CTAs, 2 MiB chunks, emulated NIC 50 GB/s + 3 us) base, new, base,
# new (EPX_LB_AB: the runs in order); then the new build's lb and random_lb suites at 1 rank and 2
# fake nodes, random_lb at 4.
# Builds: .devbuild-lb from main with the new reduction, .devbuild-lb-base from the commit before
# it, both with cmake -DEPX_NCCL_HOME=<NCCL 2.30.7> and EPX_BUILD_DIR set for scripts/gpu-bundle.sh.
# First A/B (base: one piece per replica and flush, adds with nothing in flight; new: two lane
# sets): predicted ~85 %, ran 2026-12-07 on one H100: 34.1 / 28.9 % -> 51.1 / 51.6 %. Second A/B:
# predicted 51 -> ~85 %, ran 2026-12-07 on one H100 (with the suites): 51.2 / 50.8 % -> 63.7 / 74.9 %;
# prefetch unchanged both times. Both changes are in use (docs/performance.md, "Expert load balancing").
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; export OUT
for b in .devbuild-lb .devbuild-lb-base; do gunzip -c .nccl/2.30.7/libnccl.so.2.gz > "$b/lib/libnccl.so.2"; done
rm -rf .devbuild && cp -r .devbuild-lb .devbuild
for v in ${EPX_LB_AB:-base new base2 new2}; do
  b=.devbuild-lb; case $v in base*) b=.devbuild-lb-base ;; esac
  EPX_AB_BUILD=$b scripts/gpu-fn-bench.sh 2 120 "lb-$v" --algo lb --iters 5 --warmup 2 > /dev/null
  echo "-- $v"; grep -vE "^\s*$" "$OUT/bench-fn2-lb-$v.txt" | grep -vE "^#  " | tail -8
done
[ "${EPX_LB_SUITES:-1}" = 0 ] && exit 0  # EPX_LB_SUITES=0: the A/B only
. scripts/devbuild-env.sh
EPX_TEST_GPUS=1 EPX_RANDOM_SECONDS=10 timeout 90 .devbuild/bin/epx_ep_tests --run_test=lb:random_lb \
  --log_level=test_suite > "$OUT/lb-1rank.txt" 2>&1
echo "1 rank lb, random_lb: exit $?"; grep -aE "random_lb:.*failed|No errors|error" "$OUT/lb-1rank.txt" | head -6
scripts/gpu-fn-suites.sh 2 120 lb:random_lb EPX_RANDOM_SECONDS=10
grep -ahE "random_lb:.*failed|refused" "$OUT/fn2-lb:random_lb/rank0.log" | head -4
scripts/gpu-fn-suites.sh 4 120 random_lb EPX_RANDOM_SECONDS=10
grep -ahE "random_lb:.*failed" "$OUT/fn4-random_lb/rank0.log" | head -2
exit 0
