#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs hugepool-mpi-check under mpiexec with the pool set to an exact number
# of free 2 MB pages, and checks what every rank and the kernel say.
#   segments.sh MPIEXEC PROGRAM NP basic|short|kill
set -euo pipefail
mpiexec=$1 prog=$2 np=$3 mode=$4
pool=/sys/kernel/mm/hugepages/hugepages-2048kB
seg=$((4 << 20)) # 2 pages a rank
fail() { echo "FAIL: $*" >&2; exit 1; }
avail() { echo $(($(cat $pool/free_hugepages) - $(cat $pool/resv_hugepages))); }

# The machine-wide pool lock (tests/pool/pool-lock.sh), the pool set so that
# exactly $want pages are free, restored on exit.
source "$(dirname "$0")/../pool/pool-lock.sh"
work=$(mktemp -d)
cleanup() {
  [[ -n ${mnt:-} ]] && { umount -l "$mnt" 2>/dev/null || true; rmdir "$mnt" 2>/dev/null || true; }
  pool_release
  rm -rf "$work"
}
trap cleanup EXIT
pool_hold
set_free() { pool_set "$1"; }
# UCX's own shared memory stays off the hugetlb pool, so the pool's counts
# are the segments' alone (the library's pages are what is measured); the
# SysV variable is the one that takes effect with Debian's MPICH
# (mpi/README.md, checked by mpi/ucx-variables).
export UCX_SYSV_HUGETLB_MODE=n UCX_POSIX_HUGETLB_MODE=n
run() { # expected-status-kind args...
  timeout 120 "$mpiexec" -n "$np" "$prog" "$@" >"$work/out" 2>"$work/err" && rc=0 || rc=$?
  ((rc != 124)) || fail "mpiexec hung (killed after 120 s): $(cat "$work/out" "$work/err")"
}

case $mode in
  basic)
    want=$((np * 2 + 4))
    set_free $want
    run $seg
    cat "$work/out"
    ((rc == 0)) || fail "mpiexec exited $rc: $(cat "$work/err")"
    [[ $(grep -c "ok $np peers" "$work/out") -eq $np ]] || fail "not every rank saw every peer's pattern"
    grep -q "^free drop $((np * 2))\$" "$work/out" || fail "the pool did not drop by exactly $((np * 2)) pages"
    grep -q "^free after 0\$" "$work/out" || fail "the pool did not come back after hugepool_mpi_segments_free"
    ;;
  short)
    want=$((np * 2 - 1))
    set_free $want
    run $seg
    cat "$work/out" "$work/err"
    ((rc == 0)) || fail "mpiexec exited $rc"
    [[ $(grep -c "error 12\$" "$work/out") -eq $np ]] || fail "not every rank returned ENOMEM"
    [[ $(grep -c "shared segment" "$work/err") -ge $np ]] || fail "not every rank printed a line"
    grep -q "cannot create a 4 MiB shared segment on 2 MB hugetlb pages" "$work/err" || fail "no shortage line"
    grep -q "^free drop 0\$" "$work/out" || fail "a failed collective kept pages"
    ;;
  kill)
    want=$((np * 2 + 4))
    set_free $want
    mnt=$(mktemp -d /tmp/hugepool-mpi-mnt.XXXXXX)
    mount -t hugetlbfs -o pagesize=2M none "$mnt"
    for on_mount in 0 1; do
      for stage in before during after; do
        for victim in 0 $((np - 1)); do
          HUGEPOOL_TEST_MOUNT=$on_mount run $seg $victim $stage
          ((rc != 0)) || fail "$stage/$victim: the job did not notice the killed rank"
          [[ $(avail) -eq $want ]] || fail "$stage/$victim (mount $on_mount): pool at $(avail) free, not $want"
          [[ -z $(ls -A "$mnt") ]] || fail "$stage/$victim: files left on the mount: $(ls -A "$mnt")"
          ! pgrep -f "^$prog" >/dev/null || fail "$stage/$victim: ranks left running"
          echo "ok: SIGKILL of rank $victim $stage the collective (segments on $([[ $on_mount == 1 ]] && echo hugetlbfs || echo memfd))"
        done
      done
    done
    ;;
  *) fail "mode $mode" ;;
esac
[[ $(avail) -eq $want ]] || fail "pool at $(avail) free after the job, not $want"
echo "segments.sh $mode with $np ranks: ok"
