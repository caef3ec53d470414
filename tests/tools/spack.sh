#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The Spack package kept in packaging/spack, built by a real Spack.
#  1. package.py compiles, and every CMake variable it sets is one the build
#     reads (a renamed option would silently be ignored).
#  2. The Spack and clingo kept as tarballs beside the project (shared/vendor
#     in a parent directory of the source tree, or HUGEPOOL_VENDOR_DIR) are
#     unpacked into a temporary directory, and an environment with Debian's
#     packages as externals (what .ci/deps installs; no network) builds a
#     copy of this source tree three times:
#       hugepool                the default spec (+mpi +preload +helper ~slurm +tools)
#       hugepool ~helper        (the slurm variant does not exist then)
#       hugepool +slurm ~mpi ~preload +fortran, with non-default helper paths
#     and each install holds what its spec asks for and nothing else: no
#     SPANK plugin without +slurm (Slurm's spank.h is on this machine), no
#     Open MPI library (mpicc.openmpi is on this machine, the spec's MPI is
#     MPICH), no helper with ~helper, Fortran modules with +fortran only, no
#     Python package.
#  3. The default spec's installed programs run: hugepool-run preloads its
#     interposer, and after `spack load` a CMake consumer (find_package) and
#     a pkg-config consumer build and run.
#  4. The release: packaging/dist makes the 0.1.0 tarball, whose sha256 is
#     the one package.py pins; from a mirror holding it, hugepool@0.1.0
#     ~helper ~mpi builds offline; the tarball with one byte changed is
#     refused.  (Said and left out where the checkout lacks the release's
#     commit: a shallow clone or an exported tree.)
# That Spack (0.23.0.dev0, June 2024) predates the c/cxx/fortran language
# virtuals, which current Spack requires and package.py declares: the test
# strips those depends_on lines from its copy of the repository.
# Never skipped: without the tarballs the test fails and says where it looked.
#   spack.sh SOURCE_DIR
set -uo pipefail
src=$(cd "$1" && pwd)
pkg=$src/packaging/spack/packages/hugepool/package.py
fails=0
pass() { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
t0=$SECONDS
elapsed() { echo "     ($((SECONDS - t0)) s)"; }

python3 - "$pkg" <<'PY' && pass "package.py compiles" || fail "package.py does not compile"
import ast, sys
ast.parse(open(sys.argv[1]).read())
PY
mapfile -t vars < <(grep -o 'define\(_from_variant\)\?("[A-Za-z0-9_]*"' "$pkg" | grep -o '"[A-Za-z0-9_]*"' | tr -d '"' | sort -u)
for v in "${vars[@]}"; do
  grep -rqw --include=CMakeLists.txt --include='*.cmake' -- "$v" "$src/CMakeLists.txt" "$src/lib" "$src/mpi" \
    "$src/preload" "$src/setuid-helper" "$src/tools" "$src/packaging" "$src/python" "$src/fortran" "$src/cmake" &&
    pass "CMake reads $v" || fail "package.py sets $v, which no CMake file reads"
done

# ---- the vendored Spack and clingo ----
find_vendor() {
  local d=$src
  if [[ -n ${HUGEPOOL_VENDOR_DIR:-} ]]; then echo "$HUGEPOOL_VENDOR_DIR"; return; fi
  while [[ $d != / ]]; do
    d=$(dirname "$d")
    [[ -d $d/shared/vendor ]] && { echo "$d/shared/vendor"; return; }
  done
}
vendor=$(find_vendor)
spack_tar=$(ls "$vendor"/spack-*.tar.xz 2>/dev/null | head -n 1)
clingo_tar=$(ls "$vendor"/clingo-*.tar.xz 2>/dev/null | head -n 1)
if [[ -z $vendor || -z $spack_tar || -z $clingo_tar ]]; then
  echo "FAIL no Spack and clingo tarballs: looked for shared/vendor/{spack,clingo}-*.tar.xz in every parent" \
    "directory of $src${vendor:+ (found $vendor)}; set HUGEPOOL_VENDOR_DIR to the directory that holds them"
  exit 1
fi
tmp=$(mktemp -d /tmp/hugepool-spack.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
tar -C "$tmp" -xJf "$spack_tar" && tar -C "$tmp" -xJf "$clingo_tar" ||
  { echo "FAIL cannot unpack $spack_tar and $clingo_tar"; exit 1; }
# Nothing of the user's own Spack configuration or caches.
export SPACK_PYTHON=/usr/bin/python3 SPACK_DISABLE_LOCAL_CONFIG=1
export SPACK_USER_CONFIG_PATH=$tmp/user SPACK_USER_CACHE_PATH=$tmp/cache
export PYTHONPATH=$(echo "$tmp"/clingo/lib/python3*/site-packages)
unset SPACK_ROOT SPACK_ENV CMAKE_PREFIX_PATH PKG_CONFIG_PATH LD_LIBRARY_PATH
spack() { "$tmp/spack/bin/spack" "$@"; }
spack --version >/dev/null 2>"$tmp/err" || { echo "FAIL the unpacked Spack does not run: $(cat "$tmp/err")"; exit 1; }
pass "Spack $(spack --version) from $spack_tar"

# A copy of the source tree (Spack builds inside the tree it develops) and
# of the package repository, without the language virtuals.
mkdir -p "$tmp/src"
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  (cd "$src" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$tmp/src" 2>/dev/null)
else
  (cd "$src" && find . -path ./.git -prune -o -path './build*' -prune -o -type f -print0 |
    xargs -0 cp --parents -t "$tmp/src")
fi
cp -r "$src/packaging/spack" "$tmp/repo"
sed -i -E '/^\s*depends_on\("(c|cxx|fortran)",/d' "$tmp/repo/packages/hugepool/package.py"
grep -qE 'depends_on\("(c|cxx)"' "$pkg" && ! grep -qE 'depends_on\("(c|cxx|fortran)"' "$tmp/repo/packages/hugepool/package.py" &&
  pass "package.py declares c and cxx; stripped for this Spack, which predates the language virtuals" ||
  fail "package.py: expected depends_on(\"c\") and (\"cxx\") (modern Spack needs them), stripped in the copy"

ver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null | sed 's/^[0-9]*://; s/[-+~].*//'; }
mkdir -p "$tmp/env"
cat >"$tmp/env/spack.yaml" <<YAML
spack:
  specs: []
  view: false
  concretizer: {unify: false, reuse: false, targets: {granularity: generic}}
  repos: [$tmp/repo]
  config: {install_tree: {root: $tmp/opt}, build_stage: [$tmp/stage], build_jobs: 2}
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
cp "$tmp/env/spack.yaml" "$tmp/spack.yaml.orig" # before spack rewrites it (the release's below)
default="hugepool@=0.1.0"
nohelper="hugepool@=0.1.0 ~helper"
slurm="hugepool@=0.1.0 +slurm ~mpi ~preload +fortran reserve_conf=/opt/site/hugepool.conf state_dir=/var/lib/hp jobs_dir=/run/hp/jobs"
cd "$tmp/env" || exit 1
if spack compiler find --scope site >"$tmp/compiler.log" 2>&1 &&
  spack -e . develop --no-clone --path "$tmp/src" hugepool@=0.1.0 >"$tmp/develop.log" 2>&1 &&
  spack -e . add "$default" "$nohelper" "$slurm" >"$tmp/add.log" 2>&1 &&
  spack -e . concretize -f >"$tmp/concretize.log" 2>&1; then
  pass "concretized with Debian externals: $(grep -c '^ - .*hugepool@' "$tmp/concretize.log") hugepool specs"
else
  echo "FAIL spack concretize: $(tail -n 30 "$tmp"/compiler.log "$tmp"/develop.log "$tmp"/add.log "$tmp"/concretize.log)"
  exit 1
fi
elapsed
spack -e . install >"$tmp/install.log" 2>&1 && pass "spack install of the three specs" ||
  fail "spack install: $(grep -B 5 -A 20 'Error' "$tmp/install.log" | head -n 60)"
elapsed

# ---- what each spec installed ----
prefix_of() { spack -e . location -i "$1" 2>/dev/null; }
p_default=$(prefix_of "hugepool+helper~slurm+mpi")
p_nohelper=$(prefix_of "hugepool~helper")
p_slurm=$(prefix_of "hugepool+slurm")
has() { [[ -n $(find "$1" -name "$2" -print -quit 2>/dev/null) ]]; }
expect() { # PREFIX LABEL present|absent NAME...
  local p=$1 label=$2 want=$3 n
  shift 3
  [[ -n $p && -d $p ]] || { fail "$label: not installed"; return; }
  for n in "$@"; do
    if has "$p" "$n"; then
      [[ $want == present ]] && pass "$label installs $n" || fail "$label installs $n: $(cd "$p" && find . -name "$n")"
    else
      [[ $want == absent ]] && pass "$label: no $n" || fail "$label lacks $n"
    fi
  done
}
expect "$p_default" default present hugepool-run hugepool-stats hugepool-reserve 'libhugepool.so.0' \
  'libhugepool_mpi.so.0' libhugepool_preload.so libhugepool_mpi_preload.so hugepool.pc hugepool-reserve.1.gz
expect "$p_default" default absent hugepool_spank.so '*openmpi*' '*.mod' '_core*.so' 'modulefiles'
expect "$p_nohelper" "~helper" present 'libhugepool.so.0' hugepool-run 'libhugepool_mpi.so.0'
expect "$p_nohelper" "~helper" absent hugepool-reserve hugepool-reserve.1.gz hugepool_spank.so '*openmpi*'
expect "$p_slurm" "+slurm ~mpi ~preload +fortran" present hugepool_spank.so hugepool-reserve 'libhugepool.so.0' \
  hugepool.mod 'libhugepool_fortran.so.0' hugepool-fortran.pc
expect "$p_slurm" "+slurm ~mpi ~preload +fortran" absent '*hugepool_mpi*' libhugepool_preload.so hugepool-run '*openmpi*'
if [[ -n $p_slurm ]]; then
  for f in bin/hugepool-reserve "$(cd "$p_slurm" && find . -name hugepool_spank.so | head -n 1)"; do
    # Read whole before grep -q: under pipefail an early exit is a SIGPIPE.
    grep -qx /opt/site/hugepool.conf <<<"$(strings "$p_slurm/$f" 2>/dev/null)" &&
      pass "reserve_conf=/opt/site/hugepool.conf compiled into $f" || fail "reserve_conf not in $f"
  done
fi
if [[ -n $p_default ]]; then
  # reserve_conf=project (the default): the project's own path, from the one file that sets it.
  want=$(sed -n 's/^set(HUGEPOOL_RESERVE_CONF \([^ ]*\) .*/\1/p' "$src/cmake/helper-paths.cmake")
  [[ -n $want ]] && grep -qx "$want" <<<"$(strings "$p_default/bin/hugepool-reserve" 2>/dev/null)" &&
    pass "default spec: the project's $want compiled into hugepool-reserve" ||
    fail "default spec: '$want' not compiled into hugepool-reserve"
  out=$(readelf -d "$p_default"/lib*/libhugepool_mpi.so.0 2>&1)
  grep -q 'libmpich' <<<"$out" && pass "libhugepool_mpi links the spec's MPI (MPICH)" ||
    fail "libhugepool_mpi's MPI: $(grep NEEDED <<<"$out")"
fi

# ---- the default spec's programs, and consumers after `spack load` ----
if [[ -n $p_default ]]; then
  out=$("$p_default/bin/hugepool-run" -- /bin/cat /proc/self/maps 2>&1)
  grep -q "$p_default/.*libhugepool_preload.so" <<<"$out" &&
    pass "the installed hugepool-run preloads its interposer" || fail "hugepool-run: $(tail -n 5 <<<"$out")"
  out=$("$p_default/bin/hugepool" doctor 2>&1) || true
  grep -q '^verdict: ' <<<"$out" && pass "the installed hugepool doctor gives its verdict" || fail "doctor: $out"
  mkdir -p "$tmp/consumer"
  cat >"$tmp/consumer/app.c" <<'C'
#include <hugepool/hugepool.h>
#include <stdio.h>
int main(void) {
  printf("policy %s\n", hugepool_policy_name(hugepool_get_policy()));
  return 0;
}
C
  cat >"$tmp/consumer/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.25)
project(consumer C)
find_package(hugepool REQUIRED)
add_executable(app app.c)
target_link_libraries(app PRIVATE hugepool::hugepool)
CM
  (
    eval "$(spack -e . load --sh hugepool+helper~slurm+mpi)" || exit 1
    cmake -S "$tmp/consumer" -B "$tmp/consumer/build" >"$tmp/consumer.log" 2>&1 &&
      cmake --build "$tmp/consumer/build" >>"$tmp/consumer.log" 2>&1 || exit 2
    grep -q '^policy ' <<<"$("$tmp/consumer/build/app")" || exit 3
    grep -q "hugepool_DIR:PATH=$p_default/" "$tmp/consumer/build/CMakeCache.txt" || exit 4
  ) && pass "after spack load: a CMake consumer (find_package) builds against the install and runs" ||
    fail "CMake consumer (step $?): $(tail -n 15 "$tmp/consumer.log")"
  (
    eval "$(spack -e . load --sh hugepool+helper~slurm+mpi)" || exit 1
    unset LD_LIBRARY_PATH
    # shellcheck disable=SC2046
    cc "$tmp/consumer/app.c" $(pkg-config --cflags --libs hugepool) -o "$tmp/consumer/pc-app" 2>"$tmp/pc.log" || exit 2
    grep -q '^policy ' <<<"$("$tmp/consumer/pc-app" 2>>"$tmp/pc.log")" || exit 3
    grep -q "libhugepool.so.0 => $p_default/" <<<"$(ldd "$tmp/consumer/pc-app")" || exit 4
  ) && pass "after spack load: a pkg-config consumer builds and runs (no LD_LIBRARY_PATH)" ||
    fail "pkg-config consumer (step $?): $(cat "$tmp/pc.log")"
fi
elapsed

# ---- the release: packaging/dist's tarball, the recipe's checksum, a mirror ----
# A second environment, without the develop entry: hugepool@0.1.0 comes from
# a mirror holding the tarball packaging/dist makes, checked against the
# sha256 of package.py, and builds offline; one changed byte is refused.
rel=hugepool-0.1.0.tar.gz
mkdir -p "$tmp/mirror/hugepool" "$tmp/relenv"
rel_commit=$(awk '$1 == "0.1.0" { print $2 }' "$src/packaging/releases")
if ! git -C "$src" cat-file -e "${rel_commit:-none}^{commit}" 2>/dev/null; then
  # A shallow clone or an exported tree: the release's commit is not here.
  echo "SKIP the release checks: commit ${rel_commit:-?} of release 0.1.0 is not in this checkout (shallow clone or export)"
elif "$src/packaging/dist" --out "$tmp/mirror/hugepool" 0.1.0 >"$tmp/dist.log" 2>&1; then
  sha=$(sha256sum "$tmp/mirror/hugepool/$rel" | cut -d' ' -f1)
  grep -q "version(\"0.1.0\", sha256=\"$sha\")" "$pkg" &&
    pass "packaging/dist 0.1.0 gives the tarball whose sha256 package.py pins ($sha)" ||
    fail "packaging/dist 0.1.0: sha256 $sha is not the one in package.py ($(grep -o 'sha256="[0-9a-f]*"' "$pkg"))"
  sed '/^  view: false/a\  mirrors: {release: file://'"$tmp"'/mirror}' "$tmp/spack.yaml.orig" >"$tmp/relenv/spack.yaml"
  release="hugepool@0.1.0 ~helper ~mpi"
  (cd "$tmp/relenv" && spack -e . add "$release" && spack -e . concretize -f && spack -e . install) >"$tmp/release.log" 2>&1 &&
    grep -q "hugepool-run" <<<"$(ls "$(cd "$tmp/relenv" && spack -e . location -i hugepool@0.1.0)/bin" 2>&1)" &&
    pass "spack install $release from the mirror: checksum verified, built offline" ||
    fail "release build: $(grep -iE -B 3 -A 10 'error|checksum' "$tmp/release.log" | head -n 40)"
  # One byte changed: Spack refuses the tarball.
  cp "$tmp/mirror/hugepool/$rel" "$tmp/good.tar.gz"
  printf '\x00' | dd of="$tmp/mirror/hugepool/$rel" bs=1 seek=100 conv=notrunc status=none
  (cd "$tmp/relenv" && spack clean --downloads --stage && spack -e . fetch hugepool@0.1.0) >"$tmp/bad.log" 2>&1
  rc=$?
  ((rc != 0)) && grep -qi 'checksum' "$tmp/bad.log" && pass "a tarball with one byte changed is refused (checksum)" ||
    fail "a changed tarball: rc $rc, $(tail -n 8 "$tmp/bad.log")"
  mv "$tmp/good.tar.gz" "$tmp/mirror/hugepool/$rel"
else
  fail "packaging/dist 0.1.0: $(cat "$tmp/dist.log")"
fi
elapsed
echo "$fails failure(s)"
((fails == 0))
