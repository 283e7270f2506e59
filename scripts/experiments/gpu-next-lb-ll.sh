#!/usr/bin/env bash
# On the device machine, in one call: two measurements written on 2026-12-06 when no GPU was left,
# on NCCL 2.30.7 (the one-sided GIN get that the load-balancing reduction reads network peers with;
# 2.30.7 built for sm_90 fits one call, the 2.32.3 wheel needs six).
#  1. The load-balancing reduction's pipeline (branch lb-reduce-pipeline: (piece, replica) gets in
#     two halves on two GIN contexts, the adds overlapping the wire) against main: the lb and
#     random_lb suites at 1 rank, 2 and 4 fake nodes, then scripts/gpu-ab.sh lb2,lb4. Predicted: the
#     reduction from 33 % to >= 75 % of the emulated NIC at 2 fake nodes with the defaults.
#  2. epx-bench --ll-align against the plain loop (main's bundle), 2 fake nodes, NIC on, 0 and 128
#     tokens, A/B/A/B. Predicted: BF16 dispatch at 128 tokens 530 -> ~370 us (the 140-180 us offset
#     between the ranks, docs/low-latency.md, "Where the NIC-on time goes").
# Bundles (built here, carried in the same call; ~61 MiB with the tree):
#   cmake -S . -B build-nccl230 -DEPX_NCCL_HOME=$PWD/.nccl/2.30.7 (NCCL 2.30.7 built for sm_90 and
#   installed there, docs/fake-nodes.md); EPX_BUILD_DIR=build-nccl230 scripts/gpu-bundle.sh;
#   cp -P .nccl/2.30.7/lib/libnccl.so.2* .devbuild/lib/; mv .devbuild .devbuild-230 (main), and the
#   same from the branch without NCCL's library: .devbuild-230-lbpipe.
#   OUT=<dir> scripts/experiments/gpu-next-lb-ll.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
[ -d .devbuild-230 ] && [ -d .devbuild-230-lbpipe ] || { echo "need .devbuild-230 and .devbuild-230-lbpipe" >&2; exit 2; }
rm -rf .devbuild .devbuild-old
cp -a .devbuild-230-lbpipe .devbuild && cp -P .devbuild-230/lib/libnccl.so.2* .devbuild/lib/
cp -a .devbuild-230 .devbuild-old
. scripts/devbuild-env.sh
LD_LIBRARY_PATH=$PWD/.devbuild/lib ldd .devbuild/lib/libepx.so | grep nccl
echo "== 1. LB reduction pipeline: correctness"
EPX_TEST_GPUS=1 EPX_RANDOM_SECONDS=20 timeout 150 .devbuild/bin/epx_ep_tests --run_test=lb:random_lb \
  --log_level=message > "$OUT/lb-1rank.txt" 2>&1
echo "1 rank: exit $?"; grep -E "random_lb:|FAIL|error" "$OUT/lb-1rank.txt" | head -6
for n in 2 4; do
  scripts/gpu-fn-suites.sh "$n" 150 lb:random_lb EPX_RANDOM_SECONDS=30
  grep -hE "random_lb:|FAIL|error" "$OUT/fn$n-lb:random_lb/rank0.log" | head -6
done
echo "== 1. LB: main (old) against the pipeline (new)"
scripts/gpu-ab.sh lb2,lb4
cat "$OUT/ab.txt"
echo "== 2. LL: plain loop against --ll-align (main)"
for run in a b; do for al in plain align; do
  extra=(); [ $al = align ] && extra=(--ll-align)
  EPX_AB_BUILD=.devbuild-old scripts/gpu-fn-bench.sh 2 120 ll-$al-$run --algo low-latency --ll-tokens 0,128 \
    --hidden 7168 --topk 8 --experts 256 --sms 8 --iters 20 --warmup 5 "${extra[@]}" > /dev/null
  echo "-- $al ($run)"; grep -E '^ +[0-9]' "$OUT/bench-fn2-ll-$al-$run.txt"
done; done
