#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The Spack package kept in packaging/spack.
#  1. Without Spack: package.py compiles, and every CMake variable it sets
#     is one the build reads (a renamed option would silently be ignored).
#  2. With a `spack` on PATH: an environment with Debian's packages as
#     externals (cmake, MPICH, numactl, jemalloc, pkgconf, python, Slurm)
#     builds hugepool from this checkout (spack develop) with +mpi +preload
#     +helper +slurm, non-default helper paths, and the installed programs
#     run; then ~mpi ~preload ~helper (library only).  Skipped (77) without
#     Spack: CI has none, and Spack cannot be fetched there.
#   spack.sh SOURCE_DIR
set -uo pipefail
src=$(cd "$1" && pwd)
pkg=$src/packaging/spack/packages/hugepool/package.py
fails=0
pass() { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

python3 - "$pkg" <<'PY' && pass "package.py compiles" || fail "package.py does not compile"
import ast, sys
ast.parse(open(sys.argv[1]).read())
PY
mapfile -t vars < <(grep -o 'define\(_from_variant\)\?("[A-Z_]*"' "$pkg" | grep -o '"[A-Z_]*"' | tr -d '"' | sort -u)
for v in "${vars[@]}"; do
  grep -rqw --include=CMakeLists.txt --include='*.cmake' -- "$v" "$src/CMakeLists.txt" "$src/lib" "$src/mpi" \
    "$src/preload" "$src/setuid-helper" "$src/tools" "$src/packaging" &&
    pass "CMake reads $v" || fail "package.py sets $v, which no CMake file reads"
done

if ! command -v spack >/dev/null; then
  echo "skip: no spack on PATH (the static checks above ran: $fails failure(s))"
  ((fails == 0)) || exit 1
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null | sed 's/^[0-9]*://; s/[-+~].*//'; }
cat >"$tmp/spack.yaml" <<YAML
spack:
  specs: []
  view: false
  concretizer: {unify: false, reuse: false}
  repos: [$src/packaging/spack]
  config: {install_tree: {root: $tmp/opt}, build_stage: [$tmp/stage]}
  packages:
    all: {require: ["%gcc"]}
    cmake: {externals: [{spec: cmake@$(ver cmake), prefix: /usr}], buildable: false}
    mpich: {externals: [{spec: mpich@$(ver mpich), prefix: /usr}], buildable: false}
    mpi: {require: [mpich]}
    numactl: {externals: [{spec: numactl@$(ver libnuma-dev), prefix: /usr}], buildable: false}
    jemalloc: {externals: [{spec: jemalloc@$(ver libjemalloc-dev), prefix: /usr}], buildable: false}
    pkgconf: {externals: [{spec: pkgconf@$(ver pkgconf), prefix: /usr}], buildable: false}
    pkgconfig: {require: [pkgconf]}
    python: {externals: [{spec: python@$(python3 -c 'import platform; print(platform.python_version())'), prefix: /usr}], buildable: false}
    slurm: {externals: [{spec: slurm@$(ver libslurm-dev), prefix: /usr}], buildable: false}
    gmake: {externals: [{spec: gmake@$(ver make), prefix: /usr}], buildable: false}
YAML
# Debian keeps libjemalloc_pic.a and the MPI library in the multiarch directory.
(
  cd "$tmp" || exit 1
  spack -e . develop --no-clone --path "$src" hugepool@=0.1.0 >"$tmp/develop.log" 2>&1 || { cat "$tmp/develop.log"; exit 1; }
  spack -e . add "hugepool@=0.1.0+mpi+preload+helper+slurm reserve_conf=/opt/site/hugepool.conf state_dir=/var/lib/hp jobs_dir=/run/hp/jobs" &&
    spack -e . concretize -f >"$tmp/concretize.log" 2>&1 && spack -e . install >"$tmp/install.log" 2>&1
) && pass "spack install hugepool+mpi+preload+helper+slurm with Debian externals" ||
  { fail "spack install: $(tail -n 30 "$tmp"/*.log)"; }
prefix=$(cd "$tmp" && spack -e . location -i hugepool 2>/dev/null)
if [[ -n $prefix ]]; then
  "$prefix/bin/hugepool-run" -- /bin/cat /proc/self/maps | grep -q "$prefix/.*libhugepool_preload.so" &&
    pass "the Spack-installed hugepool-run preloads its interposer" || fail "hugepool-run from $prefix"
  strings "$prefix/sbin/hugepool-reserve" | grep -q '^/opt/site/hugepool.conf$' &&
    pass "the helper's configured path is compiled in" || fail "reserve_conf not in the helper"
  [[ -f $prefix/lib/libhugepool_mpi.so || -n $(find "$prefix" -name 'libhugepool_mpi.so*') ]] &&
    pass "libhugepool_mpi installed" || fail "no libhugepool_mpi"
  [[ -n $(find "$prefix" -name hugepool_spank.so) ]] && pass "the SPANK plugin installed" || fail "no SPANK plugin"
fi
echo "$fails failure(s)"
((fails == 0))
