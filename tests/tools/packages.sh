#!/usr/bin/env bash
# The Debian packages, as an administrator meets them: build them with cpack
# (prefix /usr), install them with dpkg -i on this machine, run the demo,
# `hugepool doctor`, `hugepool-reserve --status` and a program built against
# the installed library from the installed files, then purge them and check
# that nothing they made is left (files, the setgid override, the state,
# config and boot rule, the pool files' group access, the group).
#   packages.sh SOURCE_DIR WORK_DIR
set -euo pipefail
src=$1
work=$2
pkgs=(libhugepool0 libhugepool-dev hugepool-tools hugepool-helper hugepool-slurm)
fails=0
pass() { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

[[ $(id -u) -eq 0 ]] || { echo "skip: needs root (dpkg -i)"; exit 77; }
for p in "${pkgs[@]}"; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q installed; then
    echo "skip: $p is already installed on this machine; not touching it"
    exit 77
  fi
done

# Build outside the pool lock.
rm -rf "$work"
mkdir -p "$work"
cmake -S "$src" -B "$work/build" -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DHUGEPOOL_BUILD_TESTS=OFF -DHUGEPOOL_BUILD_BENCH=OFF >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" -j2 >"$work/build.log" 2>&1 || { tail -n 40 "$work/build.log"; exit 1; }
(cd "$work/build" && cpack -G DEB >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; exit 1; }
mapfile -t debs < <(ls "$work"/build/*.deb)
names=$(for d in "${debs[@]}"; do dpkg-deb -f "$d" Package; done | sort | tr '\n' ' ')
want=$(printf '%s\n' "${pkgs[@]}" | sort | tr '\n' ' ')
if [[ ! -f /usr/include/slurm/spank.h ]]; then want=${want/hugepool-slurm /}; fi
[[ $names == "$want" ]] && pass "cpack built: $names" || fail "cpack built '$names', expected '$want'"
for d in "${debs[@]}"; do
  dpkg-deb -c "$d" >"$work/contents"
  if grep -q 'hugepool-reserve$' "$work/contents"; then
    grep -q -- '-rwxr-xr-x root/root .*/usr/sbin/hugepool-reserve$' "$work/contents" &&
      pass "the helper package ships the binary plain (postinst makes it setgid)" ||
      fail "helper binary mode in the package: $(grep hugepool-reserve "$work/contents")"
  fi
done

# Everything below changes /usr, /etc, /var and the pool's sysfs modes: hold
# the machine-wide pool lock (tests that touch the pool or its modes take it).
exec 9>>/tmp/hugepool-pool.lock
flock -w 600 9 || { echo "pool lock busy for 600 s"; exit 1; }

sysfs=(/sys/kernel/mm/hugepages/hugepages-*/nr_hugepages /sys/devices/system/node/node*/hugepages/hugepages-*/nr_hugepages)
snapshot() {
  getent group hugepool | cut -d: -f1,3 || true
  stat -c '%n %a %U %G' "${sysfs[@]}"
  ls -la /etc/hugepool /var/lib/hugepool /run/hugepool /etc/tmpfiles.d/hugepool.conf 2>&1 | sed 's/ [A-Z][a-z][a-z] .*:[0-9][0-9] / /'
  dpkg-statoverride --list | grep hugepool || true
  cat /proc/sys/vm/nr_hugepages
}
before=$(snapshot)
purge() { dpkg --purge "${pkgs[@]}" >>"$work/dpkg.log" 2>&1; }
trap 'purge || true' EXIT

dpkg_retry() { # dpkg refuses while another dpkg/apt holds its lock
  local i
  for i in $(seq 1 30); do
    if dpkg "$@" >>"$work/dpkg.log" 2>&1; then return 0; fi
    grep -q 'lock' "$work/dpkg.log" || return 1
    sleep 2
  done
  return 1
}
if dpkg_retry -i "${debs[@]}"; then pass "dpkg -i of all packages"; else
  fail "dpkg -i: $(tail -n 20 "$work/dpkg.log")"
  exit 1
fi
mapfile -t files < <(dpkg -L "${pkgs[@]}" 2>/dev/null | while read -r f; do [[ -f $f || -L $f ]] && echo "$f"; done)

# What postinst did (setuid-helper/README.md's table).
[[ $(stat -c '%a %U %G' /usr/sbin/hugepool-reserve) == "2711 root hugepool" ]] &&
  pass "helper installed root:hugepool 2711" || fail "helper mode: $(stat -c '%a %U %G' /usr/sbin/hugepool-reserve)"
[[ $(stat -c '%a %U %G' /var/lib/hugepool /var/lib/hugepool/lock /var/lib/hugepool/grants | tr '\n' ' ') == \
  "750 root hugepool 660 root hugepool 660 root hugepool " ]] && pass "state directory and files" ||
  fail "state: $(stat -c '%n %a %U %G' /var/lib/hugepool /var/lib/hugepool/lock /var/lib/hugepool/grants)"
[[ $(stat -c '%a %U %G' /etc/hugepool/reserve.conf) == "644 root root" ]] && pass "default config" || fail "config mode"
grep -q 'hugepool' /etc/tmpfiles.d/hugepool.conf && pass "tmpfiles.d rule" || fail "no tmpfiles.d rule"
[[ $(stat -c '%a %G' /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages) == "664 hugepool" ]] &&
  pass "pool sysfs file group-writable" || fail "sysfs mode: $(stat -c '%a %G' /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages)"

# The installed files, as a user runs them (the environment cannot point
# them at the build tree).
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
unset HUGEPOOL_PRELOAD_LIB LD_LIBRARY_PATH
if out=$(/usr/bin/hugepool-demo 2>&1); then pass "hugepool-demo runs"; else fail "hugepool-demo: $out"; fi
json=$(/usr/bin/hugepool doctor --json) || true
python3 - "$json" <<'PY' && pass "hugepool doctor: the packaged helper is installed right" || fail "doctor: $json"
import json, sys
r = json.loads(sys.argv[1])
h = [x for x in r["helper"] if "installed" in x]
assert h and h[0]["installed"] == "/usr/sbin/hugepool-reserve", h
# The installation's problems; the pool's own state (empty on a fresh
# machine: "0 free unreserved pages") is not the packages' to fix.
pool = ("the 2 MB pool ", "the 1 GB pool ")
bad = [p for p in r["problems"] if p["severity"] != "note" and not p["what"].startswith(pool)
       and ("reserve" in p["what"] or "hugepool/" in p["what"] or "tmpfiles" in p["what"] or "group" in p["what"])]
assert not bad, bad
assert any(x.get("may_use") == "yes (root)" for x in r["helper"]), r["helper"]
PY
# Its exit status is the verdict's (non-zero with an empty pool): only the line is checked here.
out=$(/usr/bin/hugepool doctor 2>&1) || true
grep -q '^verdict: ' <<<"$out" && pass "hugepool doctor prints its verdict" || fail "no verdict line: $out"
if out=$(/usr/sbin/hugepool-reserve --status 2>&1) && grep -q '2048' <<<"$out"; then
  pass "hugepool-reserve --status"
else fail "hugepool-reserve --status: $out"; fi
out=$(setpriv --reuid=65534 --regid=65534 --clear-groups /usr/sbin/hugepool-reserve 1 2>&1) && rc=0 || rc=$?
[[ $rc == 1 ]] && grep -q "hugepool-users" <<<"$out" && pass "a user outside hugepool-users is refused" ||
  fail "nobody: rc $rc: $out"
if out=$(/usr/bin/hugepool-run -- /bin/true 2>&1); then pass "installed hugepool-run finds its interposer"; else
  fail "hugepool-run: $out"; fi
for page in hugepool-run.1 hugepool.1 hugepool-stats.1 hugepool-reserve.8 hugepool.3; do
  name=${page%.*}
  sec=${page##*.}
  man -w "$sec" "$name" 2>/dev/null | grep -q "/usr/share/man/man$sec/$page" && pass "man $sec $name" ||
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

# Purge: nothing left.
if purge; then pass "dpkg --purge"; else fail "dpkg --purge: $(tail -n 20 "$work/dpkg.log")"; fi
trap - EXIT
left=()
for f in "${files[@]}"; do [[ -e $f || -L $f ]] && left+=("$f"); done
((${#left[@]} == 0)) && pass "no packaged file left" || fail "left: ${left[*]}"
after=$(snapshot)
[[ $before == "$after" ]] && pass "state, config, boot rule, sysfs modes, overrides and group as before" ||
  fail "after purge differs: $(diff <(echo "$before") <(echo "$after"))"
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'installed\|config-files' && fail "$p still known to dpkg"
done
echo "$fails failure(s)"
((fails == 0))
