#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Slurm across the bed's nodes (run by bed.sh -n 2): slurmctld on node 0
# (192.0.2.10), one slurmd on each node under the node's own host name, and
# `srun -N2 --hugepages=K` with the SPANK plugin (the test build's realpool
# variant, as tests/reserve/reserve_slurm.sh).
#   slurm.sh
# Environment from ctest: RESERVE_BIN_DIR, RESERVE_TOOLS, RESERVE_TEST_DIR,
# RESERVE_SRC (tests/reserve/lib.sh).
#
# What makes each simulated node a node of its own for the plugin: its slurmd
# runs in a mount namespace and a cgroup namespace of its own.
#  - The cgroup namespace is rooted at <cgroup2>/<bed>-n<i>, and a cgroup2
#    file system mounted there: the plugin finds "the" hierarchy at its usual
#    place and makes the job's cgroup /hugepool/job_<id> in it, which is
#    <bed>-n<i>/hugepool/job_<id> on the host: one per node, none shared.
#  - The plugin's state directory (grant table) and job registry are per-node
#    directories bind-mounted over the compiled-in paths.  The helper's lock
#    alone is shared by the nodes: the one kernel pool of the bed is
#    read-modified-written by both nodes' prologs (nr_hugepages + K), and on
#    real nodes each has its own pool and its own lock.
#  - Slurm's own per-node paths come from %n in slurm.conf.
# Checks: both slurmds register (sinfo: 2 nodes idle); a 2-node job runs one
# task on each node, each in its node's own job cgroup with a reservation
# limit of K pages; the pool grows by K for each node's prolog while the job
# runs (2K: the nodes share one kernel pool) and is back where it was after
# the epilogs; no job cgroup, registry entry or grant left on either node.
# Also times the prolog+epilog per node (a job with --hugepages against one
# without) and the helper in a job; the figures go to the output.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../reserve/lib.sh"
for prog in munged slurmctld slurmd srun sinfo; do
  command -v "$prog" >/dev/null || { echo "SKIP: $prog not installed" >&2; exit 77; }
done
plugin=$RESERVE_BIN_DIR/hugepool_spank_realpool.so
[[ -f $plugin ]] || { echo "SKIP: SPANK plugin not built (libslurm-dev missing?)" >&2; exit 77; }
K=8
real_pool_setup - <<CONF
$(real_pool_conf)
require_job yes
CONF
cg_v2=$(awk '{ for (i = 7; i <= NF; i++) if ($i == "-") break; if ($(i + 1) == "cgroup2" && $4 == "/") { print $5; exit } }' /proc/self/mountinfo)
[[ -n $cg_v2 ]] && grep -qw hugetlb "$cg_v2/cgroup.controllers" ||
  { echo "SKIP: no cgroup2 hierarchy offering hugetlb (one per node is made from it)" >&2; exit 77; }
tag=$(basename "$BED_DIR")

T=$(mktemp -d /var/tmp/hugepool-bed-slurm.XXXXXX)
chmod 0755 "$T"
on_exit "rm -rf '$T'"
# hugetlb for the nodes' cgroups (put back as it was at the end)
if ! grep -qw hugetlb "$cg_v2/cgroup.subtree_control"; then
  echo +hugetlb >"$cg_v2/cgroup.subtree_control"
  on_exit "echo -hugetlb >'$cg_v2/cgroup.subtree_control'"
fi
node_cg() { echo "$cg_v2/$tag-n$1"; }
_node_cg_remove() { # the job cgroups (empty once the daemons are gone), then the node's own
  local cg d i # (i local: lib.sh's _run_cleanups counts with its own i)
  for i in 0 1; do
    cg=$(node_cg $i)
    [[ -d $cg ]] || continue
    for d in "$cg"/hugepool/job_* "$cg"/hugepool "$cg"/daemon "$cg"; do
      [[ -d $d ]] || continue
      [[ -z $(cat "$d/cgroup.procs" 2>/dev/null) ]] || cat "$d/cgroup.procs" | xargs -r kill -KILL 2>/dev/null || true
      for _ in $(seq 50); do rmdir "$d" 2>/dev/null && break; sleep 0.1; done
    done
  done
}
on_exit _node_cg_remove

# munge with a private key: one munged for the controller and srun (node 0's
# network, the host's files), and one for each slurmd, its socket bound over
# the common path in the node's mount namespace.  (One munged for all would
# see each node decode the same job credential: a replay it refuses.)
dd if=/dev/urandom of="$T/munge.key" bs=1024 count=1 status=none
chmod 0400 "$T/munge.key"
for m in "" -n0 -n1; do
  munged -F -f --key-file="$T/munge.key" --socket="$T/munge$m.sock" --pid-file="$T/munged$m.pid" \
    --log-file="$T/munged$m.log" --seed-file="$T/munged$m.seed" 9>&- >/dev/null 2>&1 &
  on_exit "kill $! 2>/dev/null; wait $! 2>/dev/null"
  for _ in $(seq 50); do [[ -S $T/munge$m.sock ]] && break; sleep 0.1; done
  [[ -S $T/munge$m.sock ]] || fail "munged did not start: $(cat "$T/munged$m.log")"
done

install -m 0755 "$plugin" "$T/hugepool_spank.so"
echo "required $T/hugepool_spank.so" >"$T/plugstack.conf"
n0=$tag-n0 n1=$tag-n1
a0=$(cut -d, -f1 <<<"$BED_HOSTS") a1=$(cut -d, -f2 <<<"$BED_HOSTS")
# Every daemon listens on its own node's address: the usual ports, nothing on
# the host's.
slurm_conf_write "$T" ClusterName=hugepoolbed "SlurmctldHost=$n0($a0)" <<EOF2
NodeName=$n0 NodeAddr=$a0 CPUs=1 RealMemory=500 State=UNKNOWN
NodeName=$n1 NodeAddr=$a1 CPUs=1 RealMemory=500 State=UNKNOWN
PartitionName=bed Nodes=$n0,$n1 Default=YES MaxTime=INFINITE State=UP
EOF2
chmod 0644 "$T/plugstack.conf"
logs() { tail -n 20 "$T"/slurmctld.log "$T"/slurmd-*.log "$T"/*.out 2>/dev/null; }
on_node() { "$BED_EXEC" "$@"; }

# (9>&-: the daemons and their children must not inherit the pool lock)
on_node 0 slurmctld -D -i -f "$SLURM_CONF" >"$T/slurmctld.out" 2>&1 9>&- &
ctld=$!
on_exit "kill $ctld 2>/dev/null; wait $ctld 2>/dev/null"

state=$REAL/var/lib/hugepool jobs=$REAL/run/hugepool/jobs
sds=()
for i in 0 1; do
  cg=$(node_cg $i) nd=$T/node$i
  mkdir "$cg"
  cp -a "$state" "$nd-state"
  cp -a "$jobs" "$nd-jobs"
  : >"$nd-state/grants.placeholder" && rm "$nd-state/grants.placeholder"
  # In the node: join its cgroup, then a cgroup and a mount namespace of its
  # own; mount cgroup2 (rooted at the node's cgroup) where the plugin looks,
  # the daemon in a leaf (the root of the node may then enable hugetlb for
  # its children); the node's state and registry over the compiled-in paths,
  # the one lock bound over the node's copy first.
  on_node $i sh -c "echo \$\$ >'$cg/cgroup.procs' && exec unshare --mount --cgroup --propagation private sh -c '
    umount -l \"$cg_v2\" && mount -t cgroup2 none \"$cg_v2\" && mkdir \"$cg_v2/daemon\" && echo \$\$ >\"$cg_v2/daemon/cgroup.procs\" &&
    mount --bind \"$state/lock\" \"$nd-state/lock\" && mount --rbind \"$nd-state\" \"$state\" &&
    mount --bind \"$nd-jobs\" \"$jobs\" && mount --bind \"$T/munge-n$i.sock\" \"$T/munge.sock\" && exec slurmd -D -f \"$SLURM_CONF\"'" >"$T/slurmd$i.out" 2>&1 9>&- &
  sds+=($!)
done
_slurmds_stop() {
  local p i
  for p in "${sds[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${sds[@]}"; do wait "$p" 2>/dev/null || true; done
  # what a node's slurmd left (steps, tasks) dies with it: by the node's cgroup
  for i in 0 1; do
    [[ -d $(node_cg $i) ]] && find "$(node_cg $i)" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -KILL 2>/dev/null
  done
  return 0
}
on_exit _slurmds_stop

states=
for _ in $(seq 60); do
  states=$(on_node 0 sinfo -h -N -o '%N %T' 2>/dev/null | sort | tr '\n' ' ' || true)
  [[ $states == "$n0 idle $n1 idle " ]] && break
  sleep 0.5
done
[[ $states == "$n0 idle $n1 idle " ]] || fail "the two slurmds did not register idle (sinfo: '$states')
$(logs)"
pass "two slurmds registered: $states"

srun_on_node0() { # srun -N2 on node 0 as nobody
  on_node 0 setpriv --reuid=65534 --regid=65534 --clear-groups env SLURM_CONF="$SLURM_CONF" \
    timeout 60 srun -N2 -n2 "$@"
}
as_job() { # srun_on_node0; sets OUT, RC
  set +e
  OUT=$(srun_on_node0 "$@" 2>&1)
  RC=$?
  set -e
}
base=$(real_nr)
# The job: each task says where it runs, what its cgroup is, what the pool
# is, and waits until the test has looked at the cgroups from outside.
go=$T/go
mkdir -m 1777 "$T/flags" # the tasks (nobody) say there that they run
srun_on_node0 --hugepages=$K bash -c "echo \$(hostname) nr \$(cat $sys/nr_hugepages) cg \$(cat /proc/self/cgroup | grep '^0::');
  $HELPER --status | sed \"s/^/\$(hostname): /\"; touch $T/flags/running.\$(hostname);
  for i in \$(seq 200); do [ -e $go ] && break; sleep 0.1; done" >"$T/job.out" 2>&1 &
job_pid=$!
for _ in $(seq 100); do [[ -e $T/flags/running.$n0 && -e $T/flags/running.$n1 ]] && break; sleep 0.1; done
[[ -e $T/flags/running.$n0 && -e $T/flags/running.$n1 ]] || { touch "$go"; wait $job_pid || true; fail "the job did not start on both nodes: $(cat "$T/job.out")
$(logs)"; }
during=$(real_nr)
for i in 0 1; do
  cgs=$(ls -d "$(node_cg $i)"/hugepool/job_* 2>/dev/null || true)
  [[ $(wc -w <<<"$cgs") -eq 1 ]] || { touch "$go"; fail "node $i: not one job cgroup: '$cgs'"; }
  lim=$(cg_pages "$cgs" max)
  echo "node $i: job cgroup ${cgs#$cg_v2/}, reservation limit $lim pages, tasks $(wc -l <"$cgs/cgroup.procs")"
  [[ $lim == "$K" ]] || { touch "$go"; fail "node $i: the job cgroup's limit is $lim, not $K"; }
  [[ -n $(cat "$cgs/cgroup.procs") ]] || { touch "$go"; fail "node $i: no task in the node's job cgroup"; }
  echo "node $i grants: $(grep -v '^end' "$T/node$i-state/grants" || true)"
done
touch "$go"
wait $job_pid && RC=0 || RC=$?
OUT=$(cat "$T/job.out")
echo "$OUT"
[[ $RC == 0 ]] || fail "srun -N2 failed (rc $RC): $OUT
$(logs)"
[[ $(grep -c " nr $((base + 2 * K)) cg 0::/hugepool/job_" <<<"$OUT") -eq 2 ]] ||
  fail "not both tasks saw the pool grown by $K per node (base $base) in their node's job cgroup: $OUT"
grep -q "^$n0 nr" <<<"$OUT" && grep -q "^$n1 nr" <<<"$OUT" || fail "the job did not run on both nodes: $OUT"
[[ $during == $((base + 2 * K)) ]] || fail "pool $during during the job, not $base + $K for each node"
pass "srun -N2 --hugepages=$K: a task on each node, each in its node's job cgroup (limit $K), pool $base -> $during"
wait_nr() { for _ in $(seq 60); do [[ $(real_nr) == "$1" ]] && return 0; sleep 0.5; done; return 1; }
wait_nr "$base" || fail "the epilogs did not give the pages back: pool $(real_nr), expected $base
$(logs)"
for i in 0 1; do
  for _ in $(seq 30); do [[ -z $(ls -d "$(node_cg $i)"/hugepool/job_* 2>/dev/null) ]] && break; sleep 0.2; done
  [[ -z $(ls -d "$(node_cg $i)"/hugepool/job_* 2>/dev/null) ]] || fail "node $i: job cgroup left"
  [[ -z $(ls -A "$T/node$i-jobs") ]] || fail "node $i: job registry not emptied: $(ls "$T/node$i-jobs")"
  ! grep -q '^65534 ' "$T/node$i-state/grants" || fail "node $i: a grant left: $(cat "$T/node$i-state/grants")"
done
pass "after the job: pool back to $base, no job cgroup, registry entry or grant on either node"

# Cost per node: a 2-node job with --hugepages=K against one without (the
# difference is the plugin's prolog+epilog work), and the helper in a job.
if [[ ${BED_SLURM_TIMES:-0} -gt 0 ]]; then
  t_job() { # srun args: "srun-ms back-ms": wall ms of a whole srun -N2 (allocation, prologs,
    # tasks), then until the pool is back (the epilogs, which run after srun returns)
    local t0 t1
    t0=$(date +%s%N)
    as_job "$@" true
    t1=$(date +%s%N)
    [[ $RC == 0 ]] || fail "timing job failed: $OUT"
    for _ in $(seq 600); do [[ $(real_nr) == "$base" ]] && break; sleep 0.01; done
    [[ $(real_nr) == "$base" ]] || fail "pool not back after a timing job"
    echo "$(((t1 - t0) / 1000000))/$((($(date +%s%N) - t1) / 1000000))"
  }
  with=() without=()
  for r in $(seq "$BED_SLURM_TIMES"); do
    without+=("$(t_job)")
    with+=("$(t_job --hugepages=$K)")
  done
  echo "srun -N2 wall ms / ms more until the pool is back, without --hugepages: ${without[*]}"
  echo "srun -N2 wall ms / ms more until the pool is back, with --hugepages=$K: ${with[*]}"
  as_job --hugepages=$K bash -c "for i in \$(seq 20); do t0=\$(date +%s%N); $HELPER $((K + 2)) >/dev/null; t1=\$(date +%s%N);
    $HELPER $K >/dev/null 2>&1; echo \$(hostname) helper_us \$(((t1 - t0) / 1000)); done"
  [[ $RC == 0 ]] || fail "helper timing job failed: $OUT"
  echo "$OUT" | awk '/helper_us/ {print $3}' | sort -n | awk '{v[NR] = $1} END {print "helper grant in a job, us: median", v[int((NR + 1) / 2)], "min", v[1], "max", v[NR], "n", NR}'
  wait_nr "$base" || fail "pool not back after the helper timing job"
fi
echo "slurm.sh: ok"
