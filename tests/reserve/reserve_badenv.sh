#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Bad environments, on the fake tree with the installed setgid helper as
# nobody: each gets a clear refusal or a repair, never a wrong grant, and
# the pool always agrees with the table.
#  - the state directory full (a 16 kB tmpfs): a grant that needs a new
#    page for the table is refused with the reason; grants and releases
#    whose table fits the page it has work;
#  - the state directory read-only: refused with the reason;
#  - the table cut short at every length: refused as corrupt, the pool
#    unchanged (tests/reserve/test_reserve_parse.cpp also changes every bit);
#  - a pool file gone (the pool resized or removed meanwhile): refused or
#    kept with the reason; a pool root shrank below the grants: the release
#    keeps them and says why;
#  - a process gone between the listing of /proc and the read of its
#    status: skipped (it ended), the release goes on;
#  - a release the kernel gives fewer pages than planned says why;
#  - no decision reads the wall clock, so a clock jump changes nothing: the
#    source is checked, and the wall clock is set back a day and forward
#    again while a grant waits for the lock and around a grant and a release.
# Prints the figures setuid-helper/README.md records.
source "$(dirname "$0")/lib.sh"
fake_setup
write_conf <<CONF
max_pages 10
max_fraction 1
min_free_mb 0
group nogroup
CONF
table=$FAKE/var/lib/hugepool/grants
state=$FAKE/var/lib/hugepool
bad=0

# --- the state directory full ---
cp -a "$state" "$INST/state.saved"
mount -t tmpfs -o size=16k tmpfs "$state"
on_exit "umount '$state' 2>/dev/null"
chown --reference="$INST/state.saved" "$state"
chmod --reference="$INST/state.saved" "$state"
cp -a "$INST/state.saved/." "$state/"
set_pool 0 0
dd if=/dev/zero of="$state/filler" bs=4k 2>/dev/null || true
as_nobody 4
bad=$((bad + 1))
expect_rc 1 "a grant with the state directory full (the empty table has no page yet)"
expect_err "No space left on device" "the message gives the real reason"
expect_eq "$(nr)" 0 "pool unchanged on a full disk"
rm -f "$state/filler"
as_nobody 4
expect_eq "$RC/$(nr)" "0/4" "a grant once there is room"
dd if=/dev/zero of="$state/filler" bs=4k 2>/dev/null || true
as_user 4242 3
expect_eq "$RC/$(nr)" "0/7" "full again: another grant still fits the table's page"
as_nobody --release
as_user 4242 --release
expect_eq "$RC/$(nr)" "0/0" "releases on a full state directory work"
grep -q '^65534 \|^4242 \|^intent\|^release' "$table" && fail "the table still charges the releases: $(cat "$table")"
pass "table and pool agree after the releases on a full disk"
rm -f "$state/filler"

# --- the state directory read-only ---
as_nobody 4
mount -o remount,ro "$state"
as_nobody 6
bad=$((bad + 1))
expect_rc 1 "a grant with the state directory read-only"
expect_err "Read-only file system" "the message gives the reason"
as_nobody --release
bad=$((bad + 1))
expect_rc 1 "a release with the state directory read-only"
expect_eq "$(nr)" 4 "pool unchanged while read-only"
mount -o remount,rw "$state"
as_nobody --release
expect_eq "$RC/$(nr)" "0/0" "writable again: the release works"
umount "$state"

# --- the table cut short at every length ---
set_pool 0 0
as_nobody 4
as_user 4242 2
cp "$table" "$INST/table.good"
len=$(stat -c %s "$table")
for ((cut = 1; cut < len; cut++)); do
  head -c "$cut" "$INST/table.good" >"$table"
  as_user 4343 1
  bad=$((bad + 1))
  [[ $RC == 1 && $ERR == *corrupt* && $(nr) == 6 ]] ||
    fail "table cut at $cut of $len bytes: exit $RC, pool $(nr): $ERR"
done
pass "the table cut at each of $((len - 1)) lengths: refused as corrupt, the pool unchanged"
cp "$INST/table.good" "$table"
as_nobody --release
as_user 4242 --release
expect_eq "$RC/$(nr)" "0/0" "the whole table back: both users release"

# --- a pool file gone ---
as_nobody 4
free=$(fake_pool free_hugepages)
mv "$free" "$free.gone"
as_nobody 6
bad=$((bad + 1))
expect_rc 1 "a grant with the pool's free_hugepages gone"
expect_eq "$(nr)" 4 "pool unchanged"
as_nobody --release
bad=$((bad + 1))
expect_rc 1 "a release with the pool's free_hugepages gone"
expect_err "kept 4" "the release keeps everything and says so"
mv "$free.gone" "$free"
as_nobody --release
expect_eq "$RC/$(nr)" "0/0" "the file back: the release works"

# --- the pool shrunk by root below the grants (outside the helper) ---
as_nobody 4
echo 2 >"$(fake_pool nr_hugepages)"
echo 2 >"$(fake_pool free_hugepages)"
as_nobody --release
bad=$((bad + 1))
expect_rc 1 "a release with the pool below the grant"
expect_err "kept 4 pages of 2048 kB on node any: pages are in use or reserved, or promised to other users. grants (only 2 spare)" "it says why"
as_nobody --status
expect_rc 0 "the table is still whole (no intent it could not record)"
echo 4 >"$(fake_pool nr_hugepages)"
echo 4 >"$(fake_pool free_hugepages)"
as_nobody --release
expect_eq "$RC/$(nr)" "0/0" "the pool back: the release works"

# --- a process gone between the listing and the read ---
as_nobody 4
mkdir -p "$FAKE/proc/777" # listed, but its status is gone (it ended)
as_user 4242 2
as_nobody --release
bad=$((bad + 1))
expect_eq "$RC/$(nr)" "0/2" "a process ended mid-read is skipped: the release goes on"
rmdir "$FAKE/proc/777"
as_user 4242 --release

# --- the kernel gives up fewer pages than planned ---
as_nobody 4
chmod 0444 "$(fake_pool nr_hugepages)"
as_nobody --release
bad=$((bad + 1))
chmod 0664 "$(fake_pool nr_hugepages)"
echo 4 >"$(fake_pool free_hugepages)" # (fake.c moved it before the failed write; a kernel would not)
expect_rc 1 "a release whose pool write fails"
expect_err "kept 4 of those 4 pages (still yours): " "it says why, and that they stay the caller's"
grep -q '^65534 any 2048 4$' "$table" || fail "the pages that did not go are not charged: $(cat "$table")"
pass "the 4 pages that did not go stay charged"
as_nobody --release
expect_eq "$RC/$(nr)" "0/0" "the next release gives them back"

# --- no wall clock ---
if grep -nE 'CLOCK_REALTIME|gettimeofday|[^_a-z]time\(|clock\(\)' "$RESERVE_SRC"/*.c; then
  fail "the helper reads the wall clock: a clock jump could change a decision"
fi
pass "no decision reads the wall clock (lock waits count sleeps, the scan budget is CLOCK_MONOTONIC)"

# --- a clock jump, at run time ---
# The wall clock set back a day and forward again to the true time while a
# grant waits for the lock (2 s in the test build) and while grants and
# releases run: the wait still ends after its bound, measured on
# CLOCK_MONOTONIC, and every grant and release is what it would have been.
# Only ever set back, then forward to the true time (monotonic + the offset
# saved first), so no file anywhere gets a time in the future; restored on
# any exit.
clock_offset=$(python3 -c 'import time; print(repr(time.clock_gettime(time.CLOCK_REALTIME) - time.monotonic()))')
clock_set() { # seconds relative to the true time (0: the true time)
  python3 -c 'import sys, time; time.clock_settime(time.CLOCK_REALTIME, time.monotonic() + float(sys.argv[1]) + float(sys.argv[2]))' \
    "$clock_offset" "$1"
}
mono() { python3 -c 'import time; print("%.3f" % time.monotonic())'; }
on_exit "clock_set 0"
set_pool 0 0
flock -o "$state/lock" sleep 30 9>&- >/dev/null 2>&1 &
holder=$!
for _ in $(seq 50); do grep -q "FLOCK .* $holder " /proc/locks && break; sleep 0.1; done
t0=$(mono)
(as_nobody 2; echo "$RC" >"$INST/jump.rc"; printf '%s' "$ERR" >"$INST/jump.err") &
waiter=$!
sleep 0.5
clock_set -86400
sleep 0.5
clock_set 0
wait "$waiter"
t1=$(mono)
pkill -P "$holder" 2>/dev/null || true
wait "$holder" 2>/dev/null || true
waited=$(python3 -c "print('%.1f' % ($t1 - $t0))")
[[ $(cat "$INST/jump.rc") == 1 ]] && grep -q "held the lock" "$INST/jump.err" ||
  fail "a grant waiting across a clock jump: exit $(cat "$INST/jump.rc"): $(cat "$INST/jump.err")"
python3 -c "import sys; sys.exit(0 if 1.9 <= $t1 - $t0 <= 6 else 1)" ||
  fail "a grant waiting across a clock jump waited ${waited} s, its bound is 2 s"
pass "the wall clock set back a day and forward while a grant waits: it gives up after ${waited} s (bound 2 s), with the reason"
bad=$((bad + 1))
set_pool 0 0
clock_set -86400
as_nobody 3
expect_eq "$RC/$(nr)" "0/3" "a grant with the wall clock a day back"
clock_set 0
as_nobody --release
expect_eq "$RC/$(nr)/$(grep -c '^65534 ' "$table" || true)" "0/0/0" "its release after the clock came forward a day"
echo "figures: bad_inputs=$bad wrong_grants=0 pages_lost=$(nr)"
