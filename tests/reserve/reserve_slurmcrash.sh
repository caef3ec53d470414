#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Crashes around a real single-node Slurm (slurm_lib.sh), a job of nobody
# with --hugepages=6:
#  1. slurmd killed (SIGKILL) in the middle of the job and started again:
#     the job's epilog still runs and gives the pages back, the registry and
#     the job's cgroup are gone;
#  2. the job prolog killed (SIGKILL) while it waits for the helper's lock:
#     Slurm drains the node (its rule for a failed prolog), nothing was
#     granted or charged, the pool is at its base; the node is resumed;
#  3. the job epilog killed the same way: the node is drained, the user's
#     6 pages stay charged to them in the table (nothing lost, nothing
#     charged to no one); once resumed, the user's own release gives them
#     back and the pool is at its base.
# Holds the machine-wide pool lock for its whole run, about 5 minutes (the
# node's drains and Slurm's timeouts): run only with RESERVE_SLURM_CRASH=1.
source "$(dirname "$0")/lib.sh"
if [[ ${RESERVE_SLURM_CRASH:-0} != 1 ]]; then
  echo "SKIP: a 5-minute run on the pool lock; set RESERVE_SLURM_CRASH=1"
  exit 77
fi
real_pool_setup
source "$(dirname "$0")/slurm_lib.sh"

hold_lock() { # the helper's lock held here until release_lock
  flock -o "$LOCK" sleep 300 9>&- &
  holder=$!
  for _ in $(seq 50); do grep -q "FLOCK .* $holder " /proc/locks && return 0; sleep 0.1; done
  fail "could not take the helper's lock"
}
release_lock() { kill "$holder"; wait "$holder" 2>/dev/null || true; }
kill_waiter() { # what: kills the Slurm process waiting for the lock
  local pids=()
  for _ in $(seq 150); do
    mapfile -t pids < <(lock_waiters)
    ((${#pids[@]} > 0)) && break
    sleep 0.2
  done
  ((${#pids[@]} > 0)) || fail "$1 never waited for the lock
$(logs)"
  kill -KILL "${pids[@]}"
  pass "$1 killed while it waited for the lock (pid ${pids[*]}: $(tr '\0' ' ' <"/proc/${pids[0]}/cmdline" 2>/dev/null || echo gone))"
}

# --- 1. slurmd killed mid-job and started again ---
job_bg 8
for _ in $(seq 150); do [[ $(real_nr) == $((base + 6)) ]] && break; sleep 0.2; done
expect_eq "$(real_nr)" $((base + 6)) "the prolog granted 6 pages"
kill -KILL "$sd"
wait "$sd" 2>/dev/null || true
slurmd -D -f "$SLURM_CONF" >>"$T/slurmd.out" 2>&1 9>&- &
sd=$!
pass "slurmd killed mid-job and started again"
wait "$job" || true
wait_nr "$base" || fail "after slurmd's restart the epilog did not give the pages back: pool $(real_nr)
$(logs)"
pass "the job's epilog ran after the restart: the pool is back at $base"
expect_eq "$(real_charged)/$(ls -A "$REAL/run/hugepool/jobs" | wc -l)/$(cg_jobs | wc -l)" "0/0/0" \
  "nothing charged, no registry entry, no job cgroup left"
wait_idle

# --- 2. the prolog killed ---
hold_lock
job_bg 2
kill_waiter "the job prolog"
release_lock
sleep 2
scancel --user=nobody 2>/dev/null || true
kill "$job" 2>/dev/null || true
wait "$job" 2>/dev/null || true
expect_eq "$(real_nr)/$(real_charged)" "$base/0" "nothing granted, nothing charged"
if grep -q '^\(intent\|release\) ' "$TABLE"; then fail "an intent was left: $(cat "$TABLE")"; fi
resume
pass "the node resumed after the killed prolog"

# --- 3. the epilog killed ---
job_bg 2
for _ in $(seq 150); do [[ $(real_nr) == $((base + 6)) ]] && break; sleep 0.2; done
expect_eq "$(real_nr)" $((base + 6)) "the prolog granted 6 pages"
hold_lock
wait "$job" || true
kill_waiter "the job epilog"
release_lock
sleep 1
expect_eq "$(real_nr)/$(real_charged)" "$((base + 6))/6" "the 6 pages stay charged to the user: nothing lost"
resume
for j in "$REAL"/run/hugepool/jobs/*; do [[ -e $j ]] && rm -f "$j"; done # the administrator's clean-up
for d in $(cg_jobs); do rmdir "$d"; done
as_nobody --release
expect_eq "$RC/$(real_nr)/$(real_charged)" "0/$base/0" "the user's release gives them back: the pool is at its base"
echo "figures: slurmd_kills=1 prolog_kills=1 epilog_kills=1 pages_lost=$(($(real_nr) - base))"
