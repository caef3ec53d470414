# MPICH (ch4:ucx): two ranks that malloc, send, check and free 3-16 MiB
# buffers 20 times (tests/preload/mpi_reuse.c), the launcher under the
# preload too.  UCX's own hugetlb segments are switched off, so that the
# kernel's hugetlb figures are hugepool's alone.  The run lasts about a second:
# the ranks read their own smaps (check below) rather than being sampled.
POOL=100

unavailable() {
  [ -n "$mpi" ] || { echo "no MPI program built"; return 0; }
  command -v mpiexec >/dev/null || { echo "no mpiexec"; return 0; }
  return 1
}

prepare() { :; }

programs() {
  prog mpich-2-ranks procs/some 0 sh -c 'export UCX_SYSV_HUGETLB_MODE=n UCX_POSIX_HUGETLB_MODE=n
    mpiexec -n 2 "$mpi" 2>pages | sort'
}

# Both ranks' send and receive buffers on 2 MB pages under the preload (the
# program reads its own smaps), 4 KB plain and with an empty pool.
check_mpich-2-ranks() {
  local mode=$1 d=$2 want=2048
  case $mode in plain | empty) want=4 ;; eight) return ;; esac
  if [ "$(grep -c "page kB send $want recv $want" "$d/cwd/pages")" -eq 2 ]; then
    pass "mpich-2-ranks [$mode]: both ranks' send and receive buffers on $want kB pages (smaps)"
  else
    fail "mpich-2-ranks [$mode]: $(tr '\n' '|' <"$d/cwd/pages")"
  fi
}
