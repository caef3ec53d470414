# Shared by reserve_isolation.sh (cgroup v2, and nodes without the
# controller) and reserve_isolation_v1.sh (a cgroup v1 hugetlb hierarchy):
# the real pool, a real single-node Slurm, and the job scenarios both run
# (sourced after lib.sh, not run).
conf() { # extra config lines on stdin
  { real_pool_conf; printf 'require_job yes\ndefault_job_pages 0\n'; cat; } >"$REAL/etc/hugepool/reserve.conf.new"
  chmod 0644 "$REAL/etc/hugepool/reserve.conf.new"
  mv "$REAL/etc/hugepool/reserve.conf.new" "$REAL/etc/hugepool/reserve.conf"
}
real_pool_setup - </dev/null
conf </dev/null
SLURM_PARTITION_EXTRA=OverSubscribe=FORCE:4 # three jobs at once on a 2-CPU node
source "$(dirname "$0")/slurm_lib.sh"

MAP=$INST/tools/hugetlb_map
[[ -x $RESERVE_DOCTOR ]] || fail "hugepool doctor not built ($RESERVE_DOCTOR)"
install -m 0755 "$RESERVE_DOCTOR" "$INST/tools/hugepool"
S=$T/sync
mkdir -m 0777 "$S"
# The jobs' holders and waiters exit whatever happened (before the daemons
# stop: a job left waiting would outlive slurmd, and its cgroup the test).
on_exit "touch '$S/release' '$S/p-go-x' '$S/p-go-y' '$S/p-release' '$S/st-go' '$S/st-done'; sleep 2"
grants() { grep -Ec '^[0-9]+ ' "$REAL/var/lib/hugepool/grants" || true; } # every user's
bg_pids=()
bg_job() { # name srun-args...: a job in the background, its output in $T/<name>.out
  local name=$1
  shift
  (cd /tmp && setpriv --reuid=65534 --regid=65534 --clear-groups env SLURM_CONF="$SLURM_CONF" \
    timeout 120 srun -N1 -n1 "$@" >"$T/$name.out" 2>&1 9>&-) &
  bg_pids+=($!)
}
wait_file() { # file what
  for _ in $(seq 600); do [[ -e $1 ]] && return 0; sleep 0.1; done
  fail "$2 (no $1)
$(tail -n 20 "$T"/job-*.out 2>/dev/null)
$(logs)"
}
REG=$REAL/run/hugepool/jobs
TABLE=$REAL/var/lib/hugepool/grants
bg_job_as() { # uid name srun-args...: a job of that user in the background, its output in $T/<name>.out
  local uid=$1 name=$2
  shift 2
  (cd /tmp && setpriv --reuid="$uid" --regid=65534 --clear-groups env SLURM_CONF="$SLURM_CONF" \
    timeout 120 srun -N1 -n1 "$@" >"$T/$name.out" 2>&1 9>&-) &
  bg_pids+=($!)
}
# The rule of limits.c holds now (lib.sh): every job cgroup of the hierarchy
# mounted at mnt, reached through the command prefix (nsenter for v1).
check_limits() { # what mnt [prefix...]
  local what=$1 mnt=$2 out
  shift 2
  out=$("$@" bash -c "$(declare -f limits_within_grants cg_pages); limits_within_grants '$mnt' '$REG' '$TABLE'") ||
    fail "$what: a job's limit exceeds its user's grants: $out"
  pass "$what: limits within grants ($(tr '\n' ';' <<<"$out"))"
}
# Two users' jobs at once (limits.c): job Y (daemon, --hugepages=4) waits; job
# X (nobody, --hugepages=4) gives its grant back from inside the job, then
# tries to map 4 pages, which are Y's: ENOMEM; then Y maps its own 4.  While
# both run, the kernel's limit files are checked against the grant table.
# Args: a label, the hierarchy's mount, and a command prefix that reaches it
# (nsenter into slurmd's mount namespace for the v1 hierarchy).
job_pair() {
  local label=$1 mnt=$2 out
  shift 2
  rm -f "$S"/p-*
  bg_pids=()
  bg_job_as 1 pair-y --hugepages=4 bash -c "touch $S/p-y-started; while [ ! -e $S/p-go-y ]; do sleep 0.1; done;
    $MAP 4 $S/p-y-held $S/p-release"
  wait_file "$S/p-y-started" "$label: job Y did not start"
  check_limits "$label: after job Y's prolog granted its 4 pages" "$mnt" "$@"
  bg_job_as 65534 pair-x --hugepages=4 bash -c "touch $S/p-x-started; while [ ! -e $S/p-rel-x ]; do sleep 0.1; done;
    $HELPER --release; echo rc=\$?; touch $S/p-x-released;
    while [ ! -e $S/p-go-x ]; do sleep 0.1; done; $MAP 4; echo rc=\$?; touch $S/p-x-done"
  wait_file "$S/p-x-started" "$label: job X did not start"
  check_limits "$label: after job X's prolog granted its 4 pages" "$mnt" "$@"
  xjob=$(grep -lx 65534 "$REG"/[0-9]* || true)
  [[ -n $xjob && $xjob != *$'\n'* ]] || fail "$label: job X's registry entry: '$xjob'"
  touch "$S/p-rel-x"
  wait_file "$S/p-x-released" "$label: job X did not release"
  grep -q 'released 4 pages of 2048 kB' "$T/pair-x.out" || fail "$label: job X's release: $(cat "$T/pair-x.out")"
  check_limits "$label: job X (nobody) released its 4 pages inside the job" "$mnt" "$@"
  touch "$S/p-go-x"
  wait_file "$S/p-x-done" "$label: job X did not map"
  grep -qx 'mmap 4: ENOMEM' "$T/pair-x.out" || fail "$label: job X mapped job Y's pages: $(cat "$T/pair-x.out")"
  pass "$label: job X cannot map 4 pages after its release (job Y's)"
  for _ in $(seq 100); do [[ -e $xjob ]] || break; sleep 0.1; done
  [[ ! -e $xjob ]] || fail "$label: job X's epilog did not unregister it"
  check_limits "$label: after job X's epilog" "$mnt" "$@"
  touch "$S/p-go-y"
  wait_file "$S/p-y-held" "$label: job Y could not map its pages: $(cat "$T/pair-y.out")"
  grep -q '^mapped 4 hugetlb_kb 8192$' "$T/pair-y.out" || fail "$label: job Y: $(cat "$T/pair-y.out")"
  pass "$label: job Y (daemon) maps its own 4 granted pages"
  touch "$S/p-release"
  wait "${bg_pids[@]}" || true
  wait_nr "$base" || fail "$label: pool not back to $base after the job pair"
  check_limits "$label: after job Y's epilog" "$mnt" "$@"
}
# A process that escapes Slurm's tracking (setsid and a double fork: not a
# descendant of the step) outlives its job.  The epilog kills it: it must not
# be able to reserve a page afterwards (another user's job's granted pages
# are free then).
straggler() { # label
  local label=$1 pid
  rm -f "$S"/st-*
  [[ -z $audit ]] || : >"$audit"
  as_job --hugepages=2 bash -c "(setsid bash -c 'echo \$\$ >$S/st-pid; while [ ! -e $S/st-go ]; do sleep 0.1; done;
    $MAP 1 >$S/st-out 2>&1' </dev/null >/dev/null 2>&1 &); while [ ! -e $S/st-pid ]; do sleep 0.1; done; echo TASK-RAN"
  grep -q TASK-RAN <<<"$OUT" || fail "$label: the straggler's job did not run: $OUT"
  pid=$(<"$S/st-pid")
  on_exit "kill -9 $pid 2>/dev/null"
  wait_nr "$base" || fail "$label: the straggler's job was not released"
  bg_pids=()
  bg_job_as 1 st-other --hugepages=2 bash -c "touch $S/st-other; while [ ! -e $S/st-done ]; do sleep 0.1; done"
  wait_file "$S/st-other" "$label: the other user's job did not start"
  touch "$S/st-go"
  for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  sleep 0.5
  if kill -0 "$pid" 2>/dev/null || grep -q mapped "$S/st-out" 2>/dev/null; then
    fail "$label: a process left in a job's cgroup survived the epilog: $(cat "$S/st-out" 2>/dev/null) (cgroup $(cat "/proc/$pid/cgroup" 2>/dev/null | tr '\n' ' '))"
  fi
  pass "$label: a straggler left in its job's cgroup is killed by the epilog: it reserves no page"
  touch "$S/st-done"
  wait "${bg_pids[@]}" || true
  wait_nr "$base" || fail "$label: the other user's job was not released"
  if [[ -n $audit ]]; then
    sleep 0.3
    grep -Eq 'source=slurm job=[0-9]+ action=isolate-end cgroup=.*/hugepool/job_[0-9]+ killed=[1-9][0-9]* outcome=ok$' "$audit" ||
      fail "$label: no audit line for the killed straggler: $(grep isolate-end "$audit")"
    pass "$label: audit: the straggler's kill"
  fi
}
spare_cmd="echo spare=\$((\$(cat $sys/free_hugepages) - \$(cat $sys/resv_hugepages)))"
# A straggler the epilog cannot kill: frozen by a cgroup v1 freezer (a task
# frozen there does not die of SIGKILL until it is thawed), holding 2 of its
# job's 4 pages.  The epilog must lower the job's limit to what it holds and,
# as it cannot remove the cgroup, keep the job registered and its grant: the
# limit stays covered.  Then the administrator's way out, as the audit line
# says: thaw (the pending SIGKILL ends it), remove the cgroup and the
# registry entry; the user's next job's epilog releases.
fz_mnt=$(awk '{ for (i = 7; i <= NF; i++) if ($i == "-") break;
  if ($(i + 1) == "cgroup" && $4 == "/" && $(i + 3) ~ /(^|,)freezer(,|$)/) { print $5; exit } }' /proc/self/mountinfo)
stuck_straggler() { # label mnt [prefix...]
  local label=$1 mnt=$2 fz pid d job st held lim
  shift 2
  if [[ -z $fz_mnt ]]; then
    echo "note: $label: no cgroup v1 freezer hierarchy here: the straggler the epilog cannot kill is not tested"
    return 0
  fi
  fz=$fz_mnt/hugepool-test-stuck
  mkdir -p "$fz"
  on_exit "echo THAWED >'$fz/freezer.state' 2>/dev/null; sleep 0.3; rmdir '$fz' 2>/dev/null"
  rm -f "$S"/sk-*
  [[ -z $audit ]] || : >"$audit"
  bg_pids=()
  bg_job sk --hugepages=4 bash -c "(setsid $MAP 2 $S/sk-held $S/sk-release </dev/null >$S/sk-out 2>&1 & echo \$! >$S/sk-pid);
    while [ ! -e $S/sk-go ]; do sleep 0.1; done; echo TASK-RAN"
  wait_file "$S/sk-held" "$label: the straggler did not map its pages"
  pid=$(<"$S/sk-pid")
  on_exit "kill -9 $pid 2>/dev/null"
  echo "$pid" >"$fz/cgroup.procs"
  echo FROZEN >"$fz/freezer.state"
  for _ in $(seq 50); do [[ $(<"$fz/freezer.state") == FROZEN ]] && break; sleep 0.1; done
  [[ $(<"$fz/freezer.state") == FROZEN ]] || fail "$label: the straggler could not be frozen"
  d=$("$@" sh -c "ls -d '$mnt'/hugepool/job_*")
  job=${d##*/job_}
  [[ $job =~ ^[0-9]+$ ]] || fail "$label: not one job cgroup: $d"
  touch "$S/sk-go"
  wait "${bg_pids[@]}" || true
  for _ in $(seq 150); do # the epilog tries for about 5 s
    st=$(squeue -h -t all -j "$job" -o %T 2>/dev/null || true)
    [[ $st == RUNNING || $st == COMPLETING || $st == CONFIGURING ]] || break
    sleep 0.2
  done
  sleep 0.5
  "$@" test -d "$d" || fail "$label: the frozen straggler's cgroup was removed (state $st)"
  lim=$("$@" bash -c "$(declare -f cg_pages); cg_pages '$d' max")
  held=$(awk '$1 == 65534 && $3 == 2048 { s += $4 } END { print s + 0 }' "$TABLE")
  echo "$label: after the epilog: job $job's cgroup stays, limit $lim, nobody holds $held, registered: $([[ -e $REG/$job ]] && echo yes || echo no)"
  check_limits "$label: the epilog could not end job $job's isolation (a frozen straggler)" "$mnt" "$@"
  [[ $held == 4 && -e $REG/$job ]] || fail "$label: the grant ($held) or the registration of the job whose cgroup stays was dropped"
  pass "$label: the job whose cgroup stays is still registered, its grant of 4 kept"
  expect_eq "$lim" 2 "$label: the epilog lowered the stuck job's limit to what it holds (2 of 4)"
  if [[ -n $audit ]]; then
    grep -Eq "job=$job action=isolate-end cgroup=.*/hugepool/job_$job killed=[1-9][0-9]* outcome=error reason=\"cannot remove .*lowered to what it holds \\(2 pages of 2048 kB" "$audit" &&
      grep -Eq "job=$job action=release released=0 outcome=kept reason=\".*an administrator must" "$audit" ||
      fail "$label: audit lines of the stuck job: $(grep "job=$job" "$audit")"
    pass "$label: audit: the cgroup left, why, and what the administrator must do"
  fi
  [[ -e $REG/$job.kept ]] || fail "$label: the kept job is not marked $REG/$job.kept"
  # The kept job no longer runs: the user's next job's epilog releases, and
  # keeps only what the stuck cgroup still reserves (2), not the kept 4 plus
  # this job's 2 (before: nothing was released while a job was kept).
  as_job --hugepages=2 echo TASK-RAN
  grep -q TASK-RAN <<<"$OUT" || fail "$label: the user's next job did not run: $OUT"
  for _ in $(seq 100); do
    held=$(awk '$1 == 65534 && $3 == 2048 { s += $4 } END { print s + 0 }' "$TABLE")
    [[ $held == 2 ]] && break
    sleep 0.1
  done
  expect_eq "$held" 2 "$label: with a job kept, the user's next epilog released all but what the stuck cgroup reserves"
  check_limits "$label: after the next job's epilog, with a job kept" "$mnt" "$@"
  echo THAWED >"$fz/freezer.state"
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  ! kill -0 "$pid" 2>/dev/null || fail "$label: the thawed straggler did not die of the epilog's SIGKILL"
  for _ in $(seq 50); do "$@" rmdir "$d" 2>/dev/null && break; sleep 0.1; done
  rm -f "$REG/$job" "$REG/$job.iso" "$REG/$job.kept"
  as_job true
  wait_nr "$base" || fail "$label: the user's next epilog did not release the kept grant"
  pass "$label: after the administrator's cleanup the user's next epilog released the kept pages"
}

# A job the prolog cannot register (the registry directory replaced by a
# file): limits.c would never count its limit, so nothing is granted, no
# cgroup is made, and its tasks are refused with the reason.
reg_fail() {
  local nr_now cgs
  rm -f "$S"/rf-*
  [[ -z $audit ]] || : >"$audit"
  mv "$REG" "$REG.saved"
  : >"$REG"
  on_exit "[[ ! -d '$REG.saved' ]] || { rm -f '$REG'; mv '$REG.saved' '$REG'; }"
  bg_pids=()
  bg_job rf --hugepages=4 bash -c "touch $S/rf-started; while [ ! -e $S/rf-go ]; do sleep 0.1; done; echo TASK-RAN"
  for _ in $(seq 300); do
    [[ -e $S/rf-started ]] && break
    kill -0 "${bg_pids[0]}" 2>/dev/null || break
    sleep 0.1
  done
  nr_now=$(real_nr)
  cgs=$(cg_jobs)
  touch "$S/rf-go"
  wait "${bg_pids[@]}" || true
  rm -f "$REG"
  mv "$REG.saved" "$REG"
  [[ $nr_now == "$base" && -z $cgs ]] ||
    fail "a job that could not be registered was granted (pool $nr_now, base $base) or got a cgroup ($cgs): $(cat "$T/rf.out")"
  pass "a job that cannot be registered is granted nothing and gets no cgroup"
  grep -q 'hugepool: --hugepages could not be granted: the job could not be registered' "$T/rf.out" &&
    ! grep -q TASK-RAN "$T/rf.out" || fail "the unregistered job's task was not refused with the reason: $(cat "$T/rf.out")"
  pass "its task is refused with the reason"
  if [[ -n $audit ]]; then
    sleep 0.3
    grep -Eq 'action=register outcome=error reason="cannot register the job in .*: Not a directory; nothing granted' "$audit" ||
      fail "no audit line for the failed registration: $(cat "$audit")"
    pass "audit: the failed registration"
  fi
  wait_idle
  wait_nr "$base" || fail "pool not back to $base after the unregistered job"
}

# Slurm reuses job ids (a controller restarted with a fresh state, a counter
# that wrapped).  A prolog starts from a clean state for its id: an
# administrator's clean-up that left <id>.kept behind (and a .failed of a job
# whose epilog never ran) must not make the next job of that id count as not
# running: the user's other job ends, and its epilog must not release this
# one's pages; nor may the old .failed refuse it.  Then an id still held by a
# job whose cgroup cannot be removed (a child cgroup left in it): the new job
# is refused with the reason, and the earlier job's entries and cgroup stay.
next_job_id() { # NEXT_ID: the id the next job will get (this Slurm runs nothing else)
  local id
  as_job sh -c 'echo JOBID=$SLURM_JOB_ID'
  id=$(sed -n 's/^JOBID=//p' <<<"$OUT")
  [[ $id =~ ^[0-9]+$ ]] || fail "no job id: $OUT"
  job_gone "$id"
  NEXT_ID=$((id + 1))
}
job_gone() { # id: wait until the job and its epilog are over
  local st
  for _ in $(seq 150); do
    st=$(squeue -h -t all -j "$1" -o %T 2>/dev/null || true)
    [[ $st == RUNNING || $st == COMPLETING || $st == CONFIGURING || $st == PENDING ]] || return 0
    sleep 0.2
  done
  fail "job $1 still $st"
}
reused_id() { # label mnt [prefix...]
  local label=$1 mnt=$2 id held
  shift 2
  wait_nr "$base" || fail "$label: pool not at $base before the reused job id"
  next_job_id
  id=$NEXT_ID
  echo kept >"$REG/$id.kept"
  echo "--hugepages could not be granted: an earlier job's reason" >"$REG/$id.failed"
  rm -f "$S"/ri-*
  bg_pids=()
  bg_job ri-v --hugepages=2 bash -c "echo JOBID=\$SLURM_JOB_ID; touch $S/ri-v-started;
    while [ ! -e $S/ri-go ]; do sleep 0.1; done; $MAP 2 $S/ri-v-held $S/ri-release"
  wait_file "$S/ri-v-started" "$label: the job of a reused id did not run: $(cat "$T/ri-v.out")"
  grep -qx "JOBID=$id" "$T/ri-v.out" || fail "$label: the job did not get id $id: $(cat "$T/ri-v.out")"
  [[ ! -e $REG/$id.kept && ! -e $REG/$id.failed ]] || fail "$label: the prolog left the earlier job's files: $(ls "$REG")"
  pass "$label: a job of a reused id runs, the earlier job's .kept and .failed gone"
  as_job --hugepages=2 echo TASK-RAN # the user's other job: it ends, its epilog runs
  grep -q TASK-RAN <<<"$OUT" || fail "$label: the user's other job did not run: $OUT"
  job_gone $((id + 1))
  held=$(awk '$1 == 65534 && $3 == 2048 { s += $4 } END { print s + 0 }' "$TABLE")
  expect_eq "$held/$(real_nr)" "4/$((base + 4))" "$label: the other job's epilog releases nothing while the job of the reused id runs"
  touch "$S/ri-go"
  wait_file "$S/ri-v-held" "$label: the job of the reused id could not map its pages: $(cat "$T/ri-v.out")"
  grep -q '^mapped 2 hugetlb_kb 4096$' "$T/ri-v.out" || fail "$label: $(cat "$T/ri-v.out")"
  pass "$label: the job of the reused id maps its 2 pages"
  touch "$S/ri-release"
  wait "${bg_pids[@]}" || true
  wait_nr "$base" || fail "$label: the pool is not back to $base after the job of the reused id"
  pass "$label: its own epilog then releases everything"

  # An id still held: the earlier job registered, kept, its cgroup not removable.
  next_job_id
  id=$NEXT_ID
  echo 1 >"$REG/$id"
  echo "isolated 0 0" >"$REG/$id.iso"
  echo kept >"$REG/$id.kept"
  "$@" mkdir -p "$mnt/hugepool/job_$id/left"
  on_exit "$* rmdir '$mnt/hugepool/job_$id/left' '$mnt/hugepool/job_$id' 2>/dev/null; rm -f '$REG/$id' '$REG/$id.iso' '$REG/$id.kept'"
  as_job --hugepages=2 bash -c "echo JOBID=\$SLURM_JOB_ID; cat /proc/self/cgroup; echo TASK-RAN"
  ! grep -q TASK-RAN <<<"$OUT" && grep -q "hugepool: --hugepages could not be granted: job id $id is still held on this node by an earlier job" <<<"$OUT" ||
    fail "$label: the job of a held id was not refused with the reason: $OUT"
  pass "$label: a job whose id an earlier, kept job still holds is refused with the reason"
  job_gone "$id"
  expect_eq "$(real_nr)/$(cat "$REG/$id")/$([[ -e $REG/$id.kept && -e $REG/$id.iso ]] && echo kept)" "$base/1/kept" \
    "$label: nothing granted; the earlier job's registration, .iso and .kept stay"
  "$@" test -d "$mnt/hugepool/job_$id" || fail "$label: the earlier job's cgroup was removed"
  "$@" rmdir "$mnt/hugepool/job_$id/left" "$mnt/hugepool/job_$id"
  rm -f "$REG/$id" "$REG/$id.iso" "$REG/$id.kept"
}
