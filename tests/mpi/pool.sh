# Sourced by the tests/mpi scripts that run MPI programs on a pool of a known
# size: fail, avail (free pages nobody has reserved) and pool_take WANT,
# which takes the machine-wide pool lock (tests/pool/pool-lock.sh), makes
# $work, sets the pool so that exactly WANT pages are free and restores it
# (and removes $work) on exit.
pool=/sys/kernel/mm/hugepages/hugepages-2048kB
fail() { echo "FAIL: $*" >&2; exit 1; }
avail() { echo $(($(cat $pool/free_hugepages) - $(cat $pool/resv_hugepages))); }
source "$(dirname "${BASH_SOURCE[0]}")/../pool/pool-lock.sh"
pool_take() {
  work=$(mktemp -d)
  trap 'pool_release; rm -rf "$work"' EXIT
  pool_hold "$1"
  # UCX's SysV shared memory stays off the pool (mpi/README.md: UCX variables).
  export UCX_SYSV_HUGETLB_MODE=n UCX_POSIX_HUGETLB_MODE=n
}
