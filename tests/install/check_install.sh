#!/usr/bin/env bash
# Installs the build tree into a fresh prefix, then, with LD_LIBRARY_PATH cleared: runs the installed
# epx-topo and epx-bench (--help), checks that no installed ELF file misses a library of epx's own,
# and builds and runs a C consumer of libepx through the installed epx.pc.
#   check_install.sh <build dir> <prefix> <C compiler>
set -euo pipefail
build=$1 prefix=$2 cc=${3:-cc}
rm -rf "$prefix"
cmake --install "$build" --prefix "$prefix" > "$prefix.install.log" 2>&1 || { cat "$prefix.install.log"; exit 1; }
unset LD_LIBRARY_PATH
fail() { echo "install check: $*" >&2; exit 1; }

for f in "$prefix"/bin/* "$prefix"/lib/*.so*; do
  [ -f "$f" ] && [ ! -L "$f" ] || continue
  missing=$(ldd "$f" 2>/dev/null | grep "not found" | grep -E "libepx|libnccl-net-epx|libcudart|libnccl\.so" || true)
  [ -z "$missing" ] || fail "$f cannot find: $missing"
done
# The plugin is installed stripped, its debug info split off (plugin/CMakeLists.txt), and NCCL's
# tuner name links to it; NCCL still finds its entry points (dynamic symbols).
so=$prefix/lib/libnccl-net-epx.so
if [ -f "$so" ]; then
  sections=$(readelf -S "$so") || fail "readelf cannot read $so"
  if grep -q '\.debug_info' <<<"$sections" || grep -q '\.symtab' <<<"$sections"; then
    fail "$so is not stripped ($(du -h "$so" | cut -f1))"
  fi
  grep -q '\.gnu_debuglink' <<<"$sections" || fail "$so has no .gnu_debuglink"
  readelf -S "$prefix/lib/.debug/libnccl-net-epx.so.debug" 2>/dev/null | grep -q '\.debug_info' \
    || fail "no debug info in $prefix/lib/.debug/libnccl-net-epx.so.debug"
  for sym in ncclNetPlugin_v11 ncclGinPlugin_v11 ncclTunerPlugin_v5; do
    readelf --dyn-syms "$so" | grep -qw "$sym" || fail "$so does not export $sym"
  done
  [ "$(readlink "$prefix/lib/libnccl-tuner-epx.so")" = libnccl-net-epx.so ] \
    || fail "$prefix/lib/libnccl-tuner-epx.so is not a link to libnccl-net-epx.so"
fi
# libepx exports its C API, plus the C++ functions host/libepx.map names (the window setup its GPU
# transport test drives); no other C++ symbol of epx's (they could clash with an application's).
lib=$(ls "$prefix"/lib/libepx.so.* 2>/dev/null | head -1)
[ -n "$lib" ] || fail "no libepx.so.* in $prefix/lib"
map=$(dirname "$0")/../../host/libepx.map
named=$(grep -oE 'epx::[A-Za-z_]+' "$map" | sed 's/^epx:://' | paste -sd'|')
[ -n "$named" ] || fail "no epx:: names in $map"
extra=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^ncclEp' | c++filt |
        grep -Ev "^epx::($named)(\[|\()" || true)
[ -z "$extra" ] || fail "$lib exports symbols outside its C API: $(head -5 <<<"$extra" | tr '\n' ' ')"
nm -D --defined-only "$lib" | grep -qw ncclEpGroupCreate || fail "$lib does not export ncclEpGroupCreate"
"$prefix/bin/epx-topo" --help > /dev/null || fail "installed epx-topo --help failed (exit $?)"
"$prefix/bin/epx-bench" --help > /dev/null || fail "installed epx-bench --help failed (exit $?)"

work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cat > "$work/consumer.c" <<'C'
#include <epx/ep.h>
#include <nccl.h>
#include <stdio.h>
int main(void) {
  /* a consumer uses NCCL beside epx: it must link through epx.pc alone */
  if (ncclGetErrorString(ncclSuccess) == NULL) return 3;
  ncclEpConfig_t cfg = NCCL_EP_CONFIG_INITIALIZER;
  cfg.maxTokensPerRank = 128; cfg.hidden = 1024; cfg.topk = 4; cfg.numExperts = 16;
  size_t bytes = 0;
  if (ncclEpGetBufferSizeHint(&cfg, 2, &bytes) != ncclSuccess || bytes == 0) {
    fprintf(stderr, "size hint failed: %s\n", ncclEpGetLastError());
    return 1;
  }
  cfg.topk = 0; /* invalid: must be refused with a message */
  if (ncclEpGetBufferSizeHint(&cfg, 2, &bytes) == ncclSuccess || ncclEpGetLastError()[0] == '\0') return 2;
  printf("ok %zu\n", bytes);
  return 0;
}
C
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
# shellcheck disable=SC2046
"$cc" "$work/consumer.c" -o "$work/consumer" $(pkg-config --cflags --libs epx) \
  || fail "a C consumer does not build against the installed epx.pc"
out=$("$work/consumer") || fail "the C consumer built against the prefix did not run (exit $?): $out"
# find_package with a version: the installed epxConfigVersion.cmake accepts this version and
# refuses the next major one (a configure-only CMake project).
ver=$(sed -n 's/^Version: //p' "$prefix/lib/pkgconfig/epx.pc")
findWith() {
  mkdir -p "$work/find-$1" && cat > "$work/find-$1/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.25)
project(find_epx LANGUAGES C)
find_package(epx $1 CONFIG REQUIRED PATHS "$prefix" NO_DEFAULT_PATH)
CM
  cmake -S "$work/find-$1" -B "$work/find-$1/build" > "$work/find-$1.log" 2>&1
}
findWith "$ver" || { cat "$work/find-$ver.log"; fail "find_package(epx $ver) does not find the prefix"; }
next="$(( ${ver%%.*} + 1 )).0"
if findWith "$next"; then fail "find_package(epx $next) accepted version $ver"; fi
echo "install check: prefix $prefix OK ($out; find_package(epx $ver))"
