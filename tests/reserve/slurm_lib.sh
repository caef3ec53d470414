# A real single-node Slurm for the reserve tests (sourced after lib.sh and
# real_pool_setup, which holds the pool lock): munge, slurmctld and slurmd on
# 127.0.0.1 with a generated config and the test build's SPANK plugin,
# stopped at the end.  Sets T (a scratch dir every user can reach), audit
# (the captured authpriv lines, empty if a system logger owns /dev/log).
for prog in munged slurmctld slurmd srun sinfo; do
  command -v "$prog" >/dev/null || { echo "SKIP: $prog not installed (apt-get install slurmctld slurmd slurm-client munge)" >&2; exit 77; }
done
plugin=$RESERVE_BIN_DIR/hugepool_spank_realpool.so
[[ -f $plugin ]] || fail "SPANK plugin not built (libslurm-dev missing?)"

cg_setup

T=$(mktemp -d /var/tmp/hugepool-slurm.XXXXXX)
chmod 0755 "$T"
on_exit "rm -rf '$T'"

# Capture the plugin's audit lines on /dev/log if no system logger owns it.
exec 8>/tmp/hugepool-devlog.lock
flock 8
devlog_drop_stale
audit=
if [[ ! -e /dev/log ]]; then
  audit=$T/audit.log
  : >"$audit"
  coproc LISTEN { exec python3 "$(dirname "$0")/devlog_listen.py" /dev/log "$audit" 9>&-; }
  listen_pid=$LISTEN_PID
  on_exit "kill $listen_pid; wait $listen_pid; rm -f /dev/log"
  read -r -t 10 ready <&"${LISTEN[0]}" && [[ $ready == ready ]] || fail "log listener did not start"
fi
host=$(hostname -s)
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; } # nothing listening
for _ in $(seq 50); do
  port=$((20000 + RANDOM % 20000))
  port_free "$port" && port_free $((port + 1)) && break
done

# munge with a private key and socket.
dd if=/dev/urandom of="$T/munge.key" bs=1024 count=1 status=none
chmod 0400 "$T/munge.key"
munged -F -f --key-file="$T/munge.key" --socket="$T/munge.sock" --pid-file="$T/munged.pid" \
  --log-file="$T/munged.log" --seed-file="$T/munged.seed" 9>&- &
munge_pid=$!
on_exit "kill $munge_pid 2>/dev/null; wait $munge_pid 2>/dev/null"
for _ in $(seq 50); do [[ -S $T/munge.sock ]] && break; sleep 0.1; done
[[ -S $T/munge.sock ]] || fail "munged did not start: $(cat "$T/munged.log")"

install -m 0755 "$plugin" "$T/hugepool_spank.so" # where srun, run by nobody, can load it
cat >"$T/plugstack.conf" <<EOF2
required $T/hugepool_spank.so
EOF2
slurm_conf_write "$T" ClusterName=hugepooltest "SlurmctldHost=$host(127.0.0.1)" SlurmctldPort=$port \
  SlurmdPort=$((port + 1)) <<EOF2
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP ${SLURM_PARTITION_EXTRA:-}
EOF2
chmod 0644 "$T/plugstack.conf"

# (9>&-: the daemons and their children must not inherit the pool lock)
slurmctld -D -i -f "$SLURM_CONF" >"$T/slurmctld.out" 2>&1 9>&- &
ctld=$!
on_exit "kill $ctld 2>/dev/null; wait $ctld 2>/dev/null"
logs() { tail -n 30 "$T"/slurmctld.log "$T"/slurmd-*.log "$T"/*.out 2>/dev/null; }
wait_idle() {
  state=
  for _ in $(seq 60); do
    state=$(sinfo -h -o %T 2>/dev/null || true)
    [[ $state == idle ]] && break
    sleep 0.5
  done
  [[ $state == idle ]] || fail "node not idle after 30 s (state '$state')
$(logs)"
}
sd=
slurmd_start() { # [wrapper...]: slurmd (and the jobs' steps) run under the wrapper
  "$@" slurmd -D -f "$SLURM_CONF" >>"$T/slurmd.out" 2>&1 9>&- &
  sd=$!
  wait_idle
}
slurmd_stop() { # SIGTERM; SIGKILL after 5 s (slurmd waits up to 2 minutes
  # for its threads, one of which may be sleeping between RPC retries)
  [[ -n $sd ]] || return 0
  kill "$sd" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$sd" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$sd" 2>/dev/null || true
  wait "$sd" 2>/dev/null || true
  sd=
}
on_exit slurmd_stop
slurmd_start
pass "single-node Slurm up on 127.0.0.1:$port"

as_job() { # srun as nobody; sets OUT, RC
  set +e
  OUT=$(cd /tmp && setpriv --reuid=65534 --regid=65534 --clear-groups env SLURM_CONF="$SLURM_CONF" \
    timeout 60 srun -N1 -n1 "$@" 2>&1)
  RC=$?
  set -e
}
wait_nr() { # expected: the epilog runs after the job has ended
  for _ in $(seq 60); do [[ $(real_nr) == "$1" ]] && return 0; sleep 0.5; done
  return 1
}
job_bg() { # seconds: a job of nobody with --hugepages=6 in the background (pid: job)
  (cd /tmp && setpriv --reuid=65534 --regid=65534 --clear-groups env SLURM_CONF="$SLURM_CONF" \
    timeout 120 srun -N1 -n1 --hugepages=6 sleep "$1" >"$T/job.out" 2>&1) &
  job=$!
}
resume() { # the node back in service after a drain (a killed prolog or epilog)
  scontrol update nodename="$host" state=resume 2>/dev/null || true
  wait_idle
}
# The processes with the helper's lock file open (a prolog or an epilog at
# work), but the test's own holder of it, if any (pid: holder).
lock_waiters() {
  local f p
  for f in /proc/[0-9]*/fd/*; do
    [[ $(readlink "$f" 2>/dev/null) == "$LOCK" ]] || continue
    p=${f#/proc/}
    p=${p%%/*}
    [[ $p == "${holder:-}" ]] || echo "$p"
  done | sort -u
}
