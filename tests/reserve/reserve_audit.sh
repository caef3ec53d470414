#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Every request is logged to syslog with facility authpriv: caller, request,
# what was granted, outcome.  No logger runs in CI, so the test binds /dev/log
# itself for its duration (the helper uses the real syslog(3) path).
source "$(dirname "$0")/lib.sh"
exec 8>/tmp/hugepool-devlog.lock
flock 8
devlog_drop_stale
if [[ -e /dev/log ]]; then
  echo "SKIP: /dev/log belongs to a running system logger; the audit lines go there" >&2
  exit 77
fi
fake_setup
log=$INST/audit.log
: >"$log"
coproc LISTEN { exec python3 "$(dirname "$0")/devlog_listen.py" /dev/log "$log"; }
listen_pid=$LISTEN_PID
on_exit "kill $listen_pid; wait $listen_pid; rm -f /dev/log"
read -r -t 10 ready <&"${LISTEN[0]}" && [[ $ready == ready ]] || fail "log listener did not start"

set_pool 0 0
as_nobody 12
expect_rc 0 "grant"
as_nobody 5000
expect_rc 1 "grant over max_pages"
echo 20 >"$(fake_pool capacity)"
as_nobody 30
expect_rc 1 "shortfall"
rm -f "$(fake_pool capacity)"
as_user 4242 3 --node 1
as_nobody --release
expect_rc 0 "release"
chmod 0666 "$FAKE/etc/hugepool/reserve.conf"
as_nobody 1
expect_rc 1 "bad config"
as_nobody 01
expect_rc 2 "usage error"
chmod 0644 "$FAKE/etc/hugepool/reserve.conf"
set +e
prlimit --fsize=100:100 setpriv --reuid=65534 --regid=65534 --clear-groups "$HELPER" 40 >/dev/null 2>&1
RC=$?
set -e
expect_rc 1 "grant under a hard RLIMIT_FSIZE of 100 bytes"
# A grant's intent left behind (its helper killed before the pool grew):
# the next locked call gives it back and says so.
printf '# hugepool-reserve grants: uid node size_kB pages\n4242 1 2048 3\nintent 4242 any 2048 %s 2 2\n' "$(nr)" |
  seal >"$FAKE/var/lib/hugepool/grants"
as_nobody --release
expect_rc 0 "a release that settles an intent first"
sleep 0.3 # datagrams are in the socket buffer; let the listener drain it

expect_line() {
  grep -E "$1" "$log" >/dev/null || fail "audit line missing: $1
--- log ---
$(cat "$log")"
  pass "audit: $2"
}
pre='^<85>.* hugepool-reserve\[[0-9]+\]: uid=65534 user=nobody source=helper job=0 '
expect_line "${pre}action=grant size=2048kB node=any request=12 before=0 after=12 granted=12 outcome=ok$" "grant"
expect_line "${pre}action=grant size=2048kB node=any request=5000 granted=0 outcome=refused reason=\"limit max_pages.*\"$" \
  "refusal with reason"
expect_line "${pre}action=grant size=2048kB node=any request=30 before=12 after=12 granted=0 outcome=shortfall restored=yes$" \
  "shortfall and restore"
expect_line "^<85>.* uid=4242 user=\? source=helper job=0 action=grant size=2048kB node=1 request=3 before=0 after=3 granted=3 outcome=ok$" \
  "another user on node 1"
expect_line "${pre}action=release size=2048kB node=any request=12 before=15 after=3 released=12 outcome=ok$" "release"
expect_line "${pre}action=grant size=2048kB node=any request=1 granted=0 outcome=refused reason=\"config .* must be a regular file owned by root and not writable by group or others\"$" "bad config"
expect_line "${pre}action=usage outcome=refused reason=\"PAGES must be .*\"$" "usage error, without the caller's text"
expect_line "${pre}action=grant size=2048kB node=any request=40 granted=0 outcome=error reason=\"your file size limit \(RLIMIT_FSIZE.*\"$" \
  "RLIMIT_FSIZE refusal"
expect_line "${pre}action=reconcile for_uid=4242 size=2048kB node=any before=3 delta=2 after=3 charged=0 outcome=undone$" \
  "an intent settled"
expect_eq "$(grep -c 'hugepool-reserve' "$log")" 10 "one line per request (and one per intent settled)"
