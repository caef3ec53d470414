#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# srun --hugepages=N against a real single-node Slurm (munge, slurmctld,
# slurmd started here on 127.0.0.1 with a generated config, stopped at the
# end).  The job's user is nobody; the plugin's root-side prolog grants the
# pages, the job sees them, the epilog gives them back.
source "$(dirname "$0")/lib.sh"
real_pool_setup - <<CONF
$(real_pool_conf)
require_job yes
CONF

source "$(dirname "$0")/slurm_lib.sh"

# The option is there for users.
set +e
help=$(setpriv --reuid=65534 --regid=65534 --clear-groups env SLURM_CONF="$SLURM_CONF" srun --help 2>&1)
set -e
grep -q -- '--hugepages=N' <<<"$help" || fail "srun --help lacks --hugepages: $help"
pass "srun --help lists --hugepages"

# Outside a job, require_job refuses the helper.
as_nobody 4
expect_rc 1 "helper outside a job refused (require_job)"

# A job with --hugepages=12: the pool grows before it starts, shrinks after.
as_job --hugepages=12 bash -c "cat $sys/nr_hugepages; $HELPER --status; $HELPER 12; echo rc=\$?; $HELPER 20; echo rc=\$?"
[[ $RC == 0 ]] || fail "job failed (rc $RC): $OUT
$(logs)"
first=$(head -n 1 <<<"$OUT")
expect_eq "$first" $((base + 12)) "the job sees the pool grown by 12"
grep -q '12 pages of 2048 kB on node any' <<<"$OUT" || fail "job's status lacks the grant: $OUT"
pass "inside the job, --status shows the user's 12 pages"
if [[ -n $cg_mnt ]]; then # the job is isolated: PAGES is what the job may reserve
  grep -q 'your job [0-9]* may already reserve 12 pages' <<<"$OUT" && grep -qx 'rc=0' <<<"$OUT" || fail "helper in job: $OUT"
  grep -q 'your job [0-9]*: hugetlb cgroup .*/hugepool/job_[0-9]*' <<<"$OUT" && grep -q '2048 kB pages: limit 12, reserved 0' <<<"$OUT" ||
    fail "the job's --status lacks its cgroup's limit: $OUT"
  pass "inside the job, --status shows the job's limit"
else
  grep -q 'you already hold 12 pages' <<<"$OUT" && grep -qx 'rc=0' <<<"$OUT" || fail "helper in job: $OUT"
fi
pass "inside the job, require_job accepts the helper"
grep -q 'pool .* -> ' <<<"$OUT" || fail "helper could not grow the grant inside the job: $OUT"
pass "inside the job, the helper grows the grant to 20"
wait_nr "$base" || fail "epilog did not give the pages back: pool $(real_nr), expected $base
$(logs)"
pass "after the job, the pool is back to $base"
[[ -z $(ls -A "$REAL/run/hugepool/jobs") ]] || fail "job registry not emptied: $(ls "$REAL/run/hugepool/jobs")"
pass "job registry emptied by the epilog"
[[ -z $(cg_jobs) ]] || fail "job cgroups left: $(cg_jobs)"
pass "no job cgroup left"
if [[ -n $audit ]]; then
  sleep 0.3
  grep -Eq '^<85>.* hugepool-spank\[[0-9]+\]: uid=65534 user=nobody source=slurm job=[0-9]+ action=grant size=2048kB node=any request=12 before=[0-9]+ after=[0-9]+ granted=12 outcome=ok$' "$audit" ||
    fail "no audit line for the prolog's grant: $(cat "$audit")"
  pass "audit: the prolog's grant"
  grep -Eq '^<85>.* hugepool-reserve\[[0-9]+\]: uid=65534 user=nobody source=helper job=0 action=grant size=2048kB node=any request=20 .* granted=8 outcome=ok$' "$audit" ||
    fail "no audit line for the helper inside the job: $(cat "$audit")"
  pass "audit: the helper inside the job"
  grep -Eq '^<85>.* hugepool-spank\[[0-9]+\]: uid=65534 user=nobody source=slurm job=[0-9]+ action=release size=2048kB node=any request=20 .* released=20 outcome=ok$' "$audit" ||
    fail "no audit line for the epilog's release: $(cat "$audit")"
  pass "audit: the epilog's release"
else
  echo "note: /dev/log belongs to a system logger; audit lines not checked here"
fi

# Over the site limit: the step fails with the reason, the node stays up.
as_job --hugepages=1000 echo TASK-RAN
# (srun may exit 0 when the launch fails: look at what ran instead)
! grep -q TASK-RAN <<<"$OUT" || fail "a job over max_pages ran: $OUT"
grep -q 'could not be granted: limit max_pages' <<<"$OUT" || fail "no reason shown to the user: $OUT"
pass "a job over max_pages fails with the reason"
if [[ -n $audit ]]; then
  sleep 0.3
  expect_eq "$(grep -Ec 'source=slurm job=[0-9]+ action=grant size=2048kB node=any request=1000 granted=0 outcome=refused reason="limit max_pages' "$audit")" 1 \
    "audit: the refused job logged once, with the reason"
fi
expect_eq "$(real_nr)" "$base" "pool untouched by the refused job"
for _ in $(seq 20); do
  state=$(sinfo -h -o %T)
  [[ $state == idle ]] && break
  sleep 0.5
done
expect_eq "$state" idle "node not drained by a user's bad request"

# The same refusal in a batch job: the job fails with the reason in its
# output; the node is not drained (a failing prolog or user_init would).
mkdir -p -m 0777 "$T/out"
set +e
job=$(cd /tmp && setpriv --reuid=65534 --regid=65534 --clear-groups env SLURM_CONF="$SLURM_CONF" \
  sbatch --parsable --hugepages=1000 -o "$T/out/batch.out" --wrap 'echo TASK-RAN' 2>&1)
set -e
[[ $job =~ ^[0-9]+$ ]] || fail "sbatch failed: $job"
for _ in $(seq 60); do
  [[ -z $(squeue -h -j "$job" 2>/dev/null) ]] && break
  sleep 0.5
done
! grep -qs TASK-RAN "$T/out/batch.out" || fail "batch job over max_pages ran"
grep -qs 'could not be granted: limit max_pages' "$T/out/batch.out" || fail "batch output lacks the reason: $(cat "$T/out/batch.out" 2>&1)"
pass "a batch job over max_pages fails with the reason in its output"
expect_eq "$(sinfo -h -o %T)" idle "node not drained by a refused batch job"

# Bad values die in the client before anything runs.
for bad in -5 0 1e3 12abc 99999999999; do
  as_job --hugepages="$bad" true
  [[ $RC != 0 ]] || fail "--hugepages=$bad accepted"
  grep -q 'hugepages needs a whole number' <<<"$OUT" || fail "--hugepages=$bad: $OUT"
done
pass "bad --hugepages values refused by the client"

# A hostile client skips that check (the value goes straight into the job's
# SPANK environment): the root-side prolog validates it again.
if [[ -x $RESERVE_TOOLS/slurm_smuggle ]]; then
  install -m 0755 "$RESERVE_TOOLS/slurm_smuggle" "$T/slurm_smuggle"
  for bad in -5 0x10 99999999999 "12 13"; do
    set +e
    job=$(cd /tmp && setpriv --reuid=65534 --regid=65534 --clear-groups env SLURM_CONF="$SLURM_CONF" \
      "$T/slurm_smuggle" "$bad" "$T/out/job.out" 2>&1)
    set -e
    [[ $job =~ ^[0-9]+$ ]] || fail "hostile submission failed: $job"
    for _ in $(seq 60); do
      [[ -z $(squeue -h -j "$job" 2>/dev/null) ]] && break
      sleep 0.5
    done
    [[ -z $(squeue -h -j "$job" 2>/dev/null) ]] || fail "job $job still queued: $(squeue -h -j "$job")
$(logs)"
    ! grep -qs TASK-RAN "$T/out/job.out" || fail "job with smuggled --hugepages='$bad' ran"
    grep -qs 'hugepool: --hugepages could not be granted: --hugepages: not a whole number' "$T/out/job.out" ||
      fail "job output lacks the reason: $(cat "$T/out/job.out" 2>&1)"
    if [[ -n $audit ]]; then
      sleep 0.3
      grep -Eq "source=slurm job=$job action=grant outcome=refused reason=\"bad --hugepages value\"$" "$audit" ||
        fail "no audit line for smuggled '$bad': $(tail -n 5 "$audit")"
    fi
  done
  pass "values smuggled past the client are refused by the root-side prolog"
  expect_eq "$(real_nr)" "$base" "pool untouched by smuggled values"
  state=$(sinfo -h -o %T)
  expect_eq "$state" idle "node not drained by smuggled values"
else
  echo "note: slurm_smuggle not built (libslurm-dev); root-side re-validation not tested end to end"
fi
expect_eq "$(real_nr)" "$base" "pool untouched after all jobs"
