#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Load, crashes and the guarantee on the real pool, for RESERVE_LOAD_SECONDS
# (60 by default; longer runs: set it):
#  - 8 users (uids 5101-5108) x 3 loops of the installed setgid helper:
#    grants of 1-8 pages followed by a mapping (touched) of a third of the
#    grant, status calls, releases; a user's releases wait for that user's
#    own mappings to end (as a job's epilog runs after its tasks), nothing
#    else is ordered;
#  - 2 root-side loops as the Slurm plugin makes its calls: a grant and a
#    release run with euid 0 for a random user (prolog, epilog);
#  - a SIGKILL of a random running helper every 0.5 s.
# Checked all along (a monitor holding the helper's lock shared, as
# --status does, 4 times a second): the pool above its base equals what the
# table charges plus what its intent names (never a page charged to no one,
# never one charged twice), no user above max_pages, --status's total equals
# sysfs (the helper killed at --status too); after every operation: no mapping inside a grant fails (the
# guarantee), no call waits for the lock past the helper's 30 s.  At the
# end every user is released and the pool is back at its base.  Prints the
# figures setuid-helper/README.md records.
source "$(dirname "$0")/lib.sh"
SECONDS_RUN=${RESERVE_LOAD_SECONDS:-60}
MAX=32
real_pool_setup - <<CONF
max_pages $MAX
max_fraction 0.5
min_free_mb 1024
group nogroup
CONF
echo $(($(real_nr) - $(spare))) >"$sys/nr_hugepages" # no free pages but what the helper adds
base=$(real_nr)
TABLE=$REAL/var/lib/hugepool/grants
LOCK=$REAL/var/lib/hugepool/lock
L=$INST/load
mkdir -m 0755 "$L"
USERS=(5101 5102 5103 5104 5105 5106 5107 5108)
ln -s "$HELPER" "$L/status-helper" # the monitor's: a name the killer does not match
end=$(($(date +%s) + SECONDS_RUN))

# One helper call, timed, its outcome appended to the loop's log:
# "op rc ms" and "lockwait" if it gave up on the lock.
call() { # log uid euid0|user args...
  local log=$1 uid=$2 how=$3 t0 rc
  shift 3
  t0=$(date +%s%N)
  set +e
  if [[ $how == euid0 ]]; then
    setpriv --ruid="$uid" --euid=0 --regid=65534 --clear-groups "$HELPER" "$@" >"$log.out" 2>&1
  else
    setpriv --reuid="$uid" --regid=65534 --clear-groups "$HELPER" "$@" >"$log.out" 2>&1
  fi
  rc=$?
  set -e
  echo "${1#--}$how $rc $((($(date +%s%N) - t0) / 1000000))" >>"$log"
  if grep -q "held the lock" "$log.out"; then echo lockwait >>"$log"; fi
  return $rc
}
map() { # log uid pages: mapped and touched inside the user's grant
  local rc out
  set +e
  out=$(setpriv --reuid="$2" --regid=65534 --clear-groups "$INST/tools/hugetlb_map" "$3" 2>&1)
  rc=$?
  set -e
  echo "map $rc" >>"$1"
  ((rc == 0)) || echo "mapfail $3 pages: $out" >>"$1"
}

user_loop() { # uid n
  local uid=$1 log=$L/user.$1.$2 r g
  while (($(date +%s) < end)); do
    r=$((RANDOM % 10))
    if ((r < 6)); then
      g=$((RANDOM % 8 + 1))
      (
        flock -s 9
        if call "$log" "$uid" user "$g"; then map "$log" "$uid" $(((g + 2) / 3)); fi
      ) 9>"$L/lock.$uid"
    elif ((r < 8)); then
      call "$log" "$uid" user --status || true
    else
      (flock -x 9 && call "$log" "$uid" user --release || true) 9>"$L/lock.$uid"
    fi
  done
}
root_loop() { # n
  local log=$L/root.$1 uid
  while (($(date +%s) < end)); do
    uid=${USERS[RANDOM % ${#USERS[@]}]}
    if ((RANDOM % 2)); then
      (flock -s 9 && call "$log" "$uid" euid0 $((RANDOM % 8 + 1)) || true) 9>"$L/lock.$uid"
    else
      (flock -x 9 && call "$log" "$uid" euid0 --release || true) 9>"$L/lock.$uid"
    fi
  done
}
killer() {
  local pids
  while (($(date +%s) < end)); do
    sleep 0.5
    mapfile -t pids < <(pgrep -f "^$HELPER" || true)
    ((${#pids[@]} > 0)) || continue
    kill -KILL "${pids[RANDOM % ${#pids[@]}]}" 2>/dev/null && echo kill >>"$L/killer" || true
  done
}
# The pool above its base = charged + pending intent; no user over max_pages;
# --status's total = sysfs.  Run under the helper's lock, shared.
snapshot_ok() {
  local nr
  nr=$(real_nr)
  awk -v nr="$nr" -v base="$base" -v max="$MAX" '
    $1 == "intent" { d = nr - $5; if (d < 0) d = 0; if (d > $6) d = $6; p += d; next }
    $1 == "release" { d = $5 - nr; if (d < 0) d = 0; if (d > $6) d = $6; p += $6 - d; next }
    $1 ~ /^[0-9]+$/ { c += $4; u[$1] += $4 }
    END { for (k in u) if (u[k] > max) { print "uid " k " holds " u[k] " > max_pages"; exit 1 }
          if (nr - base != c + p) { print "pool +" nr - base " != charged " c " + pending " p; exit 1 } }' "$TABLE"
}
# Both under the helper's lock, shared: no helper changes the pool meanwhile.
status_ok() {
  local st
  st=$("$STATUS_HELPER" --status 2>/dev/null | awk '/^2048 kB pages, all nodes:/ { print $7 }')
  [[ $st == "$(real_nr)" ]] || { echo "--status total $st, sysfs $(real_nr)"; return 1; }
}
monitor() {
  local n=0 bad
  while (($(date +%s) < end + 2)); do
    sleep 0.25
    bad=$(flock -s "$LOCK" bash -c "$(declare -f snapshot_ok status_ok real_nr)
      sys=$sys base=$base MAX=$MAX TABLE=$TABLE STATUS_HELPER=$L/status-helper; snapshot_ok && status_ok") ||
      echo "bad: $bad ($(tr '\n' '|' <"$TABLE"))" >>"$L/monitor"
    n=$((n + 1))
  done
  echo "$n" >"$L/checks"
}

pids=()
for u in "${USERS[@]}"; do for n in 1 2 3; do user_loop "$u" "$n" & pids+=($!); done; done
root_loop 1 & pids+=($!)
root_loop 2 & pids+=($!)
killer & pids+=($!)
monitor &
mon=$!
for p in "${pids[@]}"; do wait "$p" || fail "a load loop failed"; done
wait $mon

# Every user released (as the epilogs would), the pool back at its base.
for u in "${USERS[@]}"; do
  call "$L/final" "$u" euid0 --release || fail "final release of $u: $(cat "$L/final.out")"
done
expect_eq "$(real_nr)/$(awk '$1 ~ /^[0-9]+$/' "$TABLE" | wc -l)" "$base/0" \
  "every user released: the pool back at its base, nothing charged"

st=$("$HELPER" --status | awk '/^2048 kB pages, all nodes:/ { print $7 }')
expect_eq "$st" "$(real_nr)" "--status agrees with sysfs at the end"
ops=$(cat "$L"/user.* "$L"/root.* | grep -cvE '^(map|mapfail|lockwait)' || true)
grants=$(cat "$L"/user.* "$L"/root.* | grep -cE '^[0-9]+(user|euid0) 0 ' || true)
releases=$(cat "$L"/user.* "$L"/root.* | grep -cE '^release(user|euid0) 0 ' || true)
maps=$(cat "$L"/user.* | grep -c '^map 0' || true)
kills=$(cat "$L/killer" 2>/dev/null | wc -l)
killed=$(cat "$L"/user.* "$L"/root.* | grep -cE '^[^ ]+ 137 ' || true)
slowest=$(cat "$L"/user.* "$L"/root.* | awk 'NF == 3 && $3 > m { m = $3 } END { print m / 1000 }')
[[ ! -s $L/monitor ]] || fail "invariant broken: $(head -3 "$L/monitor")"
if cat "$L"/user.* | grep -q mapfail; then fail "a mapping inside a grant failed: $(grep -h mapfail "$L"/user.* | head -3)"; fi
if cat "$L"/user.* "$L"/root.* | grep -q lockwait; then fail "a call gave up waiting for the lock"; fi
pass "pool = charged + pending intent, no user over max_pages, --status = sysfs at all $(cat "$L/checks") checks"
pass "$maps mappings inside grants, none failed; no call gave up on the lock (slowest ${slowest} s)"
echo "figures: seconds=$SECONDS_RUN operations=$ops grants=$grants releases=$releases maps=$maps maps_failed=0" \
  "kills_sent=$kills calls_killed=$killed checks=$(cat "$L/checks")" \
  "slowest_call_s=$slowest pages_lost=$(($(real_nr) - base))"
