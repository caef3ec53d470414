#!/usr/bin/env bash
# An unmodified MPI-3 program (MPI_Alloc_mem, MPI_Win_allocate_shared) run
# as is, under hugepool-run with the MPI entry points, and with
# HUGEPOOL_MPI_WIN_SHARED=1: same
# results every time, and the kernel shows hugetlb pages where hugepool-run
# said it would put them.
#   unmodified.sh MPIEXEC PROGRAM NP HUGEPOOL_RUN MPI_PRELOAD_LIB
set -euo pipefail
mpiexec=$1 prog=$2 np=$3 run=$4 mpilib=$5
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
go run env LD_PRELOAD="$mpilib" "$run" --
go win env LD_PRELOAD="$mpilib" HUGEPOOL_MPI_WIN_SHARED=1 "$run" --
cmp -s "$work/plain.result" "$work/run.result" || fail "hugepool-run changed the results"
cmp -s "$work/plain.result" "$work/win.result" || fail "HUGEPOOL_MPI_WIN_SHARED=1 changed the results"

# plain: nothing on hugetlb pages
[[ $(grep -c 'alloc_mem big 4 small 4$' "$work/plain") -eq $np ]] || fail "plain run: MPI_Alloc_mem on hugetlb pages?"
[[ $(grep -c 'pages win 4 ' "$work/plain") -eq $np ]] || fail "plain run: window on hugetlb pages?"
# under hugepool-run: MPI_Alloc_mem of any size on hugetlb pages, the window still MPI's own
[[ $(grep -c 'alloc_mem big 2048 small 2048$' "$work/run") -eq $np ]] || fail "hugepool-run: MPI_Alloc_mem not on hugetlb pages"
[[ $(grep -c 'pages win 4 ' "$work/run") -eq $np ]] || fail "hugepool-run: window moved without HUGEPOOL_MPI_WIN_SHARED=1"
# opt-in: the window on 2 MB hugetlb pages shared by every rank
[[ $(grep -c 'pages win 2048 shared_hugetlb 2048$' "$work/win") -eq $np ]] ||
  fail "HUGEPOOL_MPI_WIN_SHARED=1: window not on shared hugetlb pages"
[[ $(avail) -eq $want ]] || fail "pool at $(avail) after the runs, not $want"

echo "unmodified.sh with $np ranks: ok"
