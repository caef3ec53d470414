#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# An unmodified MPI-3 program (MPI_Alloc_mem, MPI_Win_allocate_shared) run
# as is, as `mpiexec -n NP hugepool-run ./prog` (which preloads the MPI entry
# points by itself), with --mpi-win-shared, and with --mpi off: same results
# every time, and the kernel shows hugetlb pages where hugepool-run said it
# would put them.
#   unmodified.sh MPIEXEC PROGRAM NP HUGEPOOL_RUN
set -euo pipefail
mpiexec=$1 prog=$2 np=$3 run=$4
source "$(dirname "$0")/pool.sh"
want=$((np * 24 + 8)) # MPI_Alloc_mem buffers, the window, and what MPICH/UCX malloc at 1 MiB and up
pool_take "$want"

go() { # name, launcher words...
  local name=$1
  shift
  timeout 120 "$mpiexec" -n "$np" "$@" "$prog" >"$work/$name" 2>"$work/$name.err" ||
    fail "$name: exit status $?: $(cat "$work/$name" "$work/$name.err")"
  cat "$work/$name"
  grep -q 'hugepool.*short' "$work/$name.err" && fail "$name: the pool was short: $(cat "$work/$name.err")"
  grep ' result ' "$work/$name" | sort >"$work/$name.result"
  [[ $(grep -c ' bad 0$' "$work/$name.result") -eq $np ]] || fail "$name: wrong results"
}
go plain
go run "$run" --
go win "$run" --mpi-win-shared --
go off "$run" --mpi off --
go winyes env HUGEPOOL_MPI_WIN_SHARED=Yes "$run" -- # the switch's words, read by the MPI entry points
cmp -s "$work/plain.result" "$work/run.result" || fail "hugepool-run changed the results"
cmp -s "$work/plain.result" "$work/win.result" || fail "--mpi-win-shared changed the results"
cmp -s "$work/plain.result" "$work/off.result" || fail "--mpi off changed the results"

# plain: nothing on hugetlb pages
[[ $(grep -c 'alloc_mem big 4 small 4$' "$work/plain") -eq $np ]] || fail "plain run: MPI_Alloc_mem on hugetlb pages?"
[[ $(grep -c 'pages win 4 ' "$work/plain") -eq $np ]] || fail "plain run: window on hugetlb pages?"
# under hugepool-run: MPI_Alloc_mem of any size on hugetlb pages, the window still MPI's own
[[ $(grep -c 'alloc_mem big 2048 small 2048$' "$work/run") -eq $np ]] || fail "hugepool-run: MPI_Alloc_mem not on hugetlb pages"
[[ $(grep -c 'pages win 4 ' "$work/run") -eq $np ]] || fail "hugepool-run: window moved without --mpi-win-shared"
# --mpi off: MPICH's own MPI_Alloc_mem (malloc: the preload takes the 4 MiB one, not the small one)
[[ $(grep -c 'alloc_mem big 2048 small 4$' "$work/off") -eq $np ]] || fail "--mpi off: MPI_Alloc_mem still served"
# opt-in: the window on 2 MB hugetlb pages shared by every rank
[[ $(grep -c 'pages win 2048 shared_hugetlb 2048$' "$work/win") -eq $np ]] ||
  fail "--mpi-win-shared: window not on shared hugetlb pages"
[[ $(grep -c 'pages win 2048 shared_hugetlb 2048$' "$work/winyes") -eq $np ]] ||
  fail "HUGEPOOL_MPI_WIN_SHARED=Yes: window not on shared hugetlb pages"
[[ $(avail) -eq $want ]] || fail "pool at $(avail) after the runs, not $want"

echo "unmodified.sh with $np ranks: ok"
