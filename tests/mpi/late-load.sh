#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A program without MPI that loads a module linked with MPI late, with
# dlopen(RTLD_LOCAL) as Python loads an mpi4py-style extension module, run
# as `mpiexec -n 2 hugepool-run ./prog module.so`: its MPI_Alloc_mem memory
# is on hugetlb pages (the kernel's smaps, read in each rank), as for a
# program linked with MPI; plain and with --mpi off it is not.
#   late-load.sh MPIEXEC PROGRAM MODULE HUGEPOOL_RUN
set -euo pipefail
mpiexec=$1 prog=$2 module=$3 run=$4
source "$(dirname "$0")/pool.sh"
want=24 # 2 ranks: two buffers each, and what MPICH mallocs at 1 MiB and up
pool_take "$want"

go() { # name, launcher words...
  local name=$1
  shift
  timeout 120 "$mpiexec" -n 2 "$@" "$prog" "$module" >"$work/$name" 2>"$work/$name.err" ||
    fail "$name: exit status $?: $(cat "$work/$name" "$work/$name.err")"
  cat "$work/$name"
  [[ $(grep -c ' bad 0$' "$work/$name") -eq 2 ]] || fail "$name: wrong results: $(cat "$work/$name.err")"
}
go plain
go run "$run" --
go off "$run" --mpi off --
# The small request tells who served it: MPICH's own MPI_Alloc_mem is
# malloc, which leaves 1000 bytes on 4 KB pages even under the preload.
[[ $(grep -c 'small 4 bad' "$work/plain") -eq 2 ]] || fail "plain: MPI_Alloc_mem on hugetlb pages?"
[[ $(grep -c 'big 2048 small 2048 bad 0$' "$work/run") -eq 2 ]] ||
  fail "hugepool-run: MPI_Alloc_mem of a late-loaded MPI not on hugetlb pages"
[[ $(grep -c 'small 4 bad' "$work/off") -eq 2 ]] || fail "--mpi off: the MPI entry points still served MPI_Alloc_mem"
[[ $(avail) -eq $want ]] || fail "pool at $(avail) after the runs, not $want"
echo "late-load.sh: ok"
