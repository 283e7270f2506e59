#!/usr/bin/env bash
# Prepares, on a Debian 12 machine with network and CUDA (this one), what
# scripts/nccl-tests-fake-nodes.sh needs on the GPU machine, which has no network:
#   .nccl-tests/debs/     OpenMPI 4.1 runtime .debs (Debian 12) and the libraries it needs
#   .nccl-tests/bin/      all_reduce_perf, all_gather_perf, alltoall_perf, sendrecv_perf (MPI=1)
#   .nccl-tests/lib/      libnccl-net-epx.so (stripped), libnccl-tuner-epx.so -> it, and the
#                         non-system libraries the plugin loads (hwloc, pugixml)
# .nccl-tests/ is git-ignored: carry it to the GPU machine (it stays well under 64 MiB).
#
#   scripts/nccl-tests-prepare.sh <nccl-tests source tree> [plugin .so]
#
# The source tree is NVIDIA/nccl-tests as checked out or unpacked (git archive), not downloaded
# here. The plugin defaults to build/plugin/libnccl-net-epx.so (cmake --build build --target
# nccl-net-epx). nccl-tests is built for sm_90 only (NVCC_GENCODE to change it) against the NCCL
# headers in CUDA_HOME (default /usr/local/cuda); at run time the GPU machine's NCCL is used.
#
# Why MPI: nccl-tests without MPI (MPI=0) runs every rank in one process (-g GPUs or -t threads),
# and a fake node is a process with its own NCCL_HOSTID, so N fake nodes need N processes that
# share one NCCL unique id; nccl-tests creates and shares it only through MPI (MPI_Bcast).
set -euo pipefail
src=$(cd "${1:?usage: $0 <nccl-tests source tree> [libnccl-net-epx.so]}" && pwd)
repo=$(cd "$(dirname "$0")/.." && pwd)
plugin=${2:-$repo/build/plugin/libnccl-net-epx.so}
out=$repo/.nccl-tests
cuda=${CUDA_HOME:-/usr/local/cuda}
[ -f "$src/src/all_reduce.cu" ] || { echo "nccl-tests-prepare: $src is not an nccl-tests source tree" >&2; exit 2; }
[ -f "$plugin" ] || { echo "nccl-tests-prepare: $plugin not found (build it: cmake --build build --target nccl-net-epx)" >&2; exit 2; }

rm -rf "$out" && mkdir -p "$out/debs" "$out/bin" "$out/lib" "$out/build"
# OpenMPI's runtime and the libraries it links that a CUDA image may lack. Left out on purpose:
# base libraries every Debian/Ubuntu has (libc6, libgcc-s1, libstdc++6, zlib1g, libudev1,
# libuuid1, libatomic1), which must never be shadowed from /tmp/mpi. scripts/nccl-tests-fake-nodes.sh
# checks with ldd on the GPU machine that nothing is missing.
runtime="openmpi-bin openmpi-common libopenmpi3 libevent-core-2.1-7 libevent-pthreads-2.1-7 libfabric1
         libhwloc15 libibverbs1 libnl-3-200 libnl-route-3-200 libpmix2 libpsm-infinipath1 libpsm2-2
         librdmacm1 libucx0 libnuma1 libmunge2"
# shellcheck disable=SC2086
(cd "$out/debs" && apt-get download $runtime)
# The headers and libmpi.so link for the build only (libopenmpi-dev is not carried).
(cd "$out/build" && apt-get download libopenmpi-dev)
mpi=$out/build/mpi
for d in "$out"/debs/*.deb "$out"/build/*.deb; do dpkg -x "$d" "$mpi"; done
mpihome=$mpi/usr/lib/x86_64-linux-gnu/openmpi
[ -f "$mpihome/include/mpi.h" ] || { echo "nccl-tests-prepare: mpi.h not found under $mpihome" >&2; exit 1; }

# Build the four tests. Only their targets: the other tests and gencodes would take much longer.
tests="all_reduce all_gather alltoall sendrecv"
targets=""
for t in $tests; do targets="$targets $out/build/nccl-tests/${t}_perf"; done
# LD_LIBRARY_PATH: the linker finds libmpi's own dependencies (libopen-rte, libopen-pal, ...) there.
# shellcheck disable=SC2086
LD_LIBRARY_PATH=$mpi/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} make -C "$src/src" -j"$(nproc)" MPI=1 MPI_HOME="$mpihome" CUDA_HOME="$cuda" NCCL_HOME="$cuda" \
  NVCC_GENCODE="${NVCC_GENCODE:--gencode=arch=compute_90,code=sm_90}" \
  BUILDDIR="$out/build/nccl-tests" $targets
for t in $tests; do cp "$out/build/nccl-tests/${t}_perf" "$out/bin/"; done
strip --strip-unneeded "$out"/bin/*

# The plugin, and the tuner name NCCL_TUNER_PLUGIN=epx looks for (libnccl-tuner-epx.so).
cp -L "$plugin" "$out/lib/libnccl-net-epx.so"
strip --strip-unneeded "$out/lib/libnccl-net-epx.so"
ln -s libnccl-net-epx.so "$out/lib/libnccl-tuner-epx.so"
ldd "$out/lib/libnccl-net-epx.so" | awk '/=> \//{print $3}' |
  grep -Ev '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|ld-linux|libudev|libz)[.-]' |
  while read -r lib; do cp -L "$lib" "$out/lib/"; done

rm -rf "$out/build"
echo "nccl-tests-prepare: $(du -sh "$out" | cut -f1) in $out:"
ls "$out/bin" "$out/lib" "$out/debs"
