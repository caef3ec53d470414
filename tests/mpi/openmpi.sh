#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# An unmodified MPI-3 program built with Open MPI (win_shared.c, compiled by
# mpicc.openmpi here) under mpirun.openmpi and hugepool-run, with the MPI
# entry points built against Open MPI's headers: the same results as without
# hugepool, MPI_Alloc_mem on 2 MB pages, and with --mpi-win-shared the window
# on shared hugetlb pages; the pool back where it was.
#   openmpi.sh HUGEPOOL_RUN ENTRY_POINTS_OPENMPI SOURCE_DIR
set -euo pipefail
run=$1 lib=$2 src=$3
command -v mpirun.openmpi >/dev/null && command -v mpicc.openmpi >/dev/null ||
  { echo "SKIP: Open MPI is not installed" >&2; exit 77; }
source "$(dirname "$0")/pool.sh"
np=2 want=$((2 * 24 + 8))
pool_take "$want"
mpicc.openmpi -O2 -I"$src" -o "$work/prog" "$src/win_shared.c"
# as root, in a container: shared memory and loopback only
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 HUGEPOOL_MPI_PRELOAD_LIB=$lib
go() { # name, launcher words...
  local name=$1
  shift
  timeout 120 mpirun.openmpi --allow-run-as-root --oversubscribe -x HUGEPOOL_MPI_PRELOAD_LIB -n $np "$@" "$work/prog" \
    >"$work/$name" 2>"$work/$name.err" || fail "$name: exit status $?: $(cat "$work/$name" "$work/$name.err")"
  cat "$work/$name"
  grep -q 'not the one hugepool was built with' "$work/$name.err" && fail "$name: entry points stood aside"
  grep ' result ' "$work/$name" | sort >"$work/$name.result"
  [[ $(grep -c ' bad 0$' "$work/$name.result") -eq $np ]] || fail "$name: wrong results"
}
go plain
go run "$run" --
go win "$run" --mpi-win-shared --
cmp -s "$work/plain.result" "$work/run.result" || fail "hugepool-run changed the results"
cmp -s "$work/plain.result" "$work/win.result" || fail "--mpi-win-shared changed the results"
[[ $(grep -c 'alloc_mem big 4 small 4$' "$work/plain") -eq $np ]] || fail "plain run: MPI_Alloc_mem on hugetlb pages?"
[[ $(grep -c 'alloc_mem big 2048 small 2048$' "$work/run") -eq $np ]] || fail "hugepool-run: MPI_Alloc_mem not on hugetlb pages"
[[ $(grep -c 'pages win 2048 shared_hugetlb 2048$' "$work/win") -eq $np ]] ||
  fail "--mpi-win-shared: window not on shared hugetlb pages"
[[ $(avail) -eq $want ]] || fail "pool at $(avail) after the runs, not $want"
echo "openmpi.sh: ok"
