#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The real kernel pool: the installed setgid helper, run as nobody, resizes
# /sys/kernel/mm/hugepages (and a NUMA node's pool), refuses to shrink below
# pages in use, and the pool ends as it started.  Holds the machine-wide pool
# lock for its whole run.
source "$(dirname "$0")/lib.sh"
real_pool_setup
expect_eq "$(stat -c '%a %G' "$sys/nr_hugepages")" "664 hugepool" "install: sysfs file writable by the helper's group"
grep -q "^z /sys/kernel/mm/hugepages/hugepages-\*/nr_hugepages 0664 root hugepool -$" "$INST/tmpfiles/hugepool.conf" ||
  fail "tmpfiles rule missing"
# nobody itself cannot write the pool (it is not in the group): only the helper can.
if setpriv --reuid=65534 --regid=65534 --clear-groups sh -c "echo 1 > $sys/nr_hugepages" 2>/dev/null; then
  fail "nobody could write the pool directly"
fi
pass "nobody cannot write the pool without the helper"

free0=$(meminfo HugePages_Free)
as_nobody 16
expect_rc 0 "real grant of 16 pages"
expect_eq "$(real_nr)" $((base + 16)) "sysfs nr_hugepages grew by 16"
expect_eq "$(meminfo HugePages_Total)/$(meminfo HugePages_Free)" "$((base + 16))/$((free0 + 16))" \
  "/proc/meminfo agrees"
as_nobody 16
expect_eq "$RC/$(real_nr)" "0/$((base + 16))" "a repeated call adds nothing"

granted=16
if [[ $base_node0 != none ]]; then
  granted=20
  as_nobody 4 --node 0
  expect_eq "$RC/$(cat "$node0/nr_hugepages")" "0/$((base_node0 + 16 + 4))" "NUMA node 0 pool grew by 4"
fi
as_nobody 100
expect_rc 1 "max_pages enforced on the real pool"
expect_eq "$(real_nr)" $((base + granted)) "pool unchanged by the refusal"

# 16 concurrent ranks on the real pool: the largest request wins, once.
as_nobody --release
expect_eq "$RC/$(real_nr)" "0/$base" "release before the concurrent ranks"
pids=()
for i in $(seq 1 16); do
  setpriv --reuid=65534 --regid=65534 --clear-groups "$HELPER" $((i * 2)) >/dev/null 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a concurrent rank failed"; done
expect_eq "$(real_nr)" $((base + 32)) "16 concurrent ranks: the real pool grew by 32"

# The production-path binary under a hostile loader environment: nothing loaded.
marker=$INST/marker
rm -f "$marker"
setpriv --reuid=65534 --regid=65534 --clear-groups env LD_PRELOAD="$INST/tools/libmarker_preload.so" \
  LD_AUDIT="$INST/tools/libmarker_preload.so" HUGEPOOL_TEST_MARKER="$marker" "$HELPER" --status >/dev/null
[[ ! -e $marker ]] || fail "LD_PRELOAD/LD_AUDIT library ran in the installed helper"
pass "installed helper ignores LD_PRELOAD and LD_AUDIT"

# A caller's hard RLIMIT_FSIZE = 0 would make the grant table unwritable
# (sysfs is not affected): refused before anything changes.
as_nobody --release
expect_eq "$RC/$(real_nr)" "0/$base" "release before the RLIMIT_FSIZE case"
as_nobody 10
expect_eq "$RC/$(real_nr)" "0/$((base + 10))" "grant 10"
fsize() { setpriv --reuid=65534 --regid=65534 --clear-groups bash -c 'ulimit -f 0; exec "$@"' _ "$HELPER" "$@" 2>&1; }
set +e
OUT=$(fsize 20)
RC=$?
set -e
expect_eq "$RC/$(real_nr)" "1/$((base + 10))" "RLIMIT_FSIZE=0: grant refused, pool unchanged"
grep -q 'RLIMIT_FSIZE' <<<"$OUT" || fail "RLIMIT_FSIZE grant message: $OUT"
set +e
OUT=$(fsize --release)
RC=$?
set -e
expect_eq "$RC/$(real_nr)" "1/$((base + 10))" "RLIMIT_FSIZE=0: release fails before touching the pool"
as_nobody --status
grep -q '10 pages of 2048 kB on node any' <<<"$OUT" || fail "accounting after RLIMIT_FSIZE: $OUT"
pass "the user still holds exactly 10"

# The caller's own processes map its pages while another user's grant sits
# unmapped in the pool: a release must not give back that other user's pages.
as_nobody --release
expect_eq "$RC/$(real_nr)" "0/$base" "release before the in-use case"
as_nobody 8
as_user 4242 8
expect_eq "$RC/$(real_nr)" "0/$((base + 16))" "nobody and user 4242 hold 8 each"
coproc MINE { exec setpriv --reuid=65534 --regid=65534 --clear-groups "$INST/tools/hugetlb_hold" 8; }
mine_pid=$MINE_PID
on_exit "kill $mine_pid 2>/dev/null"
read -r -t 30 held <&"${MINE[0]}" || fail "nobody could not map 8 hugetlb pages"
expect_eq "$held" "held 8" "nobody's process maps 8 pages"
as_nobody --release
expect_rc 1 "release while the caller's process maps its pages"
expect_err "kept 8 of 8 pages" "the caller's mapped pages stay charged"
expect_eq "$(real_nr)" $((base + 16)) "real pool not shrunk by the other user's unmapped pages"
exec {MINE[1]}>&-
wait "$mine_pid" || true
as_nobody --release
expect_eq "$RC/$(real_nr)" "0/$((base + 8))" "released once the process has ended"
as_user 4242 --release
expect_eq "$RC/$(real_nr)" "0/$base" "the other user's release"

# Pages held in a hugetlb memfd (faulted in, then unmapped: HugetlbPages 0)
# while another user's grant sits unmapped in the pool: they stay charged to
# the caller, and the pool does not shrink into that user's pages (their
# mmap would then fail).
# Free pages the pool had before the test would cover for them: out for now.
echo $(($(real_nr) - $(spare))) >"$sys/nr_hugepages"
expect_eq "$(spare)" 0 "no free pages before the memfd case"
as_nobody 8
as_user 4242 8
coproc MEMFD { exec setpriv --reuid=65534 --regid=65534 --clear-groups "$INST/tools/hugetlb_hold" --memfd 8; }
memfd_pid=$MEMFD_PID
on_exit "kill $memfd_pid 2>/dev/null"
read -r -t 30 held <&"${MEMFD[0]}" || fail "nobody could not fill a hugetlb memfd"
expect_eq "$held" "held 8" "nobody's memfd holds 8 pages, none mapped"
before=$(real_nr)
as_nobody --release
expect_rc 1 "release while the caller's pages sit in a memfd"
expect_err "kept 8 of 8 pages" "the pages in its memfd stay charged to the caller"
expect_eq "$(real_nr)" "$before" "real pool not shrunk into user 4242's grant"
set +e
OUT=$(setpriv --reuid=4242 --regid=65534 --clear-groups "$INST/tools/hugetlb_hold" 8 </dev/null 2>&1)
RC=$?
set -e
expect_eq "$RC/$OUT" "0/held 8" "user 4242 can still map the 8 pages granted"
exec {MEMFD[1]}>&-
wait "$memfd_pid" || true
as_nobody --release
as_user 4242 --release
expect_eq "$RC/$(spare)" "0/0" "both released once the memfd is closed"
echo "$base" >"$sys/nr_hugepages"

as_nobody 10 # the state the next case starts from

# Take all but one spare page into use: the release must be refused.
hold=$(($(spare) - 1))
coproc HOLD { exec "$RESERVE_TOOLS/hugetlb_hold" "$hold"; }
hold_pid=$HOLD_PID # (bash unsets HOLD_PID when the coprocess ends)
on_exit "kill $hold_pid 2>/dev/null"
read -r -t 30 held <&"${HOLD[0]}" || fail "could not map $hold hugetlb pages"
expect_eq "$held" "held $hold" "holding $hold pages in use"
before=$(real_nr)
as_nobody --release
expect_rc 1 "release below the pages in use refused"
expect_err "in use or reserved" "refusal names the reason"
expect_eq "$(real_nr)" "$before" "pool not shrunk while pages are in use"
exec {HOLD[1]}>&-
wait "$hold_pid" || true
as_nobody --release
expect_rc 0 "release after the pages are free"
expect_eq "$(real_nr)" "$base" "pool back to where it started"
[[ $base_node0 == none ]] || expect_eq "$(cat "$node0/nr_hugepages")" "$base_node0" "node 0 back too"
