#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Per-job hugetlb isolation on a real single-node Slurm: each job's
# processes live in a hugetlb cgroup whose reservation limit is the job's
# grant, so a job that maps more than its grant gets ENOMEM at mmap (never
# SIGBUS) while another job's pages stay free for it, and a job without
# --hugepages (default_job_pages 0) cannot take them.  Then a node without
# the controller (slurmd in a mount namespace where no hugetlb hierarchy is
# mounted: the plugin's own detection finds none): the job runs unisolated
# and says so; with require_isolation yes it is refused.  The cgroup v1
# case is reserve_isolation_v1.sh.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/isolation_lib.sh"


if [[ -z $cg_mnt ]]; then
  echo "note: this node offers no hugetlb cgroup controller (neither cgroup2 nor a v1 hierarchy): only the unisolated part runs"
else
  # Job B (6 pages) starts first and waits; job A (4 pages) maps its own,
  # then one more (refused at mmap), grows its limit with the helper; job C
  # (no --hugepages) tries one page; then B maps its 6, which are still free.
  bg_job job-b --hugepages=6 bash -c "touch $S/b-started; while [ ! -e $S/go-b ]; do sleep 0.1; done;
    $MAP 6 $S/b-held $S/release"
  wait_file "$S/b-started" "job B did not start"
  bg_job job-a --hugepages=4 bash -c "$MAP 4 $S/a-held $S/release & while [ ! -e $S/a-held ]; do sleep 0.1; done;
    $spare_cmd; $MAP 1; echo rc=\$?; $HELPER --status; $HELPER 5; $MAP 1; echo rc=\$?;
    $INST/tools/hugepool doctor; touch $S/a-done; wait"
  wait_file "$S/a-done" "job A did not get through"
  out_a=$(cat "$T/job-a.out")
  grep -q '^mapped 4 hugetlb_kb 8192$' <<<"$out_a" || fail "job A could not map its 4 pages: $out_a"
  pass "job A (--hugepages=4) maps its own 4 pages"
  spare=$(sed -n 's/^spare=//p' <<<"$out_a")
  ((spare >= 6)) || fail "job A's over-grant test ran with only $spare spare pages: $out_a"
  grep -q '^mmap 1: ENOMEM$' <<<"$out_a" && grep -qx 'rc=1' <<<"$out_a" || fail "job A's 5th page was not refused at mmap: $out_a"
  ! grep -q SIGBUS <<<"$out_a" || fail "SIGBUS in job A: $out_a"
  pass "job A's 5th page fails at mmap with ENOMEM although $spare pages are free (job B's)"
  grep -q 'your job [0-9]*: hugetlb cgroup .*/hugepool/job_[0-9]* (cgroup v[12])' <<<"$out_a" &&
    grep -q '2048 kB pages: limit 4, reserved 4, in use 4' <<<"$out_a" || fail "job A's --status lacks its limit and use: $out_a"
  pass "hugepool-reserve --status in job A shows its limit and use"
  grep -q 'granted: your job [0-9]* may reserve 5 pages of 2048 kB; you hold 11' <<<"$out_a" &&
    grep -q '^mapped 1 hugetlb_kb 2048$' <<<"$out_a" && [[ $(grep -c 'rc=0' <<<"$out_a") == 1 ]] ||
    fail "the helper did not grow job A's limit: $out_a"
  pass "hugepool-reserve 5 in job A grows the pool and the job's limit: its 5th page maps"
  grep -q 'reservation limit 10 MiB (used 8 MiB)' <<<"$out_a" && grep -q 'Slurm job [0-9]* runs in its own hugetlb cgroup' <<<"$out_a" ||
    fail "hugepool doctor lacks job A's limit and use: $out_a"
  pass "hugepool doctor in job A shows its limit and use"

  as_job bash -c "$spare_cmd; $MAP 1; echo rc=\$?; $MAP --noreserve 1; echo rc=\$?"
  spare=$(sed -n 's/^spare=//p' <<<"$OUT")
  ((spare >= 6)) || fail "job C ran with only $spare spare pages: $OUT"
  grep -q '^mmap 1: ENOMEM$' <<<"$OUT" && grep -qx 'rc=1' <<<"$OUT" || fail "a job without --hugepages took a page: $OUT"
  pass "a job without --hugepages (default_job_pages 0) cannot take any of the $spare free pages"
  grep -qx SIGBUS <<<"$OUT" && grep -qx 'rc=3' <<<"$OUT" || fail "MAP_NORESERVE past the limit: $OUT"
  pass "as documented, a MAP_NORESERVE mapping past the job's limit gets SIGBUS at its first touch"

  touch "$S/go-b"
  wait_file "$S/b-held" "job B could not map its pages: $(cat "$T/job-b.out")"
  grep -q '^mapped 6 hugetlb_kb 12288$' "$T/job-b.out" || fail "job B: $(cat "$T/job-b.out")"
  pass "job B (--hugepages=6) maps its own 6 pages after A and C tried to take more"
  for job in "$cg_mnt"/hugepool/job_*; do
    echo "$(basename "$job"): reserved $(cg_pages "$job" current) of $(cg_pages "$job" max) pages"
  done
  expect_eq "$(for job in "$cg_mnt"/hugepool/job_*; do echo "$(cg_pages "$job" current)/$(cg_pages "$job" max)"; done | sort | tr '\n' ' ')" \
    "4/5 6/6 " "the kernel's view: job A reserves 4 of its 5, job B 6 of its 6"
  expect_eq "$(real_nr)" $((base + 11)) "the pool holds both grants and the helper's page (base + 6 + 4 + 1)"
  touch "$S/release"
  wait "${bg_pids[@]}" || true
  ! grep -q SIGBUS "$T"/job-*.out || fail "SIGBUS: $(cat "$T"/job-*.out)"
  wait_nr "$base" || fail "epilog did not give the pages back: pool $(real_nr), expected $base
$(logs)"
  pass "after both jobs, the pool is back to $base"
  [[ -z $(cg_jobs) ]] || fail "job cgroups left: $(cg_jobs)"
  expect_eq "$(grants)" 0 "no grant left"
  [[ -z $(ls -A "$REAL/run/hugepool/jobs") ]] || fail "job registry not emptied: $(ls "$REAL/run/hugepool/jobs")"
  pass "no job cgroup, no grant, no registry entry left"
  if [[ -n $audit ]]; then
    sleep 0.3
    expect_eq "$(grep -Ec 'source=slurm job=[0-9]+ action=isolate hierarchy=v[12] cgroup=.*/hugepool/job_[0-9]+ limit=(6|4|0) outcome=ok$' "$audit")" 3 \
      "audit: three jobs isolated (limits 6, 4 and 0)"
  fi
  cg_kind=cgroup$([[ $cg_mnt == "$cg_v2" ]] && echo 2 || echo " v1")
  job_pair "$cg_kind" "$cg_mnt"
  straggler "$cg_kind"
  stuck_straggler "$cg_kind" "$cg_mnt"
  reg_fail
  reused_id "$cg_kind" "$cg_mnt"
  expect_eq "$(grants)" 0 "no grant left after the job pair and the straggler"
fi

# The helper trusts nothing about the cgroup it finds itself in: a job
# cgroup that is not the caller's registered job, or a limit file the plugin
# did not hand to the helper's group, is refused before the pool changes.
if [[ -n $cg_mnt ]]; then
  CG=$cg_mnt/hugepool/job_77777
  REG=$REAL/run/hugepool/jobs
  mkdir -p "$CG"
  on_exit "rmdir '$CG' 2>/dev/null; rm -f '$REG/77777' '$REG/88888'"
  limf=$CG/hugetlb.2MB.rsvd.max
  [[ -e $limf ]] || limf=$CG/hugetlb.2MB.rsvd.limit_in_bytes
  echo $((2 << 21)) >"$limf"
  chgrp "$(stat -c %g "$REAL/var/lib/hugepool/lock")" "$limf"
  chmod 0664 "$limf"
  echo 65534 >"$REG/88888" # nobody owns a job (require_job), but not job 77777
  in_cg() { # helper-args: the helper as nobody, in job 77777's cgroup
    set +e
    OUT=$(sh -c "echo \$\$ >'$CG/cgroup.procs' && exec setpriv --reuid=65534 --regid=65534 --clear-groups '$HELPER' $*" 2>&1)
    RC=$?
    set -e
  }
  refused() { # what
    [[ $RC == 1 && $(cg_pages "$CG" max) == 2 && $(real_nr) == "$base" ]] && grep -q "$1" <<<"$OUT" ||
      fail "$2: rc $RC, limit $(cg_pages "$CG" max), pool $(real_nr): $OUT"
    pass "$2"
  }
  in_cg 3
  refused "hugetlb cgroup of job 77777, which is not registered" "the helper in an unregistered job's cgroup is refused"
  echo 1234 >"$REG/77777"
  in_cg 3
  refused "hugetlb cgroup of job 77777, which is not yours" "the helper in another user's job cgroup is refused"
  echo 65534 >"$REG/77777"
  chown 65534 "$REG/77777"
  in_cg 3
  refused "which is not registered" "a registry entry not owned by root does not count"
  chown 0 "$REG/77777"
  chgrp 0 "$limf"
  chmod 0666 "$limf"
  in_cg 3
  refused "is not one the helper may raise" "a limit file not handed to the helper's group is refused"
  chgrp "$(stat -c %g "$REAL/var/lib/hugepool/lock")" "$limf"
  chmod 0664 "$limf"
  in_cg 3
  # (the limit of 2 was set by hand, granted to nobody: the grant covers all 3)
  [[ $RC == 0 && $(cg_pages "$CG" max) == 3 && $(real_nr) == $((base + 3)) ]] ||
    fail "the helper in its own job's cgroup: rc $RC, limit $(cg_pages "$CG" max), pool $(real_nr): $OUT"
  pass "control: in its own registered job's cgroup the helper sets the limit (2 -> 3) and grows the pool by 3 (the limit of 2 was granted to nobody)"
  as_nobody --release
  [[ $RC/$(real_nr) == "0/$base" ]] || fail "released: rc $RC, pool $(real_nr), expected $base: $OUT $ERR"
  pass "released"
  rmdir "$CG"
  rm -f "$REG/77777" "$REG/88888"
fi

# cgroup v2 with Slurm's own cgroups (cgroup/v2 plugin: a task lives in
# .../job_<id>/...): the plugin must not move the task out of it (Slurm tracks
# it there).  Simulated by starting slurmd, and so its steps, in such a cgroup.
if [[ -n $cg_mnt && $cg_mnt == "$cg_v2" ]]; then
  slurmd_stop
  SLURMCG=$cg_v2/hugepool-test-slurm/job_999
  mkdir -p "$SLURMCG"
  on_exit "rmdir '$SLURMCG' '$cg_v2/hugepool-test-slurm' 2>/dev/null"
  slurmd_start sh -c "echo \$\$ >'$SLURMCG/cgroup.procs' && exec \"\$0\" \"\$@\""
  as_job --hugepages=2 bash -c "cat /proc/self/cgroup; $MAP 2; echo TASK-RAN"
  grep -qx '0::/hugepool-test-slurm/job_999' <<<"$OUT" && grep -q TASK-RAN <<<"$OUT" || fail "the task left Slurm's cgroup: $OUT"
  grep -q "hugepool: note: this job's hugetlb pages are not isolated from other jobs: this task is in Slurm's own cgroup" <<<"$OUT" ||
    fail "no message for a task in Slurm's cgroup: $OUT"
  pass "cgroup v2: a task in Slurm's own job cgroup stays there, unisolated, with the message"
  if [[ -n $audit ]]; then
    sleep 0.3
    grep -Eq "source=slurm job=[0-9]+ action=isolate-task pid=[0-9]+ outcome=unavailable reason=\"this task is in Slurm's own cgroup" "$audit" ||
      fail "no audit line for the task: $(tail -n 5 "$audit")"
    pass "audit: the task that stayed in Slurm's cgroup"
  fi
  wait_nr "$base" || fail "pool not back to $base"
  [[ -z $(cg_jobs) ]] || fail "job cgroups left: $(cg_jobs)"
  slurmd_stop
  rmdir "$SLURMCG" "$cg_v2/hugepool-test-slurm"
  slurmd_start
fi

# A node without the controller: slurmd (and the steps it starts) in a mount
# namespace where no cgroup2 hierarchy and no v1 hugetlb hierarchy is mounted.
mapfile -t cg_mounts < <(awk '{ for (i = 7; i <= NF; i++) if ($i == "-") break;
  if ($(i + 1) == "cgroup2" || ($(i + 1) == "cgroup" && $(i + 3) ~ /(^|,)hugetlb(,|$)/)) print $5 }' /proc/self/mountinfo)
slurmd_stop
umounts=
for m in "${cg_mounts[@]}"; do umounts+="umount -l '$m' && "; done
slurmd_start unshare -m --propagation private sh -c "${umounts}exec \"\$0\" \"\$@\""
[[ -z $audit ]] || : >"$audit"
as_job --hugepages=3 bash -c "$MAP 3; echo TASK-RAN"
grep -q TASK-RAN <<<"$OUT" || fail "the job did not run without the controller: $OUT
$(logs)"
grep -q '^mapped 3 hugetlb_kb 6144$' <<<"$OUT" || fail "the unisolated job could not map its pages: $OUT"
grep -q "hugepool: note: this job's hugetlb pages are not isolated from other jobs: no hugetlb cgroup controller on this node" <<<"$OUT" ||
  fail "no message in the job's output: $OUT"
pass "without the controller the job runs unisolated, and its output says so"
if [[ -n $audit ]]; then
  sleep 0.3
  grep -Eq 'source=slurm job=[0-9]+ action=isolate limit=3 outcome=unavailable reason="no hugetlb cgroup controller on this node' "$audit" ||
    fail "no audit line for the unisolated job: $(cat "$audit")"
  pass "audit: isolation unavailable"
fi
wait_nr "$base" || fail "pool not back to $base after the unisolated job"

conf <<<"require_isolation yes"
as_job --hugepages=3 echo TASK-RAN
! grep -q TASK-RAN <<<"$OUT" || fail "a job ran although isolation is required and impossible: $OUT"
grep -q 'hugepool: the site requires hugetlb isolation (require_isolation yes), which is not possible: no hugetlb cgroup controller' <<<"$OUT" ||
  fail "no reason shown to the user: $OUT"
pass "with require_isolation yes the job's tasks are refused with the reason"
expect_eq "$(real_nr)" "$base" "nothing granted to the refused job"
wait_idle
expect_eq "$state" idle "node not drained by the refused job"
if [[ -n $audit ]]; then
  sleep 0.3
  grep -Eq 'source=slurm job=[0-9]+ action=isolate limit=3 outcome=refused reason="no hugetlb cgroup controller' "$audit" ||
    fail "no audit line for the refused job: $(cat "$audit")"
  pass "audit: isolation required and refused"
fi
sleep 1
expect_eq "$(grants)" 0 "no grant left"
