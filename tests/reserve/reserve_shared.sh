#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The real pool, two real users: a release must not take pages promised to
# another user whose processes share hugetlb pages.  The victim (uid 4242)
# holds a grant of 4 and maps 2 pages in two processes, so the kernel's
# HugetlbPages counts them twice (4 pages); the attacker holds its own pages
# in a hugetlb memfd (HugetlbPages 0) and runs --release.  For each way of
# sharing (MAP_SHARED anonymous memory and fork, a hugetlb memfd, a SysV
# SHM_HUGETLB segment, a CLONE_VM child):
#  - as nobody (the setgid helper, which cannot read the victim's mappings):
#    nothing is released, the attacker stays charged for its 2 pages, and
#    while the victim's mappings stay unread its whole grant stays promised;
#  - as uid 4545 with the helper run with euid 0 (as the Slurm epilog runs
#    a user's release: every process is read), holding 2 of its grant of 4
#    in a memfd: exactly its 2 other pages are released, its 2 stay charged;
# and after each, the victim maps the rest of its grant (2 pages).
# Holds the machine-wide pool lock for its whole run.
source "$(dirname "$0")/lib.sh"
real_pool_setup
cp "$RESERVE_TOOLS/hugetlb_share" "$INST/tools/"
chmod a+rx "$INST/tools/hugetlb_share"
VICTIM=(setpriv --reuid=4242 --regid=65534 --clear-groups)
# SHM_HUGETLB needs the group of vm.hugetlb_shm_group (or CAP_IPC_LOCK).
shm_group=$(</proc/sys/vm/hugetlb_shm_group)
on_exit "echo $shm_group >/proc/sys/vm/hugetlb_shm_group"
echo 65534 >/proc/sys/vm/hugetlb_shm_group
# Free pages the pool had before the test would cover for the victim: out.
echo $(($(real_nr) - $(spare))) >"$sys/nr_hugepages"
start=$(real_nr)
expect_eq "$(spare)" 0 "no free pages before the shared cases"

hugetlb_kb_of() { # uid: the sum of HugetlbPages over its processes (what the kernel reports)
  cat /proc/[0-9]*/status 2>/dev/null | awk -v u="$1" '$1 == "Name:" { mine = 0 }
    $1 == "Uid:" && $2 == u && $3 == u { mine = 1 } $1 == "HugetlbPages:" && mine { s += $2 } END { print s + 0 }' || true
}
held_by() { # uid: pages of 2048 kB the grant table charges to it
  awk -v u="$1" '$1 == u && $3 == 2048 { s += $4 } END { print s + 0 }' "$REAL/var/lib/hugepool/grants"
}
victim_maps_rest() { # label: the victim maps the 2 pages of its grant it has not mapped yet
  set +e
  OUT=$("${VICTIM[@]}" "$INST/tools/hugetlb_hold" 2 </dev/null 2>&1)
  RC=$?
  set -e
  expect_eq "$RC/$OUT" "0/held 2" "$1: the victim maps the rest of its grant"
}
privileged_release() { # uid: its --release run with euid 0, which reads every process; sets OUT, RC
  set +e
  OUT=$(setpriv --ruid="$1" --euid=0 --regid=65534 --clear-groups "$HELPER" --release 2>&1)
  RC=$?
  set -e
  ERR=$OUT
}
declare -A HOLDER_FD HOLDER_PID
holder() { # name uid args...: a process that holds pages until its stdin closes; LINE: what it printed
  local name=$1 who=$2 fifo=$INST/$1.in out=$INST/$1.out fd
  shift 2
  rm -f "$fifo" "$out"
  mkfifo "$fifo"
  setpriv --reuid="$who" --regid=65534 --clear-groups "$@" <"$fifo" >"$out" 2>&1 9>&- &
  HOLDER_PID[$name]=$!
  on_exit "kill ${HOLDER_PID[$name]} 2>/dev/null"
  exec {fd}>"$fifo"
  HOLDER_FD[$name]=$fd
  for _ in $(seq 300); do [[ -s $out ]] && break; sleep 0.1; done
  LINE=$(head -n 1 "$out")
}
drop() { # name: the holder's stdin closes, it ends
  eval "exec ${HOLDER_FD[$1]}>&-"
  wait "${HOLDER_PID[$1]}" 2>/dev/null || true
}

for mode in anon memfd sysv clonevm; do
  # --- the attacker is nobody: the setgid helper ---
  as_user 4242 4
  as_nobody 2
  expect_eq "$(real_nr)" $((start + 6)) "$mode: victim granted 4, nobody 2"
  holder v 4242 "$INST/tools/hugetlb_share" "$mode" 2
  expect_eq "$LINE" "shared 2" "$mode: the victim maps 2 pages in two processes"
  expect_eq "$(hugetlb_kb_of 4242)" 8192 "$mode: the kernel's HugetlbPages of the victim's processes add up to 4 pages"
  holder a 65534 "$INST/tools/hugetlb_hold" --memfd 2
  expect_eq "$LINE" "held 2" "$mode: nobody holds 2 pages in a memfd, none mapped"
  as_nobody --release
  expect_rc 1 "$mode: nobody's release"
  expect_eq "$(real_nr)/$(held_by 65534)" "$((start + 6))/2" "$mode: the pool keeps the victim's pages; nobody is still charged for 2"
  victim_maps_rest "$mode (nobody)"
  drop a
  # The setgid helper cannot read the victim's mappings: it counts none of
  # them, so the victim's whole grant stays promised (fail closed).
  as_nobody --release
  expect_eq "$RC/$(real_nr)/$(held_by 65534)" "1/$((start + 6))/2" \
    "$mode: with its memfd closed, nobody's release is still refused while the victim's mappings cannot be read"
  expect_err "promised to other users" "$mode: the refusal says why"

  # --- the attacker's release reads every process (euid 0, as the epilog) ---
  as_user 4545 4
  expect_eq "$RC/$(real_nr)" "0/$((start + 10))" "$mode: uid 4545 granted 4"
  holder r 4545 "$INST/tools/hugetlb_hold" --memfd 2
  expect_eq "$LINE" "held 2" "$mode: uid 4545 holds 2 of its pages in a memfd"
  privileged_release 4545
  expect_eq "$RC/$(real_nr)/$(held_by 4545)" "1/$((start + 8))/2" \
    "$mode: the release gives back its 2 free pages, keeps the 2 in its memfd charged, leaves the victim's 2 ($OUT)"
  victim_maps_rest "$mode (every process read)"
  drop r
  privileged_release 4545
  expect_rc 0 "$mode: uid 4545's last release"
  drop v
  as_user 4242 --release
  expect_rc 0 "$mode: the victim's release once its processes have ended"
  as_nobody --release
  expect_eq "$RC/$(real_nr)/$(spare)" "0/$start/0" "$mode: all released, the pool as it was"
done
echo "$base" >"$sys/nr_hugepages"
