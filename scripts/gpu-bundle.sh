#!/usr/bin/env bash
# Builds here (no GPU needed) and packs what the GPU machine needs into .devbuild/: the GPU test
# binaries, epx-bench, epx-topo, libepx, libnccl-net-epx.so (the net/GIN plugin that
# scripts/fake-nodes.sh and plugin-gpu-check.sh load) and the non-CUDA shared libraries they load
# (Boost, hwloc, ...), which that machine lacks. Used with scripts/gpu-run.sh through the device
# tool (carry .devbuild; the scripts themselves travel with the working tree).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${EPX_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
# Only what the bundle packs (the CPU tests build with scripts/test.sh); EPX_BUNDLE_ALL=1 builds all.
if [ -n "${EPX_BUNDLE_ALL:-}" ]; then cmake --build "$BUILD" -j"$(nproc)"
else cmake --build "$BUILD" -j"$(nproc)" --target epx_ep_tests plugin_gpu_check epx-bench epx-topo epx nccl-net-epx; fi
rm -rf .devbuild && mkdir -p .devbuild/bin .devbuild/lib
# GPU test suites (CTest label gpu) and the tools.
for f in "$BUILD"/tests/ep/epx_ep_tests "$BUILD"/tests/plugin/plugin_gpu_check "$BUILD"/tools/epx-bench/epx-bench "$BUILD"/tools/epx-topo/epx-topo; do
  [ -x "$f" ] && cp "$f" .devbuild/bin/
done
cp -P "$BUILD"/host/libepx.so* .devbuild/lib/
find "$BUILD/plugin" -name 'libnccl-net-epx.so*' -exec cp -P {} .devbuild/lib/ \; 2>/dev/null || true
# Shared libraries outside CUDA/NCCL/glibc that the binaries need.
for f in .devbuild/bin/* .devbuild/lib/*.so*; do
  ldd "$f" 2>/dev/null | awk '/=> \//{print $3}'
done | sort -u | grep -Ev '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|ld-linux|libcuda|libcudart|libnccl|libnvidia)[.-]' |
  while read -r lib; do cp -L "$lib" .devbuild/lib/; done
# What gpu-run.sh fakenodes / plugin need.
for f in .devbuild/bin/epx_ep_tests .devbuild/bin/epx-bench .devbuild/bin/plugin_gpu_check .devbuild/lib/libnccl-net-epx.so; do
  [ -e "$f" ] || echo "gpu-bundle: WARNING: $f missing (gpu-run.sh fakenodes/plugin need it)" >&2
done
# Debug info stays in the build tree: the device tool carries at most 64 MiB.
find .devbuild -type f \( -perm -u+x -o -name '*.so*' \) -exec strip --strip-debug {} + 2>/dev/null || true
du -sh .devbuild
