#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A hostile user of the allowed group against the installed helper (setgid,
# run as nobody, fake tree): keeping the lock forever, an in-use count that
# fails open, pages held without a mapping, a kill in the middle of a grant,
# a full disk, a failing fsync, a release that takes another user's node pages.
source "$(dirname "$0")/lib.sh"
fake_setup
write_conf <<CONF
max_pages 10
max_fraction 1
min_free_mb 0
group nogroup
CONF
table=$FAKE/var/lib/hugepool/grants
ROOT_H=$RESERVE_BIN_DIR/hugepool-reserve-fake
TOOLS=$INST/tools
as_root() { # helper-args...: the root side (Slurm prolog/epilog, root) from the build tree
  set +e
  OUT=$("$ROOT_H" "$@" 2>&1)
  RC=$?
  set -e
}
node_nr() { cat "$(fake_node "$1" nr_hugepages)"; }
node_free() { cat "$(fake_node "$1" free_hugepages)"; }

# --- 1. the lock: a helper that never lets go is killed by the root side,
# whatever its name or state; it is recognised by its effective gid ---
holds() { grep -Eq "FLOCK +ADVISORY +WRITE +$stuck " /proc/locks; }
stuck_start() { # command...: a helper that takes the lock and blocks on a FIFO meminfo
  rm -f "$FAKE/proc/meminfo"
  mkfifo -m 0644 "$FAKE/proc/meminfo"
  "$@" >"$INST/stuck.out" 2>&1 &
  stuck=$!
  on_exit "kill -9 $stuck 2>/dev/null"
  for _ in $(seq 100); do holds && break; sleep 0.05; done
  holds || fail "the helper did not take the lock"
}
stuck_recovered() { # what
  local st start=$SECONDS
  as_user 4242 1
  expect_rc 1 "$1: another user's request waits, bounded, and kills nothing"
  kill -0 "$stuck" || fail "$1: a user's helper killed another user's helper"
  as_root --release
  expect_rc 0 "$1: the root side kills the holder and its release goes through"
  set +e
  wait "$stuck"
  st=$?
  set -e
  expect_eq "$st" 137 "$1: the holder was killed (SIGKILL)"
  ((SECONDS - start < 12)) || fail "$1: recovery took $((SECONDS - start)) s"
  rm -f "$FAKE/proc/meminfo"
  fake_meminfo 16777216 12582912 0
  expect_eq "$(nr)/$(cat "$table")" "0/" "$1: the killed grant changed nothing"
  as_nobody 5
  expect_eq "$RC/$(nr)" "0/5" "$1: the lock works again"
}

# (a) run through a symlink under another name, then SIGSTOPped
set_pool 0 0
ln -s "$HELPER" "$TOOLS/x"
stuck_start setpriv --reuid=65534 --regid=65534 --clear-groups "$TOOLS/x" 5
expect_eq "$(cat "/proc/$stuck/comm")" x "the helper runs under the name 'x'"
kill -STOP "$stuck"
for _ in $(seq 50); do [[ $(awk '{print $3}' "/proc/$stuck/stat") == T ]] && break; sleep 0.05; done
stuck_recovered "helper named 'x', stopped"

# (b) frozen in a cgroup the user may write (cgroup v2 cgroup.freeze, as a
# delegated systemd user slice allows): state S, not T
cg2=$(findmnt -n -t cgroup2 -o TARGET | head -n 1 || true)
if [[ -n $cg2 && -w $cg2 ]]; then
  set_pool 0 0
  cg=$cg2/hugepool-reserve-test-$$
  mkdir "$cg"
  on_exit "echo 0 >'$cg/cgroup.freeze' 2>/dev/null; rmdir '$cg' 2>/dev/null"
  chown 65534 "$cg" "$cg/cgroup.freeze" "$cg/cgroup.procs" # delegated to the user
  stuck_start sh -c 'echo $$ >"$1/cgroup.procs" && exec setpriv --reuid=65534 --regid=65534 --clear-groups "$2" 5' \
    _ "$cg" "$HELPER"
  setpriv --reuid=65534 --regid=65534 --clear-groups sh -c "echo 1 >'$cg/cgroup.freeze'"
  for _ in $(seq 100); do grep -qx 'frozen 1' "$cg/cgroup.events" && break; sleep 0.05; done
  grep -qx 'frozen 1' "$cg/cgroup.events" || fail "the user could not freeze the helper's cgroup"
  expect_eq "$(awk '{print $3}' "/proc/$stuck/stat")" S "the frozen helper is in state S"
  stuck_recovered "helper frozen by the user's cgroup"
else
  echo "note: no writable cgroup v2 mount: the cgroup.freeze case is not run" >&2
fi

# (c) a caller with 1,000 supplementary groups: its helper's status is ~9 kB
# (2 kB used to be the most the root side read, so it was never killed)
set_pool 0 0
many=$(seq -s, 1000000 1000999)
stuck_start setpriv --reuid=65534 --regid=65534 --groups="$many" "$HELPER" 5
size=$(wc -c <"/proc/$stuck/status")
((size > 8192)) || fail "the helper's status is only $size bytes"
kill -STOP "$stuck"
for _ in $(seq 50); do [[ $(awk '{print $3}' "/proc/$stuck/stat") == T ]] && break; sleep 0.05; done
stuck_recovered "helper of a caller with 1000 groups ($size-byte status), stopped"

# --- 2. the release's in-use count fails closed ---
release_with_nofile() { # soft:hard: nobody's --release under that RLIMIT_NOFILE; sets OUT, ERR (both streams), RC
  set +e
  OUT=$(prlimit --nofile="$1" setpriv --reuid=65534 --regid=65534 --clear-groups "$HELPER" --release 2>&1)
  RC=$?
  set -e
  ERR=$OUT
}
set_pool 0 0
rm -rf "$FAKE"/proc/[0-9]*
as_nobody 10
as_user 4242 10
echo 10 >"$(fake_pool free_hugepages)" # nobody's 10 are in use ...
fake_proc 5001 65534 20480             # ... mapped by nobody's process
expect_eq "$(nr)" 20 "nobody and user 4242 hold 10 each"
release_with_nofile 6:6
expect_rc 1 "a hard RLIMIT_NOFILE of 6: the release is refused"
expect_err "RLIMIT_NOFILE" "the refusal names RLIMIT_NOFILE"
expect_eq "$(nr)" 20 "pool unchanged: user 4242's free pages not given back in nobody's name"
release_with_nofile 6:64
expect_rc 1 "a soft RLIMIT_NOFILE of 6 is raised: the release runs and keeps what is mapped"
expect_err "kept 10 of 10 pages" "the mapped pages are kept"
chmod 0700 "$FAKE/proc"
as_nobody --release
expect_rc 1 "/proc unreadable: the release keeps everything"
expect_err "cannot read /proc" "the message says why"
grep -q 'map 0 kB' <<<"$ERR" && fail "the message claims nothing is mapped: $ERR"
expect_eq "$(nr)" 20 "pool unchanged with /proc unreadable"
chmod 0755 "$FAKE/proc"

# A status of any length is read (line by line): a process with 1,000 groups
# anywhere on the node must not make every release fail closed, and what is
# after its long Groups: line (HugetlbPages:) still counts.
set_pool 0 0
rm -rf "$FAKE"/proc/[0-9]*
as_nobody 4
mkdir -p "$FAKE/proc/5003"
{
  printf 'Name:\tapp\nUid:\t65534\t65534\t65534\t65534\nGid:\t0\t0\t0\t0\nGroups:\t'
  seq -s ' ' 10000000 10000999
  printf 'HugetlbPages:\t    4096 kB\n'
} >"$FAKE/proc/5003/status"
expect_eq "$(($(wc -c <"$FAKE/proc/5003/status") > 8192))" 1 "a fake status of more than 8 kB"
as_nobody --release
expect_rc 1 "a release next to a process with 1000 groups runs"
expect_err "kept 2 of 4 pages" "the 4096 kB mapped after the long Groups: line are kept"
expect_eq "$(nr)" 2 "the other 2 pages were given back"
rm -rf "$FAKE"/proc/[0-9]*

# --- 3. pages held without a mapping (a hugetlb memfd: HugetlbPages 0)
# cannot be released out of another user's grant ---
set_pool 0 0
rm -rf "$FAKE"/proc/[0-9]*
as_user 4242 10
as_nobody 10
echo 10 >"$(fake_pool free_hugepages)" # nobody's 10 sit in a memfd, unmapped
echo 10 >"$(fake_node 0 free_hugepages)"
as_nobody --release
expect_rc 1 "a release while the caller's pages sit in a memfd"
expect_err "promised to other users" "the refusal says the free pages are promised"
expect_eq "$(nr)/$(cat "$(fake_pool free_hugepages)")" "20/10" "user 4242's 10 free pages stay in the pool"
echo 20 >"$(fake_pool free_hugepages)" # the memfd is closed
echo 20 >"$(fake_node 0 free_hugepages)"
as_nobody --release
expect_eq "$RC/$(nr)" "0/10" "released once the memfd is gone"

# --- the same rule per NUMA node: a machine-wide release does not take the
# free pages of another user's --node grant (the kernel picks the node of a
# machine-wide shrink; the helper shrinks node by node instead) ---
set_pool 0 0
as_user 4242 10 --node 1
as_nobody 10 # on node 0 (the fake kernel puts machine-wide grants there)
expect_eq "$(nr)/$(node_nr 0)/$(node_nr 1)" "20/10/10" "4242 holds 10 on node 1, nobody 10 on any node"
echo 0 >"$(fake_node 0 free_hugepages)" # nobody's pages in a memfd on node 0
echo 10 >"$(fake_pool free_hugepages)"
as_nobody --release
expect_rc 1 "a machine-wide release that would take node 1's promised pages"
expect_eq "$(node_nr 1)/$(node_free 1)" "10/10" "user 4242's node 1 pages untouched"
echo 10 >"$(fake_node 0 free_hugepages)"
echo 20 >"$(fake_pool free_hugepages)"
as_nobody --release
expect_eq "$RC/$(nr)/$(node_nr 0)/$(node_nr 1)" "0/10/0/10" "released from node 0 only once free there"
as_user 4242 --release
expect_eq "$RC/$(nr)/$(node_nr 1)" "0/0/0" "user 4242's node release"

# --- 4. a kill the moment the pool grows: the pages are charged (or given
# back) by the next call, and max_pages still holds ---
mid=0
for try in $(seq 1 12); do
  set_pool 0 0
  got=$("$TOOLS/kill_on_change" "$(fake_pool nr_hugepages)" \
    setpriv --reuid=65534 --regid=65534 --clear-groups "$HELPER" 10)
  [[ $got == killed ]] || continue
  grep -q '^65534 any 2048 10$' "$table" || mid=$((mid + 1)) # killed before the grant was recorded
  as_nobody 10 # the same request again, as a retry would
  expect_eq "$RC/$(nr)" "0/10" "try $try: after a kill mid-grant the retry adds nothing"
  grep -q '^65534 any 2048 10$' "$table" || fail "try $try: the pages are not charged: $(cat "$table")"
  as_nobody 11
  expect_eq "$RC/$(nr)" "1/10" "try $try: max_pages still counts the pages of the killed grant"
done
echo "note: $mid of 12 kills landed between the pool write and the grant's record" >&2

# An unfinished intent in the table is settled by the next locked call of
# any user: charged if every page came, given back if only some did.
set_pool 10 10
printf '# hugepool-reserve grants: uid node size_kB pages\nintent 65534 any 2048 0 10 10\n' | seal >"$table"
as_user 4242 --release
expect_rc 0 "a locked call with an unfinished intent whose pages all came"
grep -q '^65534 any 2048 10$' "$table" && ! grep -q '^intent' "$table" || fail "intent not charged: $(cat "$table")"
pass "the intent's pages are charged to its user"
set_pool 4 4
printf '# hugepool-reserve grants: uid node size_kB pages\nintent 65534 any 2048 0 10 10\n' | seal >"$table"
as_user 4242 --release
expect_eq "$RC/$(nr)" "0/0" "an intent whose pages came only in part: given back"
grep -q '^65534\|^intent' "$table" && fail "a partial intent was charged: $(cat "$table")"
pass "nothing charged for a partial intent given back"

# --- disk full: the grant is refused with the real reason, nothing changes ---
state=$FAKE/var/lib/hugepool
cp -a "$state" "$INST/state.saved"
mount -t tmpfs -o size=16k tmpfs "$state"
on_exit "umount '$state' 2>/dev/null"
chown --reference="$INST/state.saved" "$state"
chmod --reference="$INST/state.saved" "$state"
cp -a "$INST/state.saved/." "$state/"
set_pool 0 0
dd if=/dev/zero of="$state/filler" bs=4k 2>/dev/null || true
as_nobody 5
expect_rc 1 "grant with the state directory full"
expect_err "No space left on device" "the message gives the real reason"
expect_eq "$(nr)" 0 "pool unchanged on a full disk"
umount "$state"

# --- fsync of the table fails after its write: pool and table agree ---
set_pool 0 0
echo 1 >"$FAKE/fail-fsync" # the second fsync of the call (the grant's record) fails
as_nobody 10
rm -f "$FAKE/fail-fsync"
expect_rc 1 "grant whose record cannot be synced"
expect_err "cannot record the grant (Input/output error); pool restored" "fsync failure message"
expect_eq "$(nr)" 0 "pool restored"
grep -q '^65534 ' "$table" && fail "the table keeps a grant whose pages were given back: $(cat "$table")"
as_nobody 10
expect_eq "$RC/$(nr)" "0/10" "the next grant is exact"
grep -q '^65534 any 2048 10$' "$table" || fail "grant table: $(cat "$table")"
pass "table and pool agree after a failed fsync"

# --- 5. a release counts the caller's jobs' limits fail closed (limits.c,
# state.c): a job registry that cannot be listed, an entry that cannot be
# read, or no hugetlb hierarchy found while a job the prolog isolated is
# still registered: everything is kept, never read as "no jobs" ---
jobs=$FAKE/run/hugepool/jobs
mkdir -p "$jobs"
set_pool 0 0
as_nobody 4
expect_eq "$RC/$(nr)" "0/4" "nobody is granted 4"
mv "$jobs" "$jobs.saved"
: >"$jobs"
on_exit "[[ ! -d '$jobs.saved' ]] || { rm -f '$jobs'; mv '$jobs.saved' '$jobs'; }"
as_nobody --release
expect_eq "$RC/$(nr)" "1/4" "a release with the job registry replaced by a file keeps everything"
expect_err "cannot read your jobs' hugetlb cgroups (Not a directory)" "the message says why"
rm -f "$jobs"
mv "$jobs.saved" "$jobs"
printf 'garbage\n' >"$jobs/6161"
as_nobody --release
expect_eq "$RC/$(nr)" "1/4" "a release next to a damaged registry entry keeps everything"
expect_err "Structure needs cleaning" "the message says why"
echo 65534 >"$jobs/6161"
# A registry anyone but root may change (its entries could be removed, so
# their jobs' limits would not be counted): not read, never "no jobs".
on_exit "chmod 0755 '$jobs'; chown 0 '$jobs'"
for how in "chmod 0777" "chmod 0775" "chown 65534"; do
  $how "$jobs"
  as_nobody --release
  expect_eq "$RC/$(nr)" "1/4" "a release with the job registry after '$how' keeps everything"
  expect_err "Operation not permitted" "the message says why"
  chmod 0755 "$jobs"
  chown 0 "$jobs"
done
echo "isolated 0 0" >"$jobs/6161.iso"
on_exit "rm -f '$jobs/6161' '$jobs/6161.iso'"
# No hugetlb hierarchy in the helper's mount namespace (as after an
# administrator unmounted it): the isolated job's limit cannot be read.
mapfile -t cg_mounts < <(awk '{ for (i = 7; i <= NF; i++) if ($i == "-") break;
  if ($(i + 1) == "cgroup2" || ($(i + 1) == "cgroup" && $(i + 3) ~ /(^|,)hugetlb(,|$)/)) print $5 }' /proc/self/mountinfo)
umounts=
for m in "${cg_mounts[@]}"; do umounts+="umount -l '$m' && "; done
release_without_cgroups() {
  set +e
  OUT=$(unshare -m --propagation private sh -c "${umounts}exec setpriv --reuid=65534 --regid=65534 --clear-groups '$HELPER' --release" 2>"$INST/err")
  RC=$?
  set -e
  ERR=$(cat "$INST/err")
}
release_without_cgroups
expect_eq "$RC/$(nr)" "1/4" "no hugetlb hierarchy while an isolated job is registered: the release keeps everything"
expect_err "cannot read your jobs' hugetlb cgroups" "the message says why"
echo "unisolated 0 no controller" >"$jobs/6161.iso"
release_without_cgroups
expect_eq "$RC/$(nr)" "0/0" "control: with the job unisolated the same release gives everything back"
rm -f "$jobs/6161" "$jobs/6161.iso"
