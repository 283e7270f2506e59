#!/usr/bin/env bash
# On the device machine (bundled .devbuild): what the one-GPU rig itself allows the bucket
# collectives and PP at 8 fake nodes. epx-bench --algo bucket (64 MiB FP32, 4 CTAs) and --algo pp
# (16 MiB, 4 CTAs, --chunk-kib 4096) at 8 fake nodes with the emulated NIC switched off (no pacing,
# no added latency) and on (50 GB/s + 3 us), with the `# gin` lines. If the rig alone stays below
# 85 % of 50 GB/s, no code reaches the 85 % target at 8 fake nodes on one GPU. Lines in
# $OUT/coll-rig.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/devbuild-env.sh
log="$OUT/coll-rig.txt"
. scripts/experiments/gpu-ab-lib.sh
coll() {  # coll <label> <algo> [VAR=value...] -- [epx-bench args]: 8 fake nodes, 10 calls after 2
  coll_lines 8 "$@" --iters 10 --warmup 2 >> "$log"
}
coll bucket-off bucket EPX_GIN_EMU_GBPS=off --
coll bucket-emu bucket --
coll pp-off pp EPX_GIN_EMU_GBPS=off -- --chunk-kib 4096
coll pp-emu pp -- --chunk-kib 4096
cat "$log"
(cd "$OUT" && tar czf /tmp/epx-logs.tgz --exclude=logs.tgz . && find . -mindepth 1 -maxdepth 1 ! -name coll-rig.txt -exec rm -rf {} + && mv /tmp/epx-logs.tgz logs.tgz)
