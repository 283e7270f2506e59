#!/usr/bin/env bash
# Installs the Debian packages every area lists in .ci/apt.d/*.txt (one file per area).
# Needs root (or sudo). CUDA 13.0 + NCCL 2.28.9 (with nccl_device.h) are expected at /usr/local/cuda
# (not installed here); at run time a build on 2.28.9 needs exactly that NCCL (README, "NCCL versions").
#
#   scripts/install-deps.sh                  # apt packages only (the quick start)
#   scripts/install-deps.sh --nccl 2.32.3    # also NCCL 2.32.3 from the pip wheel nvidia-nccl-cu13,
#                                            # unpacked into .nccl/2.32.3 (or $EPX_NCCL_PREFIX)
# EPX_NCCL_WHEEL=2.32.3 does the same as --nccl 2.32.3. Then configure with
#   cmake -S . -B build-nccl232 -DEPX_NCCL_HOME=<prefix>/nvidia/nccl
set -euo pipefail
cd "$(dirname "$0")/.."
nccl=${EPX_NCCL_WHEEL:-}
while [ $# -gt 0 ]; do
  case "$1" in
    --nccl) [ $# -ge 2 ] || { echo "install-deps.sh: --nccl needs a version (e.g. 2.32.3)" >&2; exit 2; }
            nccl=$2; shift 2 ;;
    --nccl=*) nccl=${1#--nccl=}; shift ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "install-deps.sh: unknown argument '$1' (--nccl VERSION)" >&2; exit 2 ;;
  esac
done

pkgs=$(cat .ci/apt.d/*.txt | tr -s ' \n' ' ')
missing=()
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

[ -n "$nccl" ] || exit 0
case "$nccl" in
  2.28.*|2.29.*) echo "install-deps.sh: NCCL $nccl: use the 2.28.9 of /usr/local/cuda, or 2.30.0 and newer" >&2; exit 2 ;;
  2.[3-9][0-9].*) ;;
  *) echo "install-deps.sh: '$nccl' is not an NCCL 2.30+ version (e.g. 2.32.3)" >&2; exit 2 ;;
esac
prefix=${EPX_NCCL_PREFIX:-$PWD/.nccl/$nccl}
home=$prefix/nvidia/nccl
if [ -e "$home/include/nccl_device.h" ] && ls "$home"/lib/libnccl.so* >/dev/null 2>&1; then
  echo "install-deps.sh: NCCL $nccl already in $home"
else
  py=$(command -v python3) || { echo "install-deps.sh: python3 with pip is needed for --nccl" >&2; exit 1; }
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  "$py" -m pip --version >/dev/null 2>&1 ||
    { echo "install-deps.sh: --nccl needs pip (Debian: apt-get install python3-pip)" >&2; exit 1; }
  "$py" -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" "nvidia-nccl-cu13==$nccl"
  mkdir -p "$prefix"
  "$py" -m zipfile -e "$tmp"/nvidia_nccl_cu13-*.whl "$prefix"
  echo "install-deps.sh: NCCL $nccl unpacked into $prefix"
fi
echo "install-deps.sh: configure with -DEPX_NCCL_HOME=$home; run with LD_LIBRARY_PATH=$home/lib"
