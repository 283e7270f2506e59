#!/usr/bin/env bash
# Installs the Debian packages every area lists in .ci/apt.d/*.txt (one file per area).
# Needs root (or sudo). CUDA 13.0 + NCCL 2.28.9 (with nccl_device.h) are expected at /usr/local/cuda
# (not installed here); at run time libepx needs exactly the NCCL version of those headers.
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=$(cat .ci/apt.d/*.txt | tr -s ' \n' ' ')
missing=()
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
