#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The Debian packages, as an administrator meets them.
#  1. Build them with cpack (prefix /usr) and check what each holds: the MPI
#     layer in libhugepool-mpi0/-mpi-dev, conffiles, copyright and changelog
#     in every package, no RUNPATH, the Slurm package's dependency on slurmd.
#     A user's group (hugepool-users) and how to admit users in the helper's
#     description; no postinst/postrm that only call ldconfig (the trigger
#     does); the Python package and the Fortran modules' files packaged.
#  2. lintian: no errors and no warnings (the overrides say why).
#  3. A clean Debian root (debootstrap --variant=minbase bookworm, cached as
#     a tarball under /var/cache/hugepool-tests): apt installs the packages
#     with the dependencies they declare, the installed programs run there,
#     and a purge leaves nothing (files, state, group).  Skipped, with the
#     reason, where no Debian mirror can be reached and nothing is cached.
#  4. This machine, as an earlier setuid-helper/install.sh left it (the
#     group, /etc/hugepool/reserve.conf, /var/lib/hugepool with its grant
#     table, /run/hugepool/jobs): dpkg -i keeps the site's config, the
#     installed files work (a user the admin put in hugepool-users reserves
#     pages through the installed helper, seen in /proc/meminfo), and a
#     purge removes only what the packages made.
#  packages.sh SOURCE_DIR WORK_DIR
set -euo pipefail
src=$1
work=$2
pkgs=(libhugepool0 libhugepool-dev libhugepool-mpi0 libhugepool-mpi-dev libhugepool-mpi-openmpi0
  libhugepool-mpi-openmpi-dev hugepool-tools hugepool-helper hugepool-slurm python3-hugepool libhugepool-fortran0
  libhugepool-fortran-dev libhugepool-fortran-mpi0 libhugepool-fortran-mpi-dev)
cache=/var/cache/hugepool-tests
fails=0
pass() { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
t0=$SECONDS
elapsed() { echo "     ($((SECONDS - t0)) s)"; }

[[ $(id -u) -eq 0 ]] || { echo "skip: needs root (dpkg -i, chroot)"; exit 77; }
for p in "${pkgs[@]}"; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q installed; then
    echo "skip: $p is already installed on this machine; not touching it"
    exit 77
  fi
done

# ---- 1. build and contents (outside the pool lock) ----
rm -rf "$work"
mkdir -p "$work"
cmake -S "$src" -B "$work/build" -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DHUGEPOOL_BUILD_TESTS=OFF -DHUGEPOOL_BUILD_BENCH=OFF >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" -j2 >"$work/build.log" 2>&1 || { tail -n 40 "$work/build.log"; exit 1; }
(cd "$work/build" && cpack -G DEB >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; exit 1; }
elapsed
mapfile -t debs < <(ls "$work"/build/*.deb)
deb_of() { ls "$work"/build/"$1"_*.deb 2>/dev/null | head -n 1; }
names=$(for d in "${debs[@]}"; do dpkg-deb -f "$d" Package; done | sort | tr '\n' ' ')
want=$(printf '%s\n' "${pkgs[@]}" | sort | tr '\n' ' ')
if [[ ! -f /usr/include/slurm/spank.h ]]; then want=${want/hugepool-slurm /}; fi
if ! /usr/bin/python3 -c 'import numpy' 2>/dev/null; then want=${want/python3-hugepool /}; fi
if ! command -v gfortran >/dev/null; then
  for p in libhugepool-fortran-dev libhugepool-fortran0 libhugepool-fortran-mpi-dev libhugepool-fortran-mpi0; do
    want=${want/$p /}
  done
fi
if ! grep -q 'libhugepool-mpi0' <<<"$names" && ! command -v mpicc >/dev/null; then
  for p in libhugepool-mpi-dev libhugepool-mpi0 libhugepool-fortran-mpi-dev libhugepool-fortran-mpi0; do
    want=${want/$p /}
  done
fi
if ! command -v mpicc.openmpi >/dev/null; then
  want=${want/libhugepool-mpi-openmpi-dev /}
  want=${want/libhugepool-mpi-openmpi0 /}
fi
[[ $names == "$want" ]] && pass "cpack built: $names" || fail "cpack built '$names', expected '$want'"
holds() { # (grep -q on a pipe would end dpkg-deb early: pipefail)
  local list
  list=$(dpkg-deb -c "$(deb_of "$1")")
  grep -q -- "$2" <<<"$list"
}
for pair in "libhugepool-mpi0 /libhugepool_mpi.so.0" "libhugepool-mpi-dev /libhugepool_mpi\.so\([^.]\|\$\)" \
  "libhugepool-mpi-dev /hugepool-mpi.pc\$" "libhugepool-mpi-dev /hugepoolMpiTargets.cmake\$" \
  "libhugepool-mpi-dev /include/hugepool/mpi.h\$" "libhugepool-dev /include/hugepool/hugepool.h\$" \
  "hugepool-helper ./etc/hugepool/reserve.conf\$" "hugepool-helper ./usr/lib/tmpfiles.d/hugepool.conf\$" \
  "hugepool-slurm ./etc/slurm/plugstack.conf.d/hugepool.conf\$" "hugepool-tools /man1/hugepool-demo.1.gz\$" \
  "hugepool-tools /doc/hugepool-tools/README.md.gz\$" "hugepool-tools /bash-completion/completions/hugepool-run\$" \
  "hugepool-tools /libhugepool_small_heap.so\$" \
  "hugepool-helper /bash-completion/completions/hugepool-reserve\$" \
  "libhugepool-dev /man3/hugepool_alloc.3.gz -> hugepool.3.gz\$" "libhugepool-dev /man3/hugepool_segment_map.3.gz -> " \
  "python3-hugepool ./usr/lib/python3/dist-packages/hugepool/__init__.py\$" \
  "python3-hugepool ./usr/lib/python3/dist-packages/hugepool/_core.*\.so\$" \
  "libhugepool-fortran0 /libhugepool_fortran.so.0 -> " "libhugepool-fortran-dev /hugepool/fortran/.*/hugepool.mod\$" \
  "libhugepool-fortran-dev /hugepool-fortran.pc\$" "libhugepool-fortran-dev /libhugepool_fortran.so -> " \
  "libhugepool-mpi-openmpi0 /libhugepool_mpi_openmpi.so.0" "libhugepool-mpi-openmpi-dev /hugepool-mpi-openmpi.pc\$" \
  "libhugepool-fortran-mpi0 /libhugepool_fortran_mpi.so.0 -> " "libhugepool-fortran-mpi-dev /hugepool_mpi.mod\$"; do
  set -- $pair
  [[ -n $(deb_of "$1") ]] || continue
  holds "$1" "$2" && pass "$1 holds $2" || fail "$1 lacks $2"
done
[[ -z $(deb_of libhugepool-mpi0) ]] || ! holds libhugepool-dev 'include/hugepool/mpi.h$' ||
  fail "mpi.h is in libhugepool-dev, not with its library"
for d in "${debs[@]}"; do
  p=$(dpkg-deb -f "$d" Package)
  dpkg-deb -c "$d" >"$work/contents"
  grep -q "\./usr/share/doc/$p/copyright\$" "$work/contents" && grep -q "\./usr/share/doc/$p/changelog.gz\$" "$work/contents" &&
    pass "$p: copyright and changelog.gz" || fail "$p: no copyright or changelog"
  # The ldconfig trigger, never a maintainer script that calls ldconfig.
  for script in postinst postrm; do
    if grep -q ldconfig <<<"$(dpkg-deb -I "$d" "$script" 2>/dev/null)"; then fail "$p: its $script calls ldconfig"; fi
  done
  if grep -q '^-.*\.so\.[0-9.]*$' "$work/contents"; then
    grep -qx 'activate-noawait ldconfig' <<<"$(dpkg-deb -I "$d" triggers 2>/dev/null)" && pass "$p: the ldconfig trigger" ||
      fail "$p: a shared library and no ldconfig trigger"
  fi
  m=$(dpkg-deb -f "$d" Maintainer)
  [[ $m != *localhost* && $m == *@* ]] && pass "$p: maintainer '$m'" || fail "$p: maintainer '$m'"
  if grep -q 'hugepool-reserve$' "$work/contents"; then
    grep -q -- '-rwxr-xr-x root/root .*/usr/bin/hugepool-reserve$' "$work/contents" &&
      pass "the helper package ships the binary plain (postinst makes it setgid)" ||
      fail "helper binary mode in the package: $(grep hugepool-reserve "$work/contents")"
  fi
  # No RUNPATH in a package for /usr (Debian policy 10.2).
  dpkg-deb -x "$d" "$work/x-$p"
  while read -r f; do
    if readelf -d "$f" 2>/dev/null | grep -q 'RUNPATH\|RPATH'; then fail "$p: ${f#"$work"/} has a RUNPATH"; fi
  done < <(find "$work/x-$p" -type f \( -name '*.so*' -o -perm -u+x \))
done
for pc in "hugepool-helper /etc/hugepool/reserve.conf" \
  "hugepool-slurm /etc/slurm/plugstack.conf.d/hugepool.conf"; do
  set -- $pc
  [[ -n $(deb_of "$1") ]] || continue
  grep -qx "$2" <<<"$(dpkg-deb -I "$(deb_of "$1")" conffiles 2>/dev/null)" && pass "$1: conffile $2" || fail "$1: $2 is no conffile"
done
desc=$(dpkg-deb -f "$(deb_of hugepool-helper)" Description)
grep -q 'hugepool-users' <<<"$desc" && grep -q 'adduser USER hugepool-users' <<<"$desc" &&
  pass "hugepool-helper's description says how an admin admits a user" || fail "helper description: $desc"
grep -q adduser <<<"$(dpkg-deb -f "$(deb_of hugepool-helper)" Depends)" && pass "hugepool-helper depends on adduser (addgroup)" ||
  fail "hugepool-helper: Depends $(dpkg-deb -f "$(deb_of hugepool-helper)" Depends)"
if [[ -n $(deb_of python3-hugepool) ]]; then
  dep=$(dpkg-deb -f "$(deb_of python3-hugepool)" Depends)
  py=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  grep -q "python3 (>= $py~)" <<<"$dep" && grep -q python3-numpy <<<"$dep" &&
    pass "python3-hugepool depends on python3 $py and numpy" || fail "python3-hugepool: Depends $dep"
fi
# Each package pulls in only the runtime it needs: an MPICH site gets no
# Open MPI, a serial Fortran user no MPI, a login node no slurmd.
deps_of() { # the Depends of package $1 (empty where it was not built)
  [[ -n $(deb_of "$1") ]] && dpkg-deb -f "$(deb_of "$1")" Depends || true
}
for rule in "libhugepool-mpi0 openmpi" "libhugepool-mpi-dev openmpi" "libhugepool-mpi-openmpi0 mpich" \
  "libhugepool-fortran0 mpi" "libhugepool-fortran-dev mpi" "hugepool-slurm slurmd"; do
  set -- $rule
  [[ -n $(deb_of "$1") ]] || continue
  dep=$(deps_of "$1")
  grep -q "$2" <<<"$dep" && fail "$1 depends on $2: $dep" || pass "$1 needs no $2 ($dep)"
done
[[ -z $(deb_of libhugepool-mpi0) ]] || grep -q libmpich <<<"$(deps_of libhugepool-mpi0)" ||
  fail "libhugepool-mpi0 does not depend on MPICH's library: $(deps_of libhugepool-mpi0)"
if [[ -n $(deb_of hugepool-slurm) ]]; then
  snippet=$(dpkg-deb --fsys-tarfile "$(deb_of hugepool-slurm)" | tar -xO ./etc/slurm/plugstack.conf.d/hugepool.conf)
  grep -q "^#required /usr/lib/.*/slurm-wlm/hugepool_spank.so" <<<"$snippet" && ! grep -q '^[^#]' <<<"$snippet" &&
    pass "plugstack.conf.d snippet names the plugin, enabled by no line until the admin chooses" ||
    fail "plugstack snippet: $snippet"
fi

# ---- 2. lintian ----
if command -v lintian >/dev/null; then
  lintian --tag-display-limit 0 "${debs[@]}" >"$work/lintian.log" 2>&1 || true
  if grep -q '^[EW]: ' "$work/lintian.log"; then fail "lintian: $(grep '^[EW]: ' "$work/lintian.log")"; else
    pass "lintian: no errors, no warnings"
  fi
else
  fail "lintian is not installed (bash .ci/deps)"
fi
elapsed

# ---- 3. a clean Debian root ----
clean_root() {
  local root=$work/root tarball=$cache/bookworm-minbase.tar.gz
  mkdir -p "$cache" "$root"
  if [[ ! -f $tarball ]]; then
    if ! command -v debootstrap >/dev/null; then echo "skip: clean root: debootstrap is not installed"; return; fi
    if ! timeout 300 debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1; then
      echo "skip: clean root: debootstrap could not reach a Debian mirror ($(tail -n 1 "$work/debootstrap.log"))"
      rm -rf "$root"
      return
    fi
    tar -C "$root" -czf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
  else
    tar -C "$root" -xzf "$tarball"
  fi
  cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
  mkdir -p "$root/tmp/debs"
  local inst=()
  for p in libhugepool0 libhugepool-dev hugepool-tools hugepool-helper libhugepool-mpi0; do
    [[ -n $(deb_of $p) ]] || continue
    cp "$(deb_of $p)" "$root/tmp/debs/" && inst+=("/tmp/debs/$(basename "$(deb_of $p)")")
  done
  mount -t proc proc "$root/proc"
  # shellcheck disable=SC2064
  trap "umount '$root/proc' 2>/dev/null || true; rm -rf '$root'" RETURN
  in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }
  if ! in_root apt-get update -qq >"$work/root-apt.log" 2>&1; then
    echo "skip: clean root: apt-get update found no mirror ($(tail -n 1 "$work/root-apt.log"))"
    return
  fi
  if in_root apt-get install -y -qq --no-install-recommends "${inst[@]}" >>"$work/root-apt.log" 2>&1; then
    pass "clean root: apt installs libhugepool0, -dev, hugepool-tools, hugepool-helper, libhugepool-mpi0 with their declared dependencies"
  else
    fail "clean root: apt-get install: $(tail -n 15 "$work/root-apt.log")"
    return
  fi
  if [[ -n $(deb_of libhugepool-mpi0) ]]; then
    local mpis
    mpis=$(in_root dpkg-query -W -f '${Package}\n' | grep -E 'openmpi|mpich' | tr '\n' ' ')
    [[ $mpis == *libmpich* && $mpis != *openmpi* ]] && pass "clean root: libhugepool-mpi0 brought MPICH alone ($mpis)" ||
      fail "clean root: MPI packages after libhugepool-mpi0: $mpis"
  fi
  out=$(in_root hugepool --version 2>&1) && pass "clean root: hugepool --version: $out" || fail "clean root: hugepool: $out"
  out=$(in_root hugepool doctor 2>&1) || true
  grep -q '^verdict: ' <<<"$out" && pass "clean root: hugepool doctor gives its verdict" || fail "clean root: doctor: $out"
  out=$(in_root hugepool-run -- /bin/cat /proc/self/maps 2>&1) && grep -q '/usr/lib/.*libhugepool_preload.so' <<<"$out" &&
    pass "clean root: hugepool-run preloads the installed interposer" || fail "clean root: hugepool-run: $out"
  out=$(in_root hugepool-run --small-heap -- /bin/cat /proc/self/maps 2>&1) &&
    grep -q '/usr/lib/.*libhugepool_small_heap.so' <<<"$out" && ! grep -q 'cannot load' <<<"$out" &&
    pass "clean root: --small-heap loads the installed small heap" || fail "clean root: --small-heap: $out"
  out=$(in_root hugepool-stats --help 2>&1) && pass "clean root: hugepool-stats runs (python3 declared)" ||
    fail "clean root: hugepool-stats: $out"
  out=$(in_root hugepool-demo 2>&1) || true
  ! grep -q 'cannot open shared object' <<<"$out" && pass "clean root: hugepool-demo loads libhugepool.so.0" ||
    fail "clean root: hugepool-demo: $out"
  [[ $(in_root stat -c '%a %U %G' /usr/bin/hugepool-reserve) == "2711 root hugepool" ]] &&
    pass "clean root: helper setgid hugepool, 2711" || fail "clean root: helper mode"
  # A user admitted to hugepool-users finds the helper on Debian's login PATH
  # (ENV_PATH of /etc/login.defs: no sbin), as every shortage line tells them.
  local login_path
  login_path=$(sed -n 's/^ENV_PATH[[:space:]]*PATH=//p' "$root/etc/login.defs")
  if in_root useradd -M -N -G hugepool-users hpuser >>"$work/root-apt.log" 2>&1; then
    out=$(chroot --userspec=hpuser:hugepool-users "$root" /usr/bin/env -i PATH="${login_path:-/usr/local/bin:/usr/bin:/bin}" \
      sh -c 'command -v hugepool-reserve && hugepool-reserve --help' 2>&1)
    [[ $(head -n 1 <<<"$out") == /usr/bin/hugepool-reserve ]] && grep -q 'usage' <<<"$out" &&
      pass "clean root: a hugepool-users member runs hugepool-reserve from the login PATH ($login_path)" ||
      fail "clean root: hugepool-reserve on the login PATH ($login_path): $out"
    in_root userdel hpuser >>"$work/root-apt.log" 2>&1 || true
  else
    fail "clean root: useradd: $(tail -n 3 "$work/root-apt.log")"
  fi
  grep -q '^max_pages' "$root/etc/hugepool/reserve.conf" && pass "clean root: the packaged reserve.conf" ||
    fail "clean root: no reserve.conf"
  in_root getent group hugepool-users >/dev/null && grep -qx 'group hugepool-users' "$root/etc/hugepool/reserve.conf" &&
    pass "clean root: the group reserve.conf names, hugepool-users, exists" || fail "clean root: no group hugepool-users"
  if in_root dpkg --purge hugepool-helper hugepool-tools libhugepool-dev libhugepool-mpi0 libhugepool0 >>"$work/root-apt.log" 2>&1; then
    pass "clean root: dpkg --purge"
  else fail "clean root: purge: $(tail -n 10 "$work/root-apt.log")"; fi
  local left=()
  for f in /etc/hugepool /var/lib/hugepool /var/lib/hugepool-helper /run/hugepool /usr/lib/tmpfiles.d/hugepool.conf \
    /usr/bin/hugepool-reserve /usr/bin/hugepool; do
    [[ -e $root$f ]] && left+=("$f")
  done
  in_root getent group hugepool >/dev/null && left+=("group hugepool")
  in_root getent group hugepool-users >/dev/null && left+=("group hugepool-users")
  ((${#left[@]} == 0)) && pass "clean root: the purge removed everything the packages made" || fail "clean root: left ${left[*]}"
}
clean_root
elapsed

# ---- 4. this machine, with what an earlier install.sh left ----
# Everything below changes /usr, /etc, /var and the pool's sysfs modes: hold
# the machine-wide pool lock (tests that touch the pool or its modes take it).
# (tests/pool/pool-lock.sh: a wait names the holder, and ctest's launcher
# does not count it against this test's own limit).  The harness restores
# the pool when this shell ends.
# shellcheck source=../pool/pool-lock.sh
source "$src/tests/pool/pool-lock.sh"
pool_hold

planted=()
getent group hugepool >/dev/null || { groupadd --system hugepool && planted+=(group); }
for d in /etc/hugepool /var/lib/hugepool /run/hugepool /run/hugepool/jobs; do
  [[ -e $d ]] || { mkdir -p "$d" && planted+=("$d"); }
done
chgrp hugepool /var/lib/hugepool && chmod 0750 /var/lib/hugepool
if [[ ! -e /etc/hugepool/reserve.conf ]]; then
  printf '# site config (left by an earlier install.sh)\nmax_pages 100\nmax_fraction 0.5\nmin_free_mb 2048\ngroup hugepool-users\nrequire_job no\n' \
    >/etc/hugepool/reserve.conf
  planted+=(/etc/hugepool/reserve.conf)
fi
for f in lock grants; do
  [[ -e /var/lib/hugepool/$f ]] || { install -o root -g hugepool -m 0660 /dev/null "/var/lib/hugepool/$f" && planted+=("/var/lib/hugepool/$f"); }
done
site_conf=$(sha256sum /etc/hugepool/reserve.conf)
unplant() {
  local i
  for ((i = ${#planted[@]} - 1; i >= 0; i--)); do
    case ${planted[i]} in
      group) groupdel hugepool 2>/dev/null || true ;;
      *) rm -rf "${planted[i]}" ;;
    esac
  done
}

sysfs=(/sys/kernel/mm/hugepages/hugepages-*/nr_hugepages /sys/devices/system/node/node*/hugepages/hugepages-*/nr_hugepages)
snapshot() {
  getent group hugepool | cut -d: -f1,3 || true
  getent group hugepool-users | cut -d: -f1,3,4 || true
  stat -c '%n %a %U %G' "${sysfs[@]}"
  ls -lA /etc/hugepool /var/lib/hugepool /run/hugepool /etc/tmpfiles.d/hugepool.conf 2>&1 | sed 's/ [A-Z][a-z][a-z] .*:[0-9][0-9] / /'
  sha256sum /etc/hugepool/reserve.conf /var/lib/hugepool/grants 2>&1
  dpkg-statoverride --list | grep hugepool || true
  cat /proc/sys/vm/nr_hugepages
}
before=$(snapshot)
purge() { dpkg --purge "${pkgs[@]}" >>"$work/dpkg.log" 2>&1; }
trap 'purge || true; unplant; pool_release' EXIT

dpkg_retry() { # dpkg refuses while another dpkg/apt holds its lock
  local i
  for i in $(seq 1 30); do
    if dpkg "$@" </dev/null >>"$work/dpkg.log" 2>&1; then return 0; fi
    grep -q 'lock' "$work/dpkg.log" || return 1
    sleep 2
  done
  return 1
}
if dpkg_retry -i "${debs[@]}"; then pass "dpkg -i of all packages (no question about the existing config)"; else
  fail "dpkg -i: $(tail -n 20 "$work/dpkg.log")"
  exit 1
fi
mapfile -t files < <(dpkg -L "${pkgs[@]}" 2>/dev/null | while read -r f; do [[ -f $f || -L $f ]] && echo "$f"; done)

# What postinst did (setuid-helper/README.md's table).
[[ $(stat -c '%a %U %G' /usr/bin/hugepool-reserve) == "2711 root hugepool" ]] &&
  pass "helper installed root:hugepool 2711" || fail "helper mode: $(stat -c '%a %U %G' /usr/bin/hugepool-reserve)"
[[ $(stat -c '%a %U %G' /var/lib/hugepool /var/lib/hugepool/lock /var/lib/hugepool/grants | tr '\n' ' ') == \
  "750 root hugepool 660 root hugepool 660 root hugepool " ]] && pass "state directory and files" ||
  fail "state: $(stat -c '%n %a %U %G' /var/lib/hugepool /var/lib/hugepool/lock /var/lib/hugepool/grants)"
[[ $(sha256sum /etc/hugepool/reserve.conf) == "$site_conf" ]] && pass "the site's reserve.conf kept over the conffile" ||
  fail "the site's config was replaced: $(head -n 2 /etc/hugepool/reserve.conf)"
[[ $(stat -c '%a %U %G' /etc/hugepool/reserve.conf) == "644 root root" ]] && pass "config mode" || fail "config mode"
[[ $(stat -c '%a %G' /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages) == "664 hugepool" ]] &&
  pass "pool sysfs file group-writable" || fail "sysfs mode: $(stat -c '%a %G' /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages)"

# The installed files, as a user runs them (the environment cannot point
# them at the build tree).
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
unset HUGEPOOL_PRELOAD_LIB LD_LIBRARY_PATH
json=$(/usr/bin/hugepool doctor --json) || true
python3 - "$json" <<'PY' && pass "hugepool doctor: the packaged helper is installed right" || fail "doctor: $json"
import json, sys
r = json.loads(sys.argv[1])
h = [x for x in r["helper"] if "installed" in x]
assert h and h[0]["installed"] == "/usr/bin/hugepool-reserve", h
# Problems about the helper, its config, state or tmpfiles (not the pool's
# own size: "0 free unreserved pages" is about the pool, not the helper).
helper_words = ("hugepool-reserve", "reserve.conf", "/etc/hugepool", "/var/lib/hugepool", "tmpfiles")
bad = [p for p in r["problems"] if any(w in p["what"] for w in helper_words) and p["severity"] != "note"]
assert not bad, bad
assert not [p for p in r["problems"] if "/usr/bin/hugepool-reserve" in p["what"]], r["problems"]
assert any(x.get("may_use") == "yes (root)" for x in r["helper"]), r["helper"]
PY
out=$(/usr/bin/hugepool doctor 2>&1) || true
grep -q '^verdict: ' <<<"$out" && pass "hugepool doctor prints its verdict" || fail "no verdict line: $out"
if out=$(/usr/bin/hugepool-reserve --status 2>&1) && grep -q '2048' <<<"$out"; then
  pass "hugepool-reserve --status"
else fail "hugepool-reserve --status: $out"; fi
getent group hugepool-users >/dev/null && pass "the group hugepool-users exists" || fail "no group hugepool-users"
# A user the admin admitted (adduser USER hugepool-users, as the package
# description says) reserves pages through the installed helper: the pool
# grows in /proc/meminfo, and --release gives them back.
hp_total() { awk '/^HugePages_Total:/ {print $2}' /proc/meminfo; }
site_group=$(awk '$1 == "group" {print $2}' /etc/hugepool/reserve.conf)
user=hp-pkg-test-$$
if useradd --system --no-create-home --shell /usr/sbin/nologin "$user" 2>"$work/useradd.log" &&
  adduser --quiet "$user" "$site_group" >>"$work/useradd.log" 2>&1; then
  before_total=$(hp_total)
  cp /var/lib/hugepool/grants "$work/grants.before"
  as_user() { setpriv --reuid="$user" --regid="$user" --init-groups /usr/bin/hugepool-reserve "$@"; }
  out=$(as_user 2 2>&1) && rc=0 || rc=$?
  granted=$(($(hp_total) - before_total))
  out2=$(as_user --release 2>&1) || true
  [[ $rc == 0 && $granted == 2 && $(hp_total) == "$before_total" ]] &&
    pass "a user in $site_group reserves 2 pages through the installed helper (pool +$granted) and releases them" ||
    fail "user in $site_group: rc $rc, pool +$granted: $out / release: $out2"
  userdel "$user" 2>/dev/null
  # The pool is back (above).  The helper leaves the table it rewrote (an
  # empty file becomes its empty table, a header and a checksum): the bytes
  # the site had are put back, so that the purge check below compares the
  # site's own state.
  cmp -s /var/lib/hugepool/grants "$work/grants.before" ||
    echo "     grant table after the release: $(cat /var/lib/hugepool/grants)"
  cat "$work/grants.before" >/var/lib/hugepool/grants
else
  fail "cannot add a test user to $site_group: $(cat "$work/useradd.log")"
fi
out=$(setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/hugepool-reserve 1 2>&1) && rc=0 || rc=$?
[[ $rc == 1 ]] && grep -q "hugepool-users" <<<"$out" && pass "a user outside hugepool-users is refused" ||
  fail "nobody: rc $rc: $out"
if out=$(/usr/bin/hugepool-run -- /bin/true 2>&1); then pass "installed hugepool-run finds its interposer"; else
  fail "hugepool-run: $out"; fi
# man follows a function's page name (a link) to hugepool.3.
for page in hugepool-run.1 hugepool.1 hugepool-stats.1 hugepool-demo.1 hugepool-reserve.1 hugepool.3 \
  hugepool_alloc.3=hugepool.3 hugepool_segment_unmap.3=hugepool.3; do
  file=${page#*=}
  page=${page%=*}
  name=${page%.*}
  sec=${page##*.}
  grep -q "/usr/share/man/man$sec/$file" <<<"$(man -w "$sec" "$name" 2>/dev/null)" && pass "man $sec $name" ||
    fail "man $sec $name not found"
done
cat >"$work/app.c" <<'C'
#include <hugepool/hugepool.h>
#include <stdio.h>
int main(void) {
  printf("policy %s\n", hugepool_policy_name(hugepool_get_policy()));
  return 0;
}
C
if cc "$work/app.c" $(pkg-config --cflags --libs hugepool) -o "$work/app" 2>"$work/cc.log" && "$work/app" | grep -q policy; then
  pass "a program builds and runs against the installed library (pkg-config)"
else fail "pkg-config build: $(cat "$work/cc.log")"; fi
# The Python package and the Fortran module, as installed.
if [[ -f /usr/lib/python3/dist-packages/hugepool/__init__.py ]]; then
  out=$(cd / && env -u PYTHONPATH /usr/bin/python3 -c \
    'import hugepool; print(hugepool.get_page_size(), hugepool.__file__)' 2>&1) &&
    [[ $out == "2097152 /usr/lib/python3/dist-packages/hugepool/__init__.py" ]] &&
    pass "python3-hugepool: import hugepool from the installed package" || fail "python3 -c 'import hugepool': $out"
fi
if [[ -f /usr/lib/x86_64-linux-gnu/pkgconfig/hugepool-fortran.pc ]]; then
  cat >"$work/app.f90" <<'F'
program app
  use hugepool
  implicit none
  print '(a,i0)', 'page ', hugepool_get_page_size()
end program
F
  # shellcheck disable=SC2046
  if gfortran "$work/app.f90" $(pkg-config --cflags --libs hugepool-fortran) -o "$work/fapp" 2>"$work/fc.log" &&
    [[ $("$work/fapp" 2>>"$work/fc.log") == "page 2097152" ]]; then
    pass "a Fortran program builds and runs with the installed module (pkg-config hugepool-fortran)"
  else fail "Fortran: $(cat "$work/fc.log")"; fi
fi
if [[ -f /usr/include/hugepool/mpi.h ]]; then
  cat >"$work/mpiapp.c" <<'C'
#include <hugepool/mpi.h>
#include <stdio.h>
int main(void) { printf("%p\n", (void *)hugepool_mpi_segments_free); return 0; }
C
  if cc "$work/mpiapp.c" $(pkg-config --cflags --libs hugepool-mpi) -o "$work/mpiapp" 2>"$work/cc.log" && "$work/mpiapp" >/dev/null; then
    pass "a program builds and runs against the installed MPI layer (pkg-config hugepool-mpi)"
  else fail "pkg-config hugepool-mpi build: $(cat "$work/cc.log")"; fi
fi

# Purge: nothing of the packages left, and what was there before is.
if purge; then pass "dpkg --purge"; else fail "dpkg --purge: $(tail -n 20 "$work/dpkg.log")"; fi
left=()
for f in "${files[@]}"; do
  [[ $f == /etc/hugepool/reserve.conf ]] && continue # the site's, restored
  [[ -e $f || -L $f ]] && left+=("$f")
done
((${#left[@]} == 0)) && pass "no packaged file left" || fail "left: ${left[*]}"
[[ ! -e /var/lib/hugepool-helper ]] && pass "the package's own record is gone" || fail "/var/lib/hugepool-helper left"
after=$(snapshot)
[[ $before == "$after" ]] && pass "the site's config, state, job registry, group, sysfs modes as before the install" ||
  fail "after purge differs: $(diff <(echo "$before") <(echo "$after"))"
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'installed\|config-files' && fail "$p still known to dpkg"
done
trap - EXIT
unplant
elapsed
echo "$fails failure(s)"
((fails == 0))
