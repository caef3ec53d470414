#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The Slurm plugin's job prolog and job epilog killed (SIGKILL) inside a
# real slurmd (slurm_lib.sh) at each of their system calls on the helper's
# state and the pool (RESERVE_SLURM_CRASH=1: also the job registry and the
# job cgroups, 136 jobs, ~15 minutes): strace, attached to slurmd and
# following the processes it starts, traces only calls on those files (-P)
# and kills the process at the Nth call of one
# name (counted per process), one job per call of a reference trace.  A job
# of nobody with --hugepages=6 each time.  After each kill, from the kernel's
# view (sysfs) and the table on disk:
#  - the pool holds exactly what the table charges plus what its intent
#    names: nothing charged to no one;
#  - a no-op call by root settles any intent (a killed epilog's release is
#    finished) and leaves no intent, the pool = base + charged;
#  - once the node is resumed, the administrator has removed what a killed
#    job left (its registry entry, its cgroup: Slurm drains the node after a
#    failed prolog or epilog, and a person looks) and the user has released,
#    the pool is back at its base with nothing charged.
# Prints the figures setuid-helper/README.md records.  Holds the pool lock
# for its whole run (a node drain and resume per kill, about 4 minutes).
source "$(dirname "$0")/lib.sh"
command -v strace >/dev/null || {
  echo "SKIP: strace is not installed (.ci/deps)"
  exit 77
}
real_pool_setup
source "$(dirname "$0")/slurm_lib.sh"
runs=0 kills=0 checks=0
check() { # what got want
  checks=$((checks + 1))
  [[ $2 == "$3" ]] || fail "$1: expected '$3', got '$2' (table: $(tr '\n' '|' <"$TABLE"))
$(logs)"
}

job_end() {
  scancel --user=nobody 2>/dev/null || true
  kill "$job" 2>/dev/null || true
  wait "$job" 2>/dev/null || true
}

# strace on slurmd and what it starts from now on: only calls on the lock,
# the table and the pool; with RESERVE_SLURM_CRASH=1 also on the job
# registry and the job's entries in it, the job cgroups' directory and the
# job's cgroup (calls on a descriptor or relative to a directory descriptor
# count as calls on its file).  The job ids differ from job to job, the
# calls' names and counts do not.
next_job() {
  local job
  job=$(scontrol show config | awk '$1 == "NEXT_JOB_ID" { print $3 }')
  [[ -n $job ]] || fail "no NEXT_JOB_ID in scontrol show config"
  echo "$job"
}
paths() { # job
  local job=$1 jobs=$REAL/run/hugepool/jobs
  echo -P "$LOCK" -P "$TABLE" -P "$sys/nr_hugepages" -P "$node0/nr_hugepages"
  [[ ${RESERVE_SLURM_CRASH:-0} == 1 ]] || return 0
  echo -P "$jobs" -P "$jobs/$job" -P "$jobs/$job.failed" -P "$jobs/$job.iso" -P "$jobs/$job.kept"
  [[ -z $cg_mnt ]] || echo -P "$cg_mnt/hugepool" -P "$cg_mnt/hugepool/job_$job"
}
tracer=
trace_on() { # job strace-args...
  local p
  p=$(paths "$1" | tr '\n' ' ')
  shift
  # shellcheck disable=SC2086 # (the paths have no spaces: the test's own directories)
  strace -f -qq -p "$sd" $p "$@" 9>&- 2>>"$T/strace.err" &
  tracer=$!
  for _ in $(seq 100); do
    [[ $(awk '/^TracerPid:/ { print $2 }' "/proc/$sd/status") == "$tracer" ]] && return 0
    sleep 0.05
  done
  fail "strace did not attach to slurmd: $(cat "$T/strace.err")"
}
trace_off() {
  [[ -n $tracer ]] || return 0
  kill -INT "$tracer" 2>/dev/null || true
  wait "$tracer" 2>/dev/null || true
  tracer=
}
on_exit trace_off
# Waits until strace's output says a traced process was killed: 0, or 1
# after the seconds given.
killed_within() { # file seconds
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    grep -q 'killed by SIGKILL' "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
# The calls of one process of a trace, in order, as "name ordinal".
points_of() { # trace-file pid
  awk -v pid="$2" '$1 == pid { sub(/^[0-9]+ +/, ""); if (match($0, /^[a-z_0-9]+\(/)) { n = substr($0, 1, RLENGTH - 1); print n, ++c[n] } }' "$1"
}


# After a kill: every page accounted for; root's no-op call settles the
# intent; the administrator's clean-up; the user's release; back at base.
after_kill() { # where
  job_end
  # (an epilog that Slurm still runs for the job finishes first)
  for _ in $(seq 50); do [[ -n $(lock_waiters) ]] || break; sleep 0.2; done
  check "$1: pool gained = charged + pending intent" $(($(real_nr) - base)) $(($(real_charged) + $(real_pending)))
  "$HELPER" --release >/dev/null 2>&1 || true
  check "$1: root's next call leaves no intent, pool = base + charged" \
    "$(grep -Ec '^(intent|release) ' "$TABLE")/$(($(real_nr) - base))" "0/$(real_charged)"
  resume
  for j in "$REAL"/run/hugepool/jobs/*; do [[ -e $j ]] && rm -f "$j"; done
  for d in $(cg_jobs); do rmdir "$d" 2>/dev/null || true; done
  as_nobody --release
  check "$1: the user's release brings the pool back to its base ($ERR)" "$(real_nr)/$(real_charged)" "$base/0"
}

# slurmd may go on retrying a killed prolog's "prolog complete" message
# (every 15 s, for minutes: in one CI run, for a job killed several kills
# earlier), and each answer drains the node again, in the middle of a later
# kill's checks.  A new slurmd has no such retry: one after each prolog kill,
# once every page of the killed job is settled.
slurmd_renew() {
  slurmd_stop
  scontrol update nodename="$host" state=resume 2>/dev/null || true
  slurmd_start
}

# --- the reference: one job, its prolog's and its epilog's calls ---
trace_on "$(next_job)" -o "$T/ref"
job_bg 2
wait "$job" || fail "the reference job failed: $(cat "$T/job.out")"
wait_nr "$base" || fail "the reference job's epilog did not give the pages back"
trace_off
mapfile -t pids < <(awk '$2 ~ /^[a-z_0-9]+\(/ && !seen[$1]++ { print $1 }' "$T/ref")
((${#pids[@]} >= 2)) || fail "the reference trace shows ${#pids[@]} processes, expected a prolog and an epilog: $(cut -c1-100 "$T/ref")"
mapfile -t prolog_points < <(points_of "$T/ref" "${pids[0]}")
mapfile -t epilog_points < <(points_of "$T/ref" "${pids[-1]}")
((${#prolog_points[@]} >= 5 && ${#epilog_points[@]} >= 5)) ||
  fail "reference too short: prolog ${#prolog_points[@]}, epilog ${#epilog_points[@]} calls"
pass "reference: the prolog makes ${#prolog_points[@]} calls on the state and the pool, the epilog ${#epilog_points[@]}"

# --- the prolog killed at each of them ---
for pt in "${prolog_points[@]}"; do
  read -r name ord <<<"$pt"
  : >"$T/inj"
  trace_on "$(next_job)" -o "$T/inj" -e inject="$name:signal=KILL:when=$ord"
  job_bg 2
  runs=$((runs + 1))
  if killed_within "$T/inj" 30; then kills=$((kills + 1)); fi
  trace_off # before the epilog, which would count its own calls
  after_kill "prolog killed at $name #$ord"
  slurmd_renew
done
prolog_kills=$kills
pass "the prolog killed at each of its ${#prolog_points[@]} calls ($prolog_kills kills): every page settled"

# --- the epilog killed at each of them ---
for pt in "${epilog_points[@]}"; do
  read -r name ord <<<"$pt"
  id=$(next_job)
  job_bg 3
  for _ in $(seq 150); do [[ $(real_nr) == $((base + 6)) ]] && break; sleep 0.2; done
  check "epilog #$name $ord: the prolog granted 6 pages" "$(real_nr)" $((base + 6))
  : >"$T/inj"
  trace_on "$id" -o "$T/inj" -e inject="$name:signal=KILL:when=$ord"
  wait "$job" 2>/dev/null || true
  runs=$((runs + 1))
  if killed_within "$T/inj" 30; then kills=$((kills + 1)); fi
  trace_off
  after_kill "epilog killed at $name #$ord"
done
pass "the epilog killed at each of its ${#epilog_points[@]} calls ($((kills - prolog_kills)) kills): every page settled"

lost=$(($(real_nr) - base))
check "pages lost" "$lost" 0
echo "figures: runs=$runs kills=$kills checks=$checks pages_lost=$lost" \
  "(prolog: ${#prolog_points[@]} calls, epilog: ${#epilog_points[@]})"
