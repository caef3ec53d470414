#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A hostile neighbour on the real pool, with the helper run as the Slurm
# epilog runs it (euid 0: every process is read).
#  1. The lock time is bounded whatever another user does: the attacker
#     (uid 4343) maps its grant of 1 page, splits its address space into
#     64,000 mappings (a 45 MB smaps), starts 400 processes sharing it
#     (CLONE_VM) and 100 plain forks, and holds 100,000 descriptors (19,000
#     a process: the open-file limit here).  A root
#     release of another user, a root release of the attacker itself (its
#     own processes counted in full) and a user's grant made meanwhile each
#     finish within BOUND s (the helper's RESERVE_SCAN_MS of 15 s plus its
#     writes); the victim (uid 4242, grant 4, mapping 2) then maps the rest
#     of its grant.
#  2. A hugetlb memfd handed to another user over a unix socket: the
#     giver's root release never takes the receiver's grant, whether the
#     receiver holds the memfd mapped or only open: the receiver can always
#     map what it was granted.
# Holds the machine-wide pool lock for its whole run.
source "$(dirname "$0")/lib.sh"
real_pool_setup
cp "$RESERVE_TOOLS/hugetlb_neighbour" "$INST/tools/"
chmod a+rx "$INST/tools/hugetlb_neighbour"
BOUND=20
# Free pages the pool had before the test would cover for the victim: out.
echo $(($(real_nr) - $(spare))) >"$sys/nr_hugepages"
start=$(real_nr)

declare -A HOLDER_FD HOLDER_PID
holder() { # name wait-s command...: runs until its stdin closes; LINE: what it printed first
  local name=$1 wait=$2 fifo=$INST/$1.in out=$INST/$1.out fd
  shift 2
  rm -f "$fifo" "$out"
  mkfifo "$fifo"
  "$@" <"$fifo" >"$out" 2>&1 9>&- &
  HOLDER_PID[$name]=$!
  on_exit "kill ${HOLDER_PID[$name]} 2>/dev/null"
  exec {fd}>"$fifo"
  HOLDER_FD[$name]=$fd
  for _ in $(seq $((wait * 10))); do [[ -s $out ]] && break; sleep 0.1; done
  LINE=$(head -n 1 "$out")
}
drop() { # name
  eval "exec ${HOLDER_FD[$1]}>&-"
  wait "${HOLDER_PID[$1]}" 2>/dev/null || true
}
as() { local uid=$1; shift; setpriv --reuid="$uid" --regid=65534 --clear-groups "$@"; }
timed() { # command...: sets RC, OUT, SECS (wall time, 0.01 s)
  local t0 t1
  t0=$(date +%s%N)
  set +e
  OUT=$("$@" 2>&1)
  RC=$?
  set -e
  t1=$(date +%s%N)
  SECS=$(awk -v d=$((t1 - t0)) 'BEGIN { printf "%.2f", d / 1e9 }')
}
root_release() { setpriv --ruid="$1" --euid=0 --regid=65534 --clear-groups "$HELPER" --release; }
within() { awk -v s="$1" -v b="$BOUND" 'BEGIN { exit !(s <= b) }'; }
held_by() { awk -v u="$1" '$1 == u && $3 == 2048 { s += $4 } END { print s + 0 }' "$REAL/var/lib/hugepool/grants"; }

# --- 1. the round-5 attacker ---
as_user 4242 4
as_user 4343 1
as_user 4545 2
expect_eq "$(real_nr)" $((start + 7)) "victim 4, attacker 1, a third user 2 granted"
holder v 10 as 4242 "$INST/tools/hugetlb_hold" 2
expect_eq "$LINE" "held 2" "the victim maps 2 of its 4 pages"
holder a 120 prlimit --nofile=20000:20000 setpriv --reuid=4343 --regid=65534 --clear-groups \
  "$INST/tools/hugetlb_neighbour" attack 64000 400 100 100000
expect_eq "$LINE" ready "the attacker: 64,000 mappings, 400 CLONE_VM processes, 100 forks, 100,000 descriptors"
procs=$(ps -o pid= -u 4343 | wc -l)
smaps_mb=$(($(wc -c <"/proc/${HOLDER_PID[a]}/smaps") >> 20))
pass "the attacker runs $procs processes; one smaps is $smaps_mb MB"
victim_pool=$(real_nr)

# A user's grant while a root release of another user reads the attacker.
(timed root_release 4545; echo "$RC $SECS" >"$INST/rel.out") &
rel=$!
sleep 0.3
t0=$(date +%s%N)
as_user 4646 1
SECS=$(awk -v d=$(($(date +%s%N) - t0)) 'BEGIN { printf "%.2f", d / 1e9 }')
within "$SECS" || fail "a user's grant during a root release took $SECS s: $ERR"
expect_eq "$RC" 0 "a user's grant made during the root release succeeds ($SECS s)"
user_grant=$SECS
wait $rel
read -r RC SECS <"$INST/rel.out"
within "$SECS" || fail "a root release of another user took $SECS s (bound $BOUND s)"
pass "a root release of another user finished in $SECS s (exit $RC)"
root_other=$SECS
(( $(real_nr) >= victim_pool - 2 + 1 )) || fail "the root release took more than the third user's 2 pages"
timed root_release 4343
within "$SECS" || fail "the attacker's own root release took $SECS s"
pass "the attacker's own root release (its 100,000 descriptors counted) finished in $SECS s (exit $RC)"
root_self=$SECS
expect_eq "$(held_by 4343)" 1 "the attacker's release keeps the page its processes map"
set +e
OUT=$(as 4242 "$INST/tools/hugetlb_hold" 2 </dev/null 2>&1)
RC=$?
set -e
expect_eq "$RC/$OUT" "0/held 2" "the victim maps the rest of its grant while the attacker runs"
drop a
drop v
for _ in $(seq 100); do [[ -z $(ps -o pid= -u 4343) ]] && break; sleep 0.1; done
for u in 4242 4343 4545 4646; do root_release $u >/dev/null || fail "release of $u: $(root_release $u 2>&1)"; done
expect_eq "$(real_nr)" "$start" "every grant released: the pool is back at its start"

# --- 2. a hugetlb memfd handed over a unix socket ---
for how in nomap map; do
  as_user 4747 2
  as_user 4848 2
  mkdir -p -m 1777 "$INST/socks"
  sock=$INST/socks/$how
  holder r 10 as 4848 "$INST/tools/hugetlb_neighbour" take "$sock" "$how"
  for _ in $(seq 50); do [[ -S $sock ]] && break; sleep 0.1; done
  as 4747 "$INST/tools/hugetlb_neighbour" give "$sock" 2 </dev/null || fail "give"
  for _ in $(seq 50); do [[ -s $INST/r.out ]] && break; sleep 0.1; done
  expect_eq "$(head -n 1 "$INST/r.out")" "taken 4096" "$how: the receiver holds the giver's 2-page memfd"
  set +e
  root_release 4747 >/dev/null 2>&1
  set -e
  gave=$(held_by 4747)
  drop r # the memfd's pages go back to the pool
  set +e
  OUT=$(as 4848 "$INST/tools/hugetlb_hold" 2 </dev/null 2>&1)
  RC=$?
  set -e
  expect_eq "$RC/$OUT" "0/held 2" "$how: after the giver's root release (it keeps $gave), the receiver maps its grant"
  for u in 4747 4848; do root_release $u >/dev/null || fail "release of $u"; done
  expect_eq "$(real_nr)" "$start" "$how: the pool is back at its start"
done
echo "figures: attacker_processes=$procs smaps_mb=$smaps_mb root_release_other_s=$root_other" \
  "user_grant_s=$user_grant root_release_attacker_s=$root_self bound_s=$BOUND pages_lost=$(($(real_nr) - start))"
