#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# A setuid/setgid program linked with libhugepool.a ignores every HUGEPOOL_*
# variable (its caller chose them), and the statistics file is never
# written through a symlink.
#   secure-env.sh PROBE   (PROBE: hugepool-probe linked with libhugepool.a)
# Needs root (it makes a setgid copy of PROBE and runs it as nobody).
set -u
probe=$1
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root"; exit 77; }
fails=0
ok() { echo "PASS $1"; }
ko() { echo "FAIL $1"; fails=$((fails + 1)); }
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)

# Each run allocates one 2 MB buffer (a process that allocated nothing
# writes no statistics file): two free pool pages, under the pool lock.
source "$(dirname "$0")/../pool/pool-lock.sh"
top=$(mktemp -d /var/tmp/hugepool-secure-XXXXXX) || exit 1
trap 'rm -rf "$top"; pool_release' EXIT
pool_hold 2
chmod 0755 "$top"
cp "$probe" "$top/probe"
cp "$probe" "$top/probe-setgid"
chown root:daemon "$top/probe-setgid"
chmod 2755 "$top/probe-setgid"
# A directory only the program's group may write, with a file in it.
mkdir "$top/group-only"
chown root:daemon "$top/group-only"
chmod 0770 "$top/group-only"
echo precious >"$top/group-only/victim"
chown root:daemon "$top/group-only/victim"
chmod 0660 "$top/group-only/victim"

# Control: without the setgid bit the variables are honoured.
mkdir "$top/open"
chmod 0777 "$top/open"
"${NOBODY[@]}" env HUGEPOOL_STATS=json HUGEPOOL_STATS_FILE="$top/open/stats.json" "$top/probe" 2097152 1 >/dev/null 2>&1
grep -q '"allocs": 1' "$top/open/stats.json" 2>/dev/null && ok "plain program writes HUGEPOOL_STATS_FILE" ||
  ko "plain program writes HUGEPOOL_STATS_FILE"

# The setgid program, run by nobody, must neither write the group's file
# nor honour any other HUGEPOOL_* variable.
out=$("${NOBODY[@]}" env HUGEPOOL_STATS=1 HUGEPOOL_STATS_FILE="$top/group-only/victim" HUGEPOOL_POLICY=small \
  HUGEPOOL_CACHE_SLOTS=7 "$top/probe-setgid" 2097152 1 2>&1)
[ "$(cat "$top/group-only/victim")" = precious ] && ok "setgid program leaves the group's file alone" ||
  ko "setgid program overwrote the group's file"
grep -q "policy strict page 2097152 slots 64 " <<<"$out" && ok "setgid program uses the defaults" ||
  ko "setgid program uses the defaults: $out"
[ "$(grep -c "HUGEPOOL_\* variable is ignored" <<<"$out")" -eq 1 ] && ok "one warning says so" ||
  ko "one warning says so: $out"
grep -q "hugepool statistics" <<<"$out" && ko "setgid program printed statistics" || ok "no statistics either"

# Never through a symlink, privileged or not.
echo keep >"$top/open/target"
ln -s "$top/open/target" "$top/open/link"
out=$(env HUGEPOOL_STATS=1 HUGEPOOL_STATS_FILE="$top/open/link" "$top/probe" 2097152 1 2>&1)
[ "$(cat "$top/open/target")" = keep ] && ok "a symlinked statistics file is not followed" ||
  ko "a symlinked statistics file was followed"
grep -q "cannot write statistics to $top/open/link" <<<"$out" && grep -q "hugepool statistics" <<<"$out" &&
  ok "the statistics go to stderr instead, with a warning" || ko "statistics on stderr: $out"
exit $fails
