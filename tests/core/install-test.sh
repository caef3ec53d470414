#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
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
# Static linking: --static adds the private dependencies (pthreads).
static_libs=$(PKG_CONFIG_PATH=$libdir pkg-config --static --libs-only-other --libs-only-l hugepool)
static_libs=${static_libs/-lhugepool/-l:libhugepool.a}
g++ -std=c++17 "$src/consumer/consumer.cpp" $(PKG_CONFIG_PATH=$libdir pkg-config --cflags --libs-only-L hugepool) \
  $static_libs -o "$tmp/pc-static"
"$tmp/pc-static"

# The installed programs work from any prefix, moved after installation,
# without LD_LIBRARY_PATH: their RUNPATH is relative ($ORIGIN/../lib).
mv "$tmp/prefix" "$tmp/moved"
unset LD_LIBRARY_PATH
fails=0
for exe in "$tmp"/moved/bin/* "$tmp"/moved/sbin/*; do
  [[ -f $exe && -x $exe ]] || continue
  head -c 4 "$exe" | grep -q ELF || continue
  # The loader's view (ldd without running the program: the demo would resize the pool).
  if out=$(LD_TRACE_LOADED_OBJECTS=1 "$exe" 2>&1) && ! grep -q 'not found' <<<"$out"; then
    if grep -q libhugepool <<<"$out" && ! grep -q "libhugepool[^ ]* => $tmp/moved/" <<<"$out"; then
      echo "FAIL $exe resolves libhugepool outside the moved prefix: $out"
      fails=$((fails + 1))
    fi
  else
    echo "FAIL $exe from a moved prefix: $out"
    fails=$((fails + 1))
  fi
done
lib=$(find "$tmp/moved" -name 'libhugepool_mpi.so.*' -type f | head -n 1)
if [[ -n $lib ]] && LD_TRACE_LOADED_OBJECTS=1 /lib64/ld-linux-x86-64.so.2 "$lib" 2>&1 | grep -q 'libhugepool.so.0 => not found'; then
  echo "FAIL $lib does not find libhugepool.so.0 beside it"
  fails=$((fails + 1))
fi
if [[ -x $tmp/moved/bin/hugepool-run ]]; then
  out=$("$tmp/moved/bin/hugepool-run" -- /bin/cat /proc/self/maps 2>&1) || true
  grep -q "$tmp/moved/.*libhugepool_preload.so" <<<"$out" ||
    { echo "FAIL hugepool-run from a moved prefix did not preload its interposer: $out"; fails=$((fails + 1)); }
fi
if [[ -x $tmp/moved/bin/hugepool ]]; then
  "$tmp/moved/bin/hugepool" --version >/dev/null || { echo "FAIL hugepool --version"; fails=$((fails + 1)); }
fi
head -n 1 "$tmp/moved/bin/hugepool-stats" 2>/dev/null | grep -qx '#!/usr/bin/env python3' ||
  [[ ! -e $tmp/moved/bin/hugepool-stats ]] || { echo "FAIL hugepool-stats does not run the python3 on PATH"; fails=$((fails + 1)); }

# The uninstall target's script: it removes exactly the listed files and the
# directories left empty, and keeps a file of the user's beside them.
find "$tmp/moved" \( -type f -o -type l \) >"$tmp/manifest"
touch "$tmp/moved/lib/users-own-file"
cmake -DHUGEPOOL_MANIFEST="$tmp/manifest" -P "$src/../../cmake/uninstall.cmake" >/dev/null
left=$(cd "$tmp/moved" && find . -mindepth 1 | sort | tr '\n' ' ')
[[ $left == "./lib ./lib/users-own-file " ]] ||
  { echo "FAIL uninstall left or removed the wrong things: $left"; fails=$((fails + 1)); }
((fails == 0)) || exit 1
echo "install test: find_package and pkg-config consumers built and ran; installed programs run from a moved prefix"
