#!/usr/bin/env bash
# Builds the peer of issue 25's cold-load measurements: libfuse 3.17.2's own
# example/passthrough_hp.cc (FUSE passthrough on by default, no checks of any
# kind), from the source package packaging/libfuse/build_libfuse.sh unpacked,
# against the library it installed. cache_bench --peer takes the result.
#
#   tests/bench/build_peer.sh [LIBFUSE_DIR] [OUTPUT]
#
# LIBFUSE_DIR defaults to build/libfuse-3.17 (run build_libfuse.sh first),
# OUTPUT to LIBFUSE_DIR/passthrough_hp.
set -euo pipefail
dir=${1:-build/libfuse-3.17}
out=${2:-$dir/passthrough_hp}
src=$dir/src/fuse3/example/passthrough_hp.cc
prefix=$(cd "$dir/prefix" && pwd)
if [[ ! -f $src || ! -d $prefix/lib ]]; then
  echo "build_peer: no $src or $prefix/lib; run packaging/libfuse/build_libfuse.sh $dir first" >&2
  exit 1
fi
# The example sets its own FUSE_USE_VERSION (3.12 API); the 3.17 library's
# passthrough calls are there regardless.
g++ -O2 -std=c++17 -w "$src" -I"$prefix/include/fuse3" -I"$(dirname "$src")" \
  -L"$prefix/lib" -lfuse3 -Wl,-rpath,"$prefix/lib" -lpthread -o "$out"
echo "$out"
