#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Site limits, the config file's checks, grants per user, release, status,
# shrink-below-in-use and a partial grant -- the installed helper as nobody.
source "$(dirname "$0")/lib.sh"
fake_setup
conf=$FAKE/etc/hugepool/reserve.conf

# --- grants are per user, repeated calls do not add up ---
set_pool 10 10
as_nobody 100
expect_rc 0 "grant 100"
expect_eq "$(nr)" 110 "pool grew by 100"
as_nobody 60
expect_rc 0 "a smaller request keeps the grant"
expect_eq "$(nr)" 110 "pool unchanged by a smaller request"
as_nobody 150
expect_eq "$RC/$(nr)" "0/160" "a larger request adds the difference"
as_user 4242 30 --node 1
expect_eq "$RC/$(cat "$(fake_node 1 nr_hugepages)")" "0/30" "second user, NUMA node 1"
as_user 4242 1 --size 1G
expect_eq "$RC/$(cat "$(fake_pool nr_hugepages 1048576)")" "0/1" "second user, 1 GB pages"
as_nobody --status
expect_rc 0 "status"
grep -q 'your grants (uid 65534)' <<<"$OUT" && grep -q '150 pages of 2048 kB on node any' <<<"$OUT" ||
  fail "status lacks nobody's grant: $OUT"
grep -q 'node 1: total 30' <<<"$OUT" || fail "status lacks node 1: $OUT"
# (node 1's 30 pages are pages of the machine-wide pool too)
grep -q '2048 kB pages, all nodes: total 190 free 190 reserved 0 surplus 0' <<<"$OUT" || fail "status totals: $OUT"
! grep -q 'pages of 1048576 kB' <<<"$OUT" || fail "status shows another user's grant: $OUT"
pass "status shows the pool per node and only the caller's grants"
# --status --json: one object with the same figures.
as_nobody --status --json
expect_rc 0 "status --json"
python3 - "$OUT" <<'PY' || fail "status --json: $OUT"
import json, sys
r = json.loads(sys.argv[1])
assert r["uid"] == 65534, r
assert r["grants"] == [{"pages": 150, "page_kb": 2048, "node": -1}], r["grants"]
whole = [p for p in r["pools"] if p["page_kb"] == 2048 and p["node"] == -1][0]
assert (whole["total"], whole["free"], whole["reserved"], whole["surplus"]) == (190, 190, 0, 0), whole
assert [p for p in r["pools"] if p["page_kb"] == 2048 and p["node"] == 1][0]["total"] == 30, r["pools"]
assert "job" in r, r
PY
pass "status --json: the caller's grant, the pool totals and node 1, parsed as JSON"
as_nobody --json 5
expect_rc 2 "--json with a grant is refused"
expect_err "goes with --status only" "--json outside --status: the reason"
as_nobody --release
expect_rc 0 "release"
expect_eq "$(nr)" 40 "release gave back exactly nobody's 150"
expect_eq "$(cat "$(fake_node 1 nr_hugepages)")/$(cat "$(fake_pool nr_hugepages 1048576)")" "30/1" \
  "other user's grants untouched"
as_user 4242 --status
grep -q '30 pages of 2048 kB on node 1' <<<"$OUT" && grep -q '1 pages of 1048576 kB on node any' <<<"$OUT" ||
  fail "second user's status: $OUT"
as_user 4242 --release
expect_eq "$RC/$(cat "$(fake_node 1 nr_hugepages)")/$(cat "$(fake_pool nr_hugepages 1048576)")" "0/0/0" \
  "second user's release"
as_nobody --release
expect_eq "$RC" 0 "release with nothing held"
grep -q 'you hold no pages' <<<"$OUT" || fail "release message: $OUT"

# --- PAGES as a size: the pages of --size it needs, rounded up ---
set_pool 0 0
as_nobody 64M
expect_eq "$RC/$(nr)" "0/32" "64M asks for 32 two-MB pages"
as_nobody 65M
expect_eq "$RC/$(nr)" "0/33" "65M rounds up to 33 pages"
as_nobody --release
as_nobody 1G --size 1G
expect_eq "$RC/$(cat "$(fake_pool nr_hugepages 1048576)")" "0/1" "1G with --size 1G asks for one 1 GB page"
as_nobody --release
for bad in 0G 0 -2G 2X 1.5G 010; do
  as_nobody "$bad"
  [[ $RC == 2 ]] || fail "PAGES '$bad' accepted (exit $RC)"
done
expect_err "or a size with its unit" "a bad PAGES names both forms"
pass "PAGES: 0G, 0, -2G, 2X, 1.5G and 010 are refused"
as_nobody 100T
expect_rc 2 "a size past the page limit is refused"

# --- max_pages (per user, 1 GB page = 512 two-MB pages) ---
set_pool 0 0
as_nobody 1000
expect_eq "$RC/$(nr)" "0/1000" "max_pages: exactly at the limit"
as_nobody 1001
expect_rc 1 "max_pages: one over is refused"
expect_err "limit max_pages" "max_pages message"
expect_eq "$(nr)" 1000 "max_pages: pool unchanged"
as_nobody 1 --size 1G
expect_rc 1 "max_pages: a 1 GB page counts as 512"

# --- max_fraction of MemTotal (16 GiB fake; 0.5 = 8 GiB = 4096 pages) ---
write_conf <<CONF
max_pages 100000
max_fraction 0.25
min_free_mb 0
group nogroup
CONF
set_pool 0 0
fake_meminfo 16777216 16777216 1048576 # 1 GiB hugetlb already
as_nobody 1537                           # 1 GiB + 3074 MiB > 4 GiB
expect_rc 1 "max_fraction: over is refused"
expect_err "limit max_fraction" "max_fraction message"
as_nobody 1536
expect_eq "$RC/$(nr)" "0/1536" "max_fraction: exactly at the limit"

# --- the same limits per NUMA node, from the node's own meminfo: here the
# machine has room, node 1 (2 GiB) does not ---
write_conf <<CONF
max_pages 100000
max_fraction 0.5
min_free_mb 512
group nogroup
CONF
set_pool 0 0
fake_meminfo 16777216 16777216 0
fake_node_meminfo 1 2097152 2097152
echo 100 >"$(fake_node 1 nr_hugepages 2048)" # 200 MiB there already
as_nobody 413 --node 1                       # 200 + 826 MiB > 1 GiB = half of node 1
expect_rc 1 "node max_fraction: over the node's half is refused"
expect_err "limit max_fraction on node 1" "node max_fraction message"
expect_eq "$(cat "$(fake_node 1 nr_hugepages)")" 100 "node 1 pool unchanged"
as_nobody 412 --node 1
expect_rc 0 "node max_fraction: exactly at the limit"
echo 100 >"$(fake_node 1 nr_hugepages 2048)"
: >"$FAKE/var/lib/hugepool/grants"
fake_node_meminfo 1 2097152 614400 # 600 MiB free on node 1, 512 must stay
as_nobody 45 --node 1
expect_rc 1 "node min_free_mb: only 88 MiB may be taken"
expect_err "limit min_free_mb on node 1" "node min_free_mb message"
as_nobody 44 --node 1
expect_rc 0 "node min_free_mb: 88 MiB is allowed"
as_nobody 30 --node 0
expect_rc 0 "another node with room is not affected"
as_nobody 1000
expect_rc 0 "a grant on any node uses the machine-wide numbers only"
echo 0 >"$(fake_node 1 nr_hugepages 2048)"
fake_node_meminfo 1 8388608 6291456
fake_meminfo 16777216 12582912 0

# --- min_free_mb ---
write_conf <<CONF
max_pages 100000
max_fraction 1
min_free_mb 1000
group nogroup
CONF
set_pool 0 0
fake_meminfo 16777216 1024000 0 # 1000 MB available + 0
as_nobody 1
expect_rc 1 "min_free_mb: nothing may come out of the last 1000 MB"
expect_err "limit min_free_mb" "min_free_mb message"
fake_meminfo 16777216 1026048 0 # 1002 MB available
as_nobody 1
expect_eq "$RC/$(nr)" "0/1" "min_free_mb: 2 MB above it is allowed"
as_nobody 3 # 2 more pages (the fake MemAvailable stays at 1002 MB)
expect_rc 1 "min_free_mb: two pages more are refused"
fake_meminfo 16777216 12582912 0

# --- group ---
write_conf <<CONF
max_pages 100
max_fraction 0.5
min_free_mb 0
group users
CONF
set_pool 0 0
as_nobody 1
expect_rc 1 "group: a non-member is refused"
expect_err "not in group 'users'" "group message"
expect_err "ask your administrator to add you to 'users'" "group message: which group to ask for"
# --status is let through for a non-member: the pool's figures (what sysfs
# shows everyone) and the reason, no grants, and no lock taken (a holder of
# the lock does not make it wait).
exec 8>>"$FAKE/var/lib/hugepool/lock"
flock -x 8
as_nobody --status
flock -u 8
exec 8>&-
expect_rc 0 "group: a non-member's --status is let through"
grep -q '2048 kB pages, all nodes: total 0 free 0' <<<"$OUT" || fail "non-member --status lacks the pool: $OUT"
grep -q "your grants: not shown: you are not in group 'users'" <<<"$OUT" && ! grep -q 'your grants (uid' <<<"$OUT" ||
  fail "non-member --status shows grants or no reason: $OUT"
pass "group: a non-member's --status shows the pool and the group to ask for, no grants, without the lock"
set +e
OUT=$(setpriv --reuid=65534 --regid=65534 --groups=100 "$HELPER" 3 2>&1)
RC=$?
set -e
expect_eq "$RC/$(nr)" "0/3" "group: a supplementary member is allowed"
sed -i 's/^group users/group no-such-group/' "$conf"
as_nobody 4
expect_err "does not exist" "group: a missing group is refused"

# --- no configuration: said to be missing, with how to install it ---
mv "$FAKE/etc/hugepool" "$FAKE/etc/hugepool.away"
as_nobody 1
expect_rc 1 "no config directory: refused"
expect_err "config directory $FAKE/etc/hugepool is missing" "no config directory: said to be missing"
expect_err "hugepool-helper package, or runs setuid-helper/install.sh" "no config directory: how to install it"
! grep -q "must be a root-owned" <<<"$ERR" || fail "a missing directory called not root-owned: $ERR"
as_nobody --status
expect_err "is missing" "no config directory: --status says so too"
mkdir -m 0755 "$FAKE/etc/hugepool"
as_nobody 1
expect_err "config $FAKE/etc/hugepool/reserve.conf is missing" "no config file: said to be missing"
rmdir "$FAKE/etc/hugepool"
mv "$FAKE/etc/hugepool.away" "$FAKE/etc/hugepool"
set +e
OUT=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$HELPER" --version 2>&1)
RC=$?
set -e
[[ $RC == 0 && $OUT =~ ^hugepool-reserve\ [0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "--version: rc $RC: $OUT"
pass "--version: $OUT"

# --- require_job ---
write_conf <<CONF
max_pages 100
max_fraction 0.5
min_free_mb 0
group nogroup
require_job yes
CONF
set_pool 0 0
jobs=$FAKE/run/hugepool/jobs
rm -f "$jobs"/*
as_nobody 1
expect_rc 1 "require_job: no job, refused"
expect_err "no Slurm job" "require_job message"
echo 4242 >"$jobs/17"
as_nobody 1
expect_rc 1 "require_job: another user's job does not count"
echo 65534 >"$jobs/18"
chown 65534 "$jobs/18"
as_nobody 1
expect_rc 1 "require_job: a registry entry not written by root does not count"
chown 0 "$jobs/18"
as_nobody 1
expect_eq "$RC/$(nr)" "0/1" "require_job: the user's job on the node"
rm -f "$jobs"/*
default_conf

# --- the config file itself ---
set_pool 0 0
bad_conf() { # description, then the setup already done
  as_nobody 1
  [[ $RC == 1 && $(nr) == 0 ]] || fail "$1: exit $RC, pool $(nr)"
  grep -q "config" <<<"$ERR" || fail "$1: unclear message: $ERR"
  pass "$1 refused: $ERR"
  default_conf
  chown root:root "$conf"
}
chown 65534 "$conf"; bad_conf "config owned by a user"
chmod 0666 "$conf"; bad_conf "world-writable config"
chmod 0664 "$conf"; bad_conf "group-writable config"
chgrp nogroup "$conf"; chmod 0620 "$conf"; bad_conf "group-writable config (other group)"
mv "$conf" "$conf.real"; ln -s "$conf.real" "$conf"; bad_conf "symlinked config"
rm -f "$conf" "$conf.real"; bad_conf "missing config"
rm -f "$conf"; mkfifo "$conf"; bad_conf "config that is a FIFO"
rm -f "$conf"
chmod 0777 "$FAKE/etc/hugepool"; default_conf; as_nobody 1
expect_rc 1 "config in a world-writable directory refused"
chmod 0755 "$FAKE/etc/hugepool"
printf 'max_pages 10\nmax_pages 20\nmax_fraction 0.5\nmin_free_mb 0\ngroup nogroup\n' >"$conf"; bad_conf "config with a repeated key"
printf 'max_pages 10\nmax_fraction 0.5\nmin_free_mb 0\n' >"$conf"; bad_conf "config without a group"
printf 'max_pages -10\nmax_fraction 0.5\nmin_free_mb 0\ngroup nogroup\n' >"$conf"; bad_conf "config with a bad number"
head -c 5000 /dev/zero | tr '\0' '#' >"$conf"; bad_conf "oversized config"

# --- never shrink below pages in use or reserved ---
set_pool 0 0
as_nobody 50
expect_eq "$RC/$(nr)" "0/50" "grant before the shrink test"
echo 30 >"$(fake_pool free_hugepages)" # 20 pages now in use by somebody
as_nobody --release
expect_rc 1 "release that would take pages in use is refused"
expect_err "in use or reserved" "shrink message"
expect_eq "$(nr)" 50 "pool not shrunk"
echo 50 >"$(fake_pool free_hugepages)"
echo 10 >"$(fake_pool resv_hugepages)" # 10 free pages promised to a mapping
as_nobody --release
expect_eq "$RC/$(nr)" "1/50" "reserved pages count as in use"
echo 0 >"$(fake_pool resv_hugepages)"
as_nobody --release
expect_eq "$RC/$(nr)" "0/0" "release once the pages are free again"

# --- a release never takes other users' granted pages while the caller's own
# processes still map theirs (the pool cannot tell whose free pages are whose) ---
set_pool 0 0
as_nobody 100
expect_rc 0 "alice (nobody) grants 100"
echo 0 >"$(fake_pool free_hugepages)" # ... and maps all 100
fake_proc 5001 65534 204800
as_user 4242 100
expect_eq "$RC/$(nr)/$(cat "$(fake_pool free_hugepages)")" "0/200/100" "bob grants 100, unmapped"
as_nobody --release
expect_rc 1 "alice's release while her processes map her pages"
expect_err "kept 100 of 100 pages" "release names what is kept"
expect_eq "$(nr)/$(cat "$(fake_pool free_hugepages)")" "200/100" "bob's free pages not given back in alice's name"
as_nobody --status
grep -q '100 pages of 2048 kB on node any' <<<"$OUT" || fail "alice no longer charged: $OUT"
pass "alice still charged for the pages she maps"
fake_proc 5001 65534 61440 # her process now maps 30 pages (the rest freed)
echo 70 >"$(fake_pool free_hugepages)"
fake_proc 5002 4242 409600 # another user's mappings do not count for alice
as_nobody --release
expect_eq "$RC/$(nr)" "1/130" "partial release: 70 given back, 30 kept"
expect_err "kept 30 of 100 pages" "partial release message"
as_nobody --status
grep -q '30 pages of 2048 kB on node any' <<<"$OUT" || fail "alice's remainder: $OUT"
rm -rf "$FAKE/proc/5001" "$FAKE/proc/5002"
echo 130 >"$(fake_pool free_hugepages)"
as_nobody --release
expect_eq "$RC/$(nr)" "0/100" "her process gone: the last 30 given back"
as_user 4242 --status
grep -q '100 pages of 2048 kB on node any' <<<"$OUT" || fail "bob's grant: $OUT"
as_user 4242 --release
expect_eq "$RC/$(nr)" "0/0" "bob's release"

# --- the kernel allocates fewer pages than asked: restore, grant nothing ---
set_pool 20 20
echo 70 >"$(fake_pool capacity)"
as_nobody 100
expect_rc 1 "partial grant fails"
expect_err "allocated only 50 of 100 pages; pool restored to 20" "partial grant message"
expect_eq "$(nr)" 20 "pool restored after a partial grant"
as_nobody --status
grep -q '^  none' <<<"$OUT" || fail "a failed grant was recorded: $OUT"
pass "a failed grant is not recorded"
as_nobody 50
expect_eq "$RC/$(nr)" "0/70" "a grant that fits the capacity"
rm -f "$(fake_pool capacity)"

# --- RLIMIT_FSIZE: Linux cuts a write at the caller's file size limit even
# when it overwrites; a rewrite cut short used to leave the new table's head
# over the old tail (lines duplicated or lost).  Now the helper raises the
# soft limit to the hard one and refuses to write when that is not enough. ---
set_pool 0 0
for u in 4001 4002 4003 4004 4005; do as_user $u $((u - 3990)); done # 11..15 pages each
table=$FAKE/var/lib/hugepool/grants
cp "$table" "$INST/table.before"
pool_before=$(nr)
as_fsize() { # limit uid helper-args...: sets OUT/ERR/RC
  local lim=$1 uid=$2
  shift 2
  set +e
  # (stderr into the pipe too: a file would itself be cut at the limit)
  OUT=$(prlimit --fsize="$lim" setpriv --reuid="$uid" --regid=65534 --clear-groups "$HELPER" "$@" 2>&1)
  RC=$?
  set -e
  ERR=$OUT
}
for n in 0 1 60 100 130 4096 32767; do
  as_fsize "$n:$n" 4001 --release # the first line goes: every other line would move up
  [[ $RC == 1 ]] || fail "fsize $n: release exit $RC ($OUT $ERR)"
  grep -q 'RLIMIT_FSIZE' <<<"$ERR" || fail "fsize $n: message: $ERR"
  cmp -s "$table" "$INST/table.before" || fail "fsize $n: table changed: $(cat "$table")"
  as_fsize "$n:$n" 4009 20 # a new user: the table would grow
  [[ $RC == 1 && $(nr) == "$pool_before" ]] || fail "fsize $n: grant exit $RC, pool $(nr)"
  cmp -s "$table" "$INST/table.before" || fail "fsize $n: table changed by a grant: $(cat "$table")"
done
pass "hard RLIMIT_FSIZE below the table's size: release and grant refused, table and pool unchanged"
as_user 4003 --status
grep -q '13 pages of 2048 kB on node any' <<<"$OUT" || fail "accounting after the RLIMIT_FSIZE cases: $OUT"
as_fsize 0:unlimited 4001 --release
expect_eq "$RC/$(nr)" "0/$((pool_before - 11))" "soft RLIMIT_FSIZE 0 (hard unlimited): raised, the release works"
as_fsize 32768:32768 4002 --release
expect_eq "$RC/$(nr)" "0/$((pool_before - 23))" "hard RLIMIT_FSIZE of the table's maximum size is enough"
for u in 4003 4004 4005; do as_user $u --release; done
expect_eq "$(nr)/$(grep -c . "$table")" "0/2" "everything given back, table empty"
set_pool 70 70 # as the partial grant above left it

# --- a damaged grant table stops everything (fail closed) ---
printf '65534 any 2048 50\n' >"$FAKE/var/lib/hugepool/grants"
as_nobody 60
expect_rc 1 "corrupt grant table refused"
printf '65534 any 2048 50\nend\n' >"$FAKE/var/lib/hugepool/grants"
as_nobody 60
expect_rc 1 "grant table without its checksum refused"
expect_err "corrupt" "corrupt table message"
expect_eq "$(nr)" 70 "pool unchanged with a corrupt table"

# --- a caller stuck while holding the lock (SIGSTOP) delays others, bounded ---
set_pool 0 0
flock "$FAKE/var/lib/hugepool/lock" sleep 6 &
holder=$!
sleep 0.3
start=$SECONDS
as_nobody 5
expect_rc 1 "lock held too long: refused"
expect_err "held the lock" "lock timeout message"
((SECONDS - start < 6)) || fail "gave up only after $((SECONDS - start)) s"
expect_eq "$(nr)" 0 "pool unchanged after a lock timeout"
wait "$holder"
as_nobody 5
expect_eq "$RC/$(nr)" "0/5" "works again once the lock is free"
