#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Every installed program answers --version: exit 0, one line "NAME VERSION"
# on stdout, nothing on stderr.  The list is what `cmake --install` puts in
# bin/ and sbin/, so a program added later is checked too.
#   versions.sh BUILD_DIR VERSION
set -uo pipefail
build=$1
version=$2
fails=0
pass() { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
prefix=$(mktemp -d /tmp/hugepool-versions.XXXXXX)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null || { echo "FAIL cmake --install"; exit 1; }
n=0
for prog in "$prefix"/bin/* "$prefix"/sbin/*; do
  [[ -f $prog && -x $prog ]] || continue
  name=$(basename "$prog")
  n=$((n + 1))
  out=$(env -u LD_PRELOAD "$prog" --version 2>"$prefix/err")
  rc=$?
  [[ $rc == 0 && $out == "$name $version" && ! -s $prefix/err ]] && pass "$name --version: $out" ||
    fail "$name --version: exit $rc, stdout '$out', stderr '$(head -c 200 "$prefix/err")'"
done
[[ $n -ge 5 ]] && pass "$n installed programs checked" || fail "only $n installed programs found"
exit $fails
