# Sourced by the tests/mpi scripts that run MPI programs on a pool of a known
# size: fail, avail (free pages nobody has reserved) and pool_take WANT,
# which takes the machine-wide pool lock (as kernel_view.hpp's PoolGuard),
# makes $work, sets the pool so that exactly WANT pages are free and
# restores it (and removes $work) on exit.
pool=/sys/kernel/mm/hugepages/hugepages-2048kB
fail() { echo "FAIL: $*" >&2; exit 1; }
avail() { echo $(($(cat $pool/free_hugepages) - $(cat $pool/resv_hugepages))); }
pool_take() {
  exec 9>/tmp/hugepool-pool.lock
  flock 9
  old=$(cat $pool/nr_hugepages)
  work=$(mktemp -d)
  trap 'echo "$old" >$pool/nr_hugepages; rm -rf "$work"' EXIT
  echo $(($(cat $pool/nr_hugepages) - $(avail) + $1)) >$pool/nr_hugepages
  [[ $(avail) -eq $1 ]] || fail "cannot set the pool"
  # UCX's SysV shared memory stays off the pool (mpi/README.md: UCX variables).
  export UCX_SYSV_HUGETLB_MODE=n UCX_POSIX_HUGETLB_MODE=n
}
