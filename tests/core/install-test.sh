#!/usr/bin/env bash
# Installs the build tree into a temporary prefix and builds a downstream
# project against it, once with find_package(hugepool) and once with pkg-config.
set -euo pipefail
build=$1
src=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
LD_LIBRARY_PATH=$tmp/prefix/lib "$tmp/consumer/consumer"
"$tmp/consumer/consumer_static"
libdir=$(find "$tmp/prefix" -name hugepool.pc -printf '%h\n' | head -n 1)
flags=$(PKG_CONFIG_PATH=$libdir pkg-config --cflags --libs hugepool)
g++ -std=c++17 "$src/consumer/consumer.cpp" $flags -o "$tmp/pc-consumer"
LD_LIBRARY_PATH=$tmp/prefix/lib "$tmp/pc-consumer"
# Static linking: --static adds the private dependencies (libnuma, pthreads).
static_libs=$(PKG_CONFIG_PATH=$libdir pkg-config --static --libs-only-other --libs-only-l hugepool)
static_libs=${static_libs/-lhugepool/-l:libhugepool.a}
g++ -std=c++17 "$src/consumer/consumer.cpp" $(PKG_CONFIG_PATH=$libdir pkg-config --cflags --libs-only-L hugepool) \
  $static_libs -o "$tmp/pc-static"
"$tmp/pc-static"
echo "install test: find_package and pkg-config consumers built and ran"
