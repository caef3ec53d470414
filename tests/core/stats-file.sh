#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The statistics file in a directory another user can write: what that user
# plants at the name HUGEPOOL_STATS_FILE expands to is never opened as it is.
# A FIFO does not hang the writer, a regular file of theirs is neither
# truncated nor written, a symlink is not followed; the writer's own file from
# an earlier run is replaced whole (a hard link to it keeps the old text).
#   stats-file.sh PROBE   (PROBE: hugepool-probe)
# Needs root: the writer is root, the planting user nobody.
set -u
probe=$1
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root"; exit 77; }
fails=0
ok() { echo "PASS $1"; }
ko() { echo "FAIL $1"; fails=$((fails + 1)); }
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)

# Each run maps one 2 MB buffer (THP if the pool is empty): under the pool lock.
# (tests/pool/pool-lock.sh: a wait names the holder, and ctest's launcher
# does not count it against this test's limit).
source "$(dirname "$0")/../pool/pool-lock.sh"
pool_hold
top=$(mktemp -d /var/tmp/hugepool-stats-XXXXXX) || exit 1
trap 'rm -rf "$top"; pool_release' EXIT
chmod 0755 "$top"
shared=$top/shared # writable by everyone, not sticky: the kernel's fs.protected_* do not apply
mkdir -m 0777 "$shared"

# The writer: root, rank 7 of a job, statistics to $shared/hp.%r (a process
# that allocated nothing writes no file).
write_stats() { # sets OUT, RC
  OUT=$(timeout 20 env HUGEPOOL_POLICY=thp HUGEPOOL_STATS=1 HUGEPOOL_STATS_FILE="$shared/hp.%r" PMI_RANK=7 \
    "$probe" 2097152 1 2>&1 </dev/null 9>&-)
  RC=$?
}
name=$shared/hp.7
warned() { # one warning line naming the file, and the statistics on stderr instead
  [ "$(grep -c "cannot write statistics to $name: it exists and is not a regular file of this user" <<<"$OUT")" -eq 1 ] &&
    grep -q "hugepool statistics" <<<"$OUT"
}
leftovers() { ls -A "$shared" | grep -v '^hp\.7$' | grep -v '^hp\.7\.other$' | grep -v '^target$'; }

# Control: nothing there, a new file of the writer's.
write_stats
[ "$RC" -eq 0 ] && grep -q "hugepool statistics" "$name" && [ "$(stat -c '%U %a' "$name")" = "root 644" ] &&
  ! grep -q "cannot write statistics" <<<"$OUT" && ok "a new statistics file (root, 0644)" || ko "new file: rc $RC: $OUT"

# The writer's own file from an earlier run: replaced whole, never written into.
echo old >"$name"
ln "$name" "$shared/hp.7.other"
write_stats
[ "$RC" -eq 0 ] && grep -q "hugepool statistics" "$name" && ! grep -q '^old$' "$name" &&
  ok "the writer's own earlier file is replaced by the new statistics" || ko "own file: rc $RC: $(cat "$name"): $OUT"
[ "$(cat "$shared/hp.7.other")" = old ] && ok "a hard link to the earlier file keeps its text (a new file took the name)" ||
  ko "the earlier file was written into: $(cat "$shared/hp.7.other")"
[ -z "$(leftovers)" ] && ok "no temporary file left" || ko "left in the directory: $(leftovers)"
rm -f "$name" "$shared/hp.7.other"

# A FIFO planted by another user: no hang in open(), the FIFO left alone.
"${NOBODY[@]}" mkfifo -m 0666 "$name"
write_stats
[ "$RC" -ne 124 ] && ok "a planted FIFO does not hang the writer (exit $RC)" || ko "the writer hung on a planted FIFO"
[ "$RC" -eq 0 ] && [ "$(stat -c '%F %U' "$name")" = "fifo nobody" ] && warned &&
  ok "the FIFO is left as it is, one warning, the statistics on stderr" || ko "FIFO: rc $RC: $(stat -c '%F %U' "$name"): $OUT"
rm -f "$name"

# A regular file planted by another user: not truncated, not written, not replaced.
"${NOBODY[@]}" sh -c "umask 0; echo planted >'$name'"
ino=$(stat -c %i "$name")
write_stats
[ "$(cat "$name")" = planted ] && [ "$(stat -c '%U %i %s' "$name")" = "nobody $ino 8" ] &&
  ok "another user's file is neither truncated, written nor replaced" ||
  ko "another user's file changed: $(stat -c '%U %i %s' "$name"): $(cat "$name")"
[ "$RC" -eq 0 ] && warned && ok "one warning, the statistics on stderr" || ko "planted file: rc $RC: $OUT"
[ -z "$(leftovers)" ] && ok "nothing else written there" || ko "left in the directory: $(leftovers)"
rm -f "$name"

# A symlink planted by another user, to a file of the writer's: not followed.
echo keep >"$shared/target"
"${NOBODY[@]}" ln -s "$shared/target" "$name"
write_stats
[ "$(cat "$shared/target")" = keep ] && [ -L "$name" ] && ok "a planted symlink is not followed, nor replaced" ||
  ko "symlink: target $(cat "$shared/target"), $(stat -c %F "$name")"
[ "$RC" -eq 0 ] && warned && ok "one warning, the statistics on stderr" || ko "symlink: rc $RC: $OUT"
exit $fails
