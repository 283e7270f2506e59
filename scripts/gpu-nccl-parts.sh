#!/usr/bin/env bash
# Carries an NCCL library that is larger than the device tool's 64 MiB per call (libnccl.so.2 of
# NCCL 2.32.3: 328 MiB) to the GPU machine in parts, under .nccl/xfer/ (ignored by git).
#
#   here:   scripts/gpu-nccl-parts.sh split <NCCL lib dir> [MiB per part, default 60]
#           -> .nccl/xfer/libnccl.so.2.gz.part-aa, -ab, ... and libnccl.so.2.sha256
#   there:  one device call per part, each carrying one part path (an ignored path carried once
#           stays on the warm machine while later calls carry others); then, in the call that
#           carries .devbuild (scripts/gpu-bundle.sh of a build on that NCCL):
#           scripts/gpu-nccl-parts.sh join .devbuild/lib
#           which writes .devbuild/lib/libnccl.so.2 (checked against the sha256); gpu-run.sh puts
#           .devbuild/lib first on LD_LIBRARY_PATH, so that NCCL is the one loaded.
set -euo pipefail
cd "$(dirname "$0")/.."
xfer=.nccl/xfer
case "${1:-}" in
  split)
    lib=${2:?usage: $0 split <NCCL lib dir> [MiB per part]}/libnccl.so.2
    mib=${3:-60}
    [ -f "$lib" ] || { echo "gpu-nccl-parts: $lib not found" >&2; exit 1; }
    rm -rf "$xfer" && mkdir -p "$xfer"
    (cd "$(dirname "$lib")" && sha256sum libnccl.so.2) > "$xfer/libnccl.so.2.sha256"
    gzip -6 -c "$lib" | split -b "${mib}m" - "$xfer/libnccl.so.2.gz.part-"
    echo "gpu-nccl-parts: carry each of these in its own device call (plus the .sha256 with the first):"
    ls -1 "$xfer"/libnccl.so.2.gz.part-* | sed 's/^/  /'
    ;;
  join)
    dest=${2:?usage: $0 join <dest dir>}
    ls "$xfer"/libnccl.so.2.gz.part-* >/dev/null 2>&1 || { echo "gpu-nccl-parts: no parts in $xfer" >&2; exit 1; }
    mkdir -p "$dest"
    cat "$xfer"/libnccl.so.2.gz.part-* | gzip -dc > "$dest/libnccl.so.2" ||
      { echo "gpu-nccl-parts: the parts in $xfer do not make a whole library (a part missing?)" >&2; exit 1; }
    (cd "$dest" && sha256sum -c "$OLDPWD/$xfer/libnccl.so.2.sha256") ||
      { echo "gpu-nccl-parts: $dest/libnccl.so.2 does not match (a part missing?)" >&2; exit 1; }
    ;;
  *) sed -n '2,13p' "$0"; exit 2 ;;
esac
