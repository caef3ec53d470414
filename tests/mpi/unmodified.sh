#!/usr/bin/env bash
# An unmodified MPI-3 program (MPI_Alloc_mem, MPI_Win_allocate_shared) run
# as is, under hugepool-run, and under hugepool-run --mpi-win-shared: same
# results every time, and the kernel shows hugetlb pages where hugepool-run
# said it would put them.  A program without MPI never loads the MPI part.
#   unmodified.sh MPIEXEC PROGRAM NP HUGEPOOL_RUN
set -euo pipefail
mpiexec=$1 prog=$2 np=$3 run=$4
pool=/sys/kernel/mm/hugepages/hugepages-2048kB
fail() { echo "FAIL: $*" >&2; exit 1; }
avail() { echo $(($(cat $pool/free_hugepages) - $(cat $pool/resv_hugepages))); }
exec 9>/tmp/hugepool-pool.lock
flock 9
old=$(cat $pool/nr_hugepages)
work=$(mktemp -d)
trap 'echo "$old" >$pool/nr_hugepages; rm -rf "$work"' EXIT
want=$((np * 24 + 8)) # MPI_Alloc_mem buffers, the window, and what MPICH/UCX malloc at 1 MiB and up
echo $(($(cat $pool/nr_hugepages) - $(avail) + want)) >$pool/nr_hugepages
[[ $(avail) -eq $want ]] || fail "cannot set the pool"
export UCX_POSIX_HUGETLB_MODE=n UCX_SYSV_HUGETLB_MODE=n

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
cmp -s "$work/plain.result" "$work/run.result" || fail "hugepool-run changed the results"
cmp -s "$work/plain.result" "$work/win.result" || fail "hugepool-run --mpi-win-shared changed the results"

# plain: nothing on hugetlb pages
[[ $(grep -c 'alloc_mem big 4 small 4$' "$work/plain") -eq $np ]] || fail "plain run: MPI_Alloc_mem on hugetlb pages?"
[[ $(grep -c 'pages win 4 ' "$work/plain") -eq $np ]] || fail "plain run: window on hugetlb pages?"
# under hugepool-run: MPI_Alloc_mem of any size on hugetlb pages, the window still MPI's own
[[ $(grep -c 'alloc_mem big 2048 small 2048$' "$work/run") -eq $np ]] || fail "hugepool-run: MPI_Alloc_mem not on hugetlb pages"
[[ $(grep -c 'pages win 4 ' "$work/run") -eq $np ]] || fail "hugepool-run: window moved without --mpi-win-shared"
# opt-in: the window on 2 MB hugetlb pages shared by every rank
[[ $(grep -c 'pages win 2048 shared_hugetlb 2048$' "$work/win") -eq $np ]] ||
  fail "--mpi-win-shared: window not on shared hugetlb pages"
[[ $(avail) -eq $want ]] || fail "pool at $(avail) after the runs, not $want"

# A program without MPI does not load the MPI entry points.
"$run" -- cat /proc/self/maps >"$work/maps"
grep -q libhugepool_preload "$work/maps" || fail "the preload is not loaded"
! grep -q libhugepool_mpi_preload "$work/maps" || fail "the MPI part was loaded into a program without MPI"
echo "unmodified.sh with $np ranks: ok"
