#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Per-job hugetlb isolation on a cgroup v1 node: a hierarchy that only
# hugetlb is bound to, as the admin guide sets it up, mounted in slurmd's own
# mount namespace (the kernel binds hugetlb to a v1 hierarchy only while no
# cgroup2 cgroup enables it).  Skipped (exit 77) where that is not possible.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/isolation_lib.sh"
# A cgroup v1 node: a hierarchy that only hugetlb is bound to, as the admin
# guide sets it up (possible while no cgroup2 cgroup enables hugetlb; the
# test mounts it in slurmd's own mount namespace and lets it go at the end).
if [[ -n $cg_v1 ]] || ! grep -q '^hugetlb' /proc/cgroups || [[ -n $cg_v2 && ${_cg_had_ctrl:-no} == yes ]]; then
  echo "SKIP: the cgroup v1 case cannot run here (a v1 hugetlb hierarchy exists, or the controller is in use in cgroup2)" >&2
  exit 77
fi
slurmd_stop
_cg_restore # the controller leaves cgroup2 only once no cgroup there enables it
V1=$T/hugetlb-v1
mkdir -m 0755 "$V1"
# A v1 hierarchy outlives its last mount if it still has a child cgroup then
# (even a dying one): mount it again in a namespace of our own, remove what is
# left, and unmount until the kernel lets it go (hugetlb back to cgroup2).
_v1_release() {
  slurmd_stop
  local i
  for i in $(seq 60); do
    grep -q '^hugetlb[[:space:]]0[[:space:]]' /proc/cgroups && return 0
    if ((i % 10 == 0)); then
      unshare -m --propagation private sh -c "mount -t cgroup -o hugetlb hugepool-test '$V1' || exit 0
        rmdir '$V1'/hugepool/job_* 2>/dev/null; rmdir '$V1/hugepool' 2>/dev/null; sleep 0.5; umount '$V1'"
    fi
    sleep 0.2
  done
  return 1
}
on_exit _v1_release
# (cgroup2 lets the controller go only once its dying cgroups are freed: the
# job cgroups removed above may take a few seconds)
v1_ok=no
for _ in $(seq 75); do
  unshare -m --propagation private mount -t cgroup -o hugetlb hugepool-test "$V1" 2>/dev/null && v1_ok=yes && break
  sleep 0.2
done
if [[ $v1_ok == no ]]; then
  echo "SKIP: the cgroup v1 case cannot run here (the kernel would not bind hugetlb to a v1 hierarchy: in use in cgroup2)" >&2
  exit 77
fi
_v1_release || fail "the test's v1 hugetlb hierarchy is still there: $(grep hugetlb /proc/cgroups)"
conf </dev/null
slurmd_start unshare -m --propagation private sh -c "mount -t cgroup -o hugetlb hugepool-test '$V1' && exec \"\$0\" \"\$@\""
as_job --hugepages=2 bash -c "$MAP 2 $S/v1-held $S/v1-release & while [ ! -e $S/v1-held ]; do sleep 0.1; done;
  $MAP 1; echo rc=\$?; $HELPER --status; $HELPER 3; $MAP 1; echo rc=\$?; touch $S/v1-release; wait"
grep -q '^mapped 2 hugetlb_kb 4096$' <<<"$OUT" && grep -q '^mmap 1: ENOMEM$' <<<"$OUT" && grep -qx 'rc=1' <<<"$OUT" ||
  fail "cgroup v1: the job's 3rd page was not refused at mmap: $OUT
$(logs)"
! grep -q SIGBUS <<<"$OUT" || fail "SIGBUS: $OUT"
pass "cgroup v1: the job maps its 2 pages, its 3rd fails at mmap with ENOMEM"
grep -q "your job [0-9]*: hugetlb cgroup $V1/hugepool/job_[0-9]* (cgroup v1)" <<<"$OUT" &&
  grep -q '2048 kB pages: limit 2, reserved 2, in use 2' <<<"$OUT" || fail "cgroup v1: --status: $OUT"
grep -q 'granted: your job [0-9]* may reserve 3 pages' <<<"$OUT" && grep -q '^mapped 1 hugetlb_kb 2048$' <<<"$OUT" ||
  fail "cgroup v1: the helper did not grow the job's limit: $OUT"
pass "cgroup v1: --status shows the job's limit and use; the helper grows it"
wait_nr "$base" || fail "cgroup v1: pool not back to $base"
job_pair "cgroup v1" "$V1" nsenter -t "$sd" -m
straggler "cgroup v1"
stuck_straggler "cgroup v1" "$V1" nsenter -t "$sd" -m
[[ -z $(nsenter -t "$sd" -m sh -c "ls -d '$V1'/hugepool/job_* 2>/dev/null") ]] || fail "cgroup v1: job cgroup left"
pass "cgroup v1: no job cgroup left, the pool back to $base"
_v1_release || fail "the test's v1 hugetlb hierarchy is still there: $(grep hugetlb /proc/cgroups)"
pass "the test's v1 hierarchy is gone"

