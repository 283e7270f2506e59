#!/usr/bin/env bash
# On the device machine, in one call: A/B of the Engram fetch's receive order at 8 fake nodes
# (epx-bench --algo engram: 4 layers of 2^20 rows x 1 KiB, 4096 tokens x 16 entries per rank,
# 8 CTAs, 8 MiB chunks, emulated NIC 50 GB/s + 3 us). base (.devbuild-base, carry it): every owner
# serves requesters 0, 1, ... in order and a requester copies its rows out once every owner's
# rows arrived; new (.devbuild): owner o serves o + 1, o + 2, ... first and a requester copies each
# owner's rows out as soon as they arrived (in the order rank - 1, rank - 2, ...), while later
# owners' rows are on the wire; and a requester's list goes to a network owner once that owner
# finished its previous layer (published at the end of that layer) instead of after a "started this
# layer" signal (a round trip at the start of every layer). EPX_ENGRAM_AB: the runs in order
# (default "base new new2 base2"). Then, with EPX_ENGRAM_OVERLAP_SUITES=1, the new build's Engram
# suites at 1 rank, 2 and 8 fake nodes (scripts/experiments/gpu-engram.sh).
# Prediction (written before the run): the copy-out (64 MiB per rank and layer, eight processes
# on one GPU) mostly hides behind the wire and one rig round trip (~140 us) goes: per layer
# ~2.8 -> ~2.1 ms (2.35 -> ~1.8 x the floor).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; export OUT
for v in ${EPX_ENGRAM_AB:-base new new2 base2}; do
  b=.devbuild; case $v in base*) b=.devbuild-base ;; esac
  EPX_AB_BUILD=$b scripts/gpu-fn-bench.sh 8 80 "engram-$v" --algo engram > /dev/null
  echo "-- $v"; grep -vE "^\s*$" "$OUT/bench-fn8-engram-$v.txt" | tail -12 | sed -E "s/ +/ /g"
done
[ -n "${EPX_ENGRAM_OVERLAP_SUITES:-}" ] && EPX_ENGRAM_STEPS="rank1 fn2 fn8" scripts/experiments/gpu-engram.sh
exit 0
