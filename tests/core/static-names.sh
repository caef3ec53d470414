#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The installed libhugepool.a exports hugepool_* alone: a program with its
# own cache_put, registry_find, option_get ... (static_names.c) links with
# it statically and runs.
#   static-names.sh BUILD_DIR C_COMPILER
set -euo pipefail
build=$1 cc=$2
src=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --component dev --prefix "$tmp/prefix" >/dev/null
archive=$(find "$tmp/prefix" -name libhugepool.a | head -n 1)
[[ -n $archive ]] || { echo "FAIL: no libhugepool.a installed"; exit 1; }
"$cc" -std=c11 -Wall -Werror -I"$tmp/prefix/include" "$src/static_names.c" "$archive" -pthread \
  -o "$tmp/static-names"
HUGEPOOL_POLICY=strict "$tmp/static-names"
