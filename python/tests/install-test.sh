#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs the build tree into a temporary prefix and imports the package
# from there with PYTHONPATH alone: the package and its extension come from
# the prefix, the extension finds the prefix's libhugepool, and an array is
# on hugetlb pages (smaps; a pool of 4 free pages, with-pool).
# Where the build would install the package for its configured prefix is the
# interpreter's own site directory when the prefix is the interpreter's
# (/usr/local or /usr): importable there with no PYTHONPATH.
#   install-test.sh BUILD_DIR PYTHON CONFIGURED_PREFIX SITEDIR
set -euo pipefail
build=$1 python=$2 configured=$3 sitedir=$4
case $configured in
  /usr | /usr/local)
    "$python" -c 'import sys; d = sys.argv[1]; assert d in sys.path, f"{d} is not on {sys.path}"' \
      "$configured/$sitedir" || { echo "FAIL: $configured/$sitedir is not the interpreter's site directory"; exit 1; }
    echo "install test: prefix $configured installs into $configured/$sitedir, on the interpreter's path"
    ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
site=$(find "$tmp/prefix" -path '*-packages/hugepool/__init__.py' -printf '%h\n' | head -n 1)
[[ -n $site ]] || { echo "FAIL: the package is not installed"; exit 1; }
cd "$tmp"
PYTHONPATH=$(dirname "$site"):$here "$here/../../tests/preload/with-pool" 4 "$python" - "$tmp/prefix" <<'PY'
import os, sys
import hugepool, hugepool._core
from kernel_view import on_hugetlb
prefix = sys.argv[1]
assert hugepool.__file__.startswith(prefix), hugepool.__file__
libs = [l.split()[-1] for l in open("/proc/self/maps") if "libhugepool.so" in l]
assert libs and all(l.startswith(prefix) for l in libs), libs
a = hugepool.zeros(1 << 20)
a[:] = 1
assert on_hugetlb(a.__array_interface__["data"][0], a.nbytes)
print(f"install test: hugepool imported from {os.path.dirname(hugepool.__file__)}, libhugepool from {libs[0]}")
PY
# A python3 without numpy (often the first on PATH is not the system's) gets
# an ImportError that says what is missing and what to do, not a bare
# ModuleNotFoundError from inside the package.
mkdir -p "$tmp/no-numpy/numpy"
echo 'raise ModuleNotFoundError("No module named numpy", name="numpy")' >"$tmp/no-numpy/numpy/__init__.py"
out=$(PYTHONPATH=$tmp/no-numpy:$(dirname "$site") "$python" -c 'import hugepool' 2>&1) && {
  echo "FAIL: hugepool imported without numpy"
  exit 1
}
grep -q 'hugepool .* needs numpy, which Python 3\.[0-9]* (.*) cannot import.*python3-numpy' <<<"$out" ||
  { echo "FAIL: the error without numpy: $out"; exit 1; }
echo "install test: without numpy: $(tail -n 1 <<<"$out")"
ver=$(PYTHONPATH=$(dirname "$site") "$python" -c 'import hugepool; print(hugepool.__version__)')
[[ $ver == "$(sed -n 's/^project(hugepool VERSION \([0-9.]*\).*/\1/p' "$here/../../CMakeLists.txt")" ]] ||
  { echo "FAIL: hugepool.__version__ is '$ver'"; exit 1; }
echo "install test: hugepool.__version__ $ver"
