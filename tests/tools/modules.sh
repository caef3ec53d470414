#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The modulefiles an install generates, as a user meets them: install the
# build into a prefix, move the prefix, then with Lmod (Debian's lmod, which
# reads Lua and Tcl modulefiles) `module load hugepool` puts hugepool-run,
# the man pages, find_package(hugepool) and pkg-config in reach, and
# `module load hugepool-preload` runs every program under the interposer
# until it is unloaded.  Once with the Lua files, once with the Tcl ones,
# and the Tcl ones again with Debian's environment-modules (modulecmd.tcl:
# installed, or unpacked by .ci/deps, since its package conflicts with lmod).
#   modules.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build=$1
src=$2
init=/usr/share/lmod/lmod/init/bash
modulecmd=
for m in "${HUGEPOOL_TEST_MODULECMD:-}" /usr/lib/x86_64-linux-gnu/modulecmd.tcl /usr/share/modules/libexec/modulecmd.tcl \
  /opt/hugepool-ci/environment-modules/usr/lib/x86_64-linux-gnu/modulecmd.tcl; do
  [[ -n $m && -f $m ]] && { modulecmd=$m; break; }
done
[[ -f $init || -n $modulecmd ]] ||
  { echo "skip: neither Lmod nor environment-modules is installed (bash .ci/deps installs both)"; exit 77; }
fails=0
pass() { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null || { echo "cmake --install failed"; exit 1; }
mv "$tmp/prefix" "$tmp/moved"
p=$tmp/moved
for f in share/lmod/modulefiles/hugepool share/modulefiles/hugepool; do
  [[ -n $(ls "$p/$f" 2>/dev/null) ]] && pass "installed $f/" || fail "no $f/ in the prefix"
done

check_flavour() { # $1: lua|tcl, $2: module directory, $3: lmod or a modulecmd.tcl
  local kind=$1 dir=$2 impl=${3:-lmod}
  (
    unset CMAKE_PREFIX_PATH PKG_CONFIG_PATH PYTHONPATH LD_PRELOAD MODULEPATH LOADEDMODULES _LMFILES_ MODULESHOME
    for v in $(env | grep -o '^HUGEPOOL_[A-Z0-9_]*'); do unset "$v"; done
    export PATH=/usr/bin:/bin MANPATH=
    if [[ $impl == lmod ]]; then
      # shellcheck disable=SC1090
      source "$init"
    else # environment-modules: its module command is modulecmd.tcl's output, evaluated
      module() { eval "$(tclsh8.6 "$impl" bash "$@")"; }
    fi
    module use "$dir"
    module load hugepool 2>"$tmp/err" || { echo "FAIL $kind: module load hugepool: $(cat "$tmp/err")"; exit 1; }
    ok=1
    [[ $(command -v hugepool-run) == "$p/bin/hugepool-run" ]] || { echo "FAIL $kind: hugepool-run is $(command -v hugepool-run)"; ok=0; }
    out=$(hugepool-run -- /bin/cat /proc/self/maps 2>&1)
    grep -q "$p/.*libhugepool_preload.so" <<<"$out" || { echo "FAIL $kind: hugepool-run: $out"; ok=0; }
    man -w hugepool-run 2>/dev/null | grep -q "^$p/" || { echo "FAIL $kind: man hugepool-run: $(man -w hugepool-run 2>&1)"; ok=0; }
    man -w ls >/dev/null 2>&1 || { echo "FAIL $kind: the system's man pages are out of reach"; ok=0; }
    [[ $(pkg-config --modversion hugepool 2>&1) =~ ^[0-9] ]] || { echo "FAIL $kind: pkg-config hugepool"; ok=0; }
    # The Python package, with nothing but the module loaded (PYTHONPATH was
    # unset above), from the moved prefix.
    if [[ -n $(find "$p" -path '*-packages/hugepool/__init__.py' 2>/dev/null) ]]; then
      out=$(cd "$tmp" && /usr/bin/python3 -c 'import hugepool; print(hugepool.__version__, hugepool.__file__)' 2>&1)
      [[ $out =~ ^[0-9]+\.[0-9]+\.[0-9]+\ $p/ ]] || { echo "FAIL $kind: import hugepool: $out"; ok=0; }
    fi
    # A program built with pkg-config runs, with no LD_LIBRARY_PATH: the
    # .pc's Libs carry the -rpath to the (moved) prefix's library.
    printf '#include <hugepool/hugepool.h>\nint main(void) { return hugepool_get_page_size() == 0; }\n' >"$tmp/$kind.c"
    # shellcheck disable=SC2046
    if cc "$tmp/$kind.c" $(pkg-config --cflags --libs hugepool) -o "$tmp/$kind.app" 2>"$tmp/err"; then
      # ldd read whole before grep -q: under pipefail an early exit is a SIGPIPE.
      (unset LD_LIBRARY_PATH && "$tmp/$kind.app") 2>>"$tmp/err" &&
        grep -q "libhugepool.so.0 => $p/" <<<"$(ldd "$tmp/$kind.app")" ||
        { echo "FAIL $kind: the pkg-config program: $(cat "$tmp/err"; ldd "$tmp/$kind.app" | grep hugepool)"; ok=0; }
    else
      echo "FAIL $kind: cc \$(pkg-config --libs hugepool): $(cat "$tmp/err")"
      ok=0
    fi
    mkdir -p "$tmp/$kind-consumer"
    cat >"$tmp/$kind-consumer/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.25)
project(c C)
find_package(hugepool REQUIRED)
message(STATUS "hugepool found at ${hugepool_DIR}")
CM
    out=$(cmake -S "$tmp/$kind-consumer" -B "$tmp/$kind-consumer/b" 2>&1)
    grep -q "hugepool found at $p/" <<<"$out" || { echo "FAIL $kind: find_package: $out"; ok=0; }
    module load hugepool-preload 2>"$tmp/err" || { echo "FAIL $kind: module load hugepool-preload: $(cat "$tmp/err")"; ok=0; }
    out=$(/bin/cat /proc/self/maps)
    grep -q "$p/.*libhugepool_preload.so" <<<"$out" || { echo "FAIL $kind: hugepool-preload: no interposer in a plain program"; ok=0; }
    [[ ${UCX_MEM_MALLOC_HOOKS:-} == n ]] || { echo "FAIL $kind: UCX_MEM_MALLOC_HOOKS not n"; ok=0; }
    module unload hugepool-preload
    out=$(/bin/cat /proc/self/maps)
    ! grep -q "libhugepool_preload.so" <<<"$out" || { echo "FAIL $kind: still preloaded after unload"; ok=0; }
    module unload hugepool
    [[ -z $(command -v hugepool-run) ]] || { echo "FAIL $kind: hugepool-run still on PATH after unload"; ok=0; }
    ((ok)) && echo "ok   $kind modulefiles: load, hugepool-run, man, pkg-config (a program built and run), find_package, import hugepool, preload, unload"
    ((ok))
  ) || fails=$((fails + 1))
}
if [[ -f $init ]]; then
  check_flavour lua "$p/share/lmod/modulefiles"
  check_flavour tcl "$p/share/modulefiles"
else
  echo "skip: Lmod is not installed (bash .ci/deps installs lmod)"
fi
if [[ -n $modulecmd ]]; then
  echo "environment-modules: $modulecmd"
  check_flavour tcl-environment-modules "$p/share/modulefiles" "$modulecmd"
else
  echo "skip: environment-modules' modulecmd.tcl not found (bash .ci/deps unpacks it)"
fi
echo "$fails failure(s)"
((fails == 0))
