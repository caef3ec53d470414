#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Crashes: the installed setgid helper, on the real pool, is killed by
# SIGKILL at every system call of a grant, of a release, and of a release
# run as the Slurm epilog runs it (euid 0) (strace --inject:
# one run per call, at the Nth call of each name a reference trace listed,
# so every step is hit, not some by chance).  After each kill, from the
# kernel's view (sysfs nr_hugepages, /proc/meminfo) and the table on disk:
#  - every page the pool gained is charged to the user or named by the
#    table's intent record (nothing charged to no one, nothing twice);
#  - the next call settles it and succeeds (the table is never corrupt),
#    leaving the pool at exactly what the table charges; a killed release's
#    shrink is finished by that call, whoever makes it (root, here);
#  - once the user has released, the pool is back at its base.
# Prints the figures setuid-helper/README.md records.
source "$(dirname "$0")/lib.sh"
command -v strace >/dev/null || {
  echo "SKIP: strace is not installed (.ci/deps)"
  exit 77
}
real_pool_setup
P=4 # pages per grant
runs=0 kills=0 checks=0 finished=0

check() { # what got want
  checks=$((checks + 1))
  [[ $2 == "$3" ]] || fail "$1: expected '$3', got '$2' (table: $(tr '\n' '|' <"$TABLE"))"
}

# How the helper runs: as nobody (the setgid helper), or as the Slurm epilog
# runs it for nobody (euid 0: it reads every process).
RUN=(-u nobody "$HELPER")
as_epilog() { RUN=(setpriv --ruid=65534 --euid=0 --regid=65534 --clear-groups "$HELPER"); }

# The system calls of one call, in order, as "name ordinal" (the ordinal-th
# call of that name).
trace_points() { # helper-args...
  strace -f -qq -o "$INST/trace" "${RUN[@]}" "$@" >/dev/null 2>&1 || true
  awk '{ sub(/^[0-9]+ +/, "") } match($0, /^[a-z_0-9]+\(/) { n = substr($0, 1, RLENGTH - 1); print n, ++c[n] }' \
    "$INST/trace"
}

# The helper, as nobody, killed on entry to the ordinal-th call of name.
killed_run() { # name ordinal helper-args...
  local name=$1 ord=$2 rc
  shift 2
  set +e
  strace -f -qq -o /dev/null -e trace="$name" -e inject="$name:signal=KILL:when=$ord" "${RUN[@]}" "$@" \
    >/dev/null 2>&1
  rc=$?
  set -e
  runs=$((runs + 1))
  if ((rc == 137)); then kills=$((kills + 1)); fi
}

# After a kill: every page accounted for, the next grant and release settle
# and succeed, the pool back at its base.
after_kill() { # where
  local nr
  nr=$(real_nr)
  check "$1: pool gained = charged + pending intent" $((nr - base)) $(($(real_charged) + $(real_pending)))
  check "$1: meminfo agrees with sysfs" "$(meminfo HugePages_Total)" "$nr"
  # The next call that takes the lock settles the intent, whoever makes it:
  # here root, holding nothing.  A killed release's shrink is finished (the
  # pool has room), not charged back.
  local release_left
  release_left=$(grep -c '^release ' "$TABLE" || true)
  "$HELPER" --release >/dev/null 2>&1 || true
  check "$1: the next call leaves no intent, pool = base + charged" \
    "$(grep -Ec '^(intent|release) ' "$TABLE")/$(($(real_nr) - base))" "0/$(real_charged)"
  if ((release_left > 0)); then
    finished=$((finished + 1))
    check "$1: the next call finished the killed release's shrink" "$(real_nr)/$(real_charged)" "$base/0"
  fi
  as_nobody $P
  check "$1: the next grant settles and succeeds ($ERR)" "$RC" 0
  check "$1: pool = base + grant, charged once" "$(real_nr)/$(real_charged)" "$((base + P))/$P"
  as_nobody --release
  check "$1: the release after it succeeds ($ERR)" "$RC" 0
  check "$1: pool back at its base, nothing charged, no intent" "$(real_nr)/$(real_charged)/$(grep -c . "$TABLE")" \
    "$base/0/2"
}

mapfile -t grant_points < <(trace_points $P)
as_nobody --release
check "reference release" "$RC/$(real_nr)" "0/$base"
as_nobody $P
mapfile -t release_points < <(trace_points --release)
check "reference traces" "$(real_nr)/$(real_charged)" "$base/0"
((${#grant_points[@]} > 20 && ${#release_points[@]} > 20)) ||
  fail "reference traces too short: ${#grant_points[@]} / ${#release_points[@]} calls"

for pt in "${grant_points[@]}"; do
  read -r name ord <<<"$pt"
  killed_run "$name" "$ord" $P
  after_kill "grant killed at $name #$ord"
done
grant_kills=$kills
pass "grant killed at each of its ${#grant_points[@]} system calls ($grant_kills kills): every page settled"

# A grant of P, then a release killed at each point given, as RUN runs it.
kill_releases() { # what points...
  local what=$1 pt name ord
  shift
  for pt in "$@"; do
    read -r name ord <<<"$pt"
    as_nobody $P
    check "grant before the $what" "$RC/$(real_nr)" "0/$((base + P))"
    killed_run "$name" "$ord" --release
    after_kill "$what killed at $name #$ord"
  done
}
kill_releases release "${release_points[@]}"
pass "release killed at each of its ${#release_points[@]} system calls ($((kills - grant_kills)) kills): every page settled"

# The epilog's release (euid 0), killed the same way.
as_epilog
as_nobody $P
mapfile -t epilog_points < <(trace_points --release)
check "reference epilog trace" "$(real_nr)/$(real_charged)" "$base/0"
before=$kills
kill_releases "epilog release" "${epilog_points[@]}"
pass "the epilog's release killed at each of its ${#epilog_points[@]} system calls ($((kills - before)) kills): every page settled"

lost=$(($(real_nr) - base))
check "pages lost" "$lost" 0
echo "figures: runs=$runs kills=$kills checks=$checks pages_lost=$lost shrinks_finished=$finished" \
  "(grant: ${#grant_points[@]} calls, release: ${#release_points[@]}, epilog release: ${#epilog_points[@]})"
