#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# One unmodified MPI-3 program (win_shared.c), built twice here, with mpicc
# (MPICH) and mpicc.openmpi, each run under its own launcher and
# hugepool-run with nothing but hugepool-run's own choice of MPI entry
# points (no HUGEPOOL_MPI_PRELOAD_LIB): the same results as without hugepool,
# MPI_Alloc_mem on 2 MB pages and, with --mpi-win-shared, the window on
# shared hugetlb pages, in every rank of both; the pool back where it was.
#   openmpi.sh HUGEPOOL_RUN SOURCE_DIR MPIEXEC
set -euo pipefail
run=$1 src=$2 mpiexec=$3
command -v mpirun.openmpi >/dev/null && command -v mpicc.openmpi >/dev/null ||
  { echo "SKIP: Open MPI is not installed" >&2; exit 77; }
source "$(dirname "$0")/pool.sh"
np=2 want=$((2 * 24 + 8))
pool_take "$want"
unset HUGEPOOL_MPI_PRELOAD_LIB
mpicc.openmpi -O2 -I"$src" -o "$work/prog-openmpi" "$src/win_shared.c"
mpicc -O2 -I"$src" -o "$work/prog-mpich" "$src/win_shared.c"
# The two builds link different libraries (what a launcher could tell them by).
# (ldd's output read whole first: under pipefail, grep -q quitting at its
# match could end ldd with SIGPIPE and fail the pipeline, as it once did.)
libs_openmpi=$(ldd "$work/prog-openmpi") libs_mpich=$(ldd "$work/prog-mpich")
grep -q 'libmpi\.so\.40' <<<"$libs_openmpi" || fail "mpicc.openmpi did not link Open MPI's libmpi: $libs_openmpi"
grep -q 'libmpich\.so' <<<"$libs_mpich" || fail "mpicc did not link MPICH: $libs_mpich"
# as root, in a container: shared memory and loopback only
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1
go() { # mpi, name, launcher words...
  local mpi=$1 name=$1-$2
  shift 2
  local launch=(timeout 120 "$mpiexec" -n $np)
  [[ $mpi == openmpi ]] && launch=(timeout 120 mpirun.openmpi --allow-run-as-root --oversubscribe -n $np)
  "${launch[@]}" "$@" "$work/prog-$mpi" >"$work/$name" 2>"$work/$name.err" ||
    fail "$name: exit status $?: $(cat "$work/$name" "$work/$name.err")"
  cat "$work/$name"
  grep -q 'MPI entry points' "$work/$name.err" && fail "$name: entry points stood aside: $(cat "$work/$name.err")"
  grep ' result ' "$work/$name" | sort >"$work/$name.result"
  [[ $(grep -c ' bad 0$' "$work/$name.result") -eq $np ]] || fail "$name: wrong results"
}
for mpi in openmpi mpich; do
  go $mpi plain
  go $mpi run "$run" --
  go $mpi win "$run" --mpi-win-shared --
  cmp -s "$work/$mpi-plain.result" "$work/$mpi-run.result" || fail "$mpi: hugepool-run changed the results"
  cmp -s "$work/$mpi-plain.result" "$work/$mpi-win.result" || fail "$mpi: --mpi-win-shared changed the results"
  [[ $(grep -c 'alloc_mem big 4 small 4$' "$work/$mpi-plain") -eq $np ]] || fail "$mpi plain: MPI_Alloc_mem on hugetlb pages?"
  [[ $(grep -c 'alloc_mem big 2048 small 2048$' "$work/$mpi-run") -eq $np ]] ||
    fail "$mpi under hugepool-run: MPI_Alloc_mem not on hugetlb pages"
  [[ $(grep -c 'alloc_mem big 2048 small 2048$' "$work/$mpi-win") -eq $np ]] ||
    fail "$mpi under --mpi-win-shared: MPI_Alloc_mem not on hugetlb pages"
  [[ $(grep -c 'pages win 2048 shared_hugetlb 2048$' "$work/$mpi-win") -eq $np ]] ||
    fail "$mpi --mpi-win-shared: window not on shared hugetlb pages"
  [[ $(avail) -eq $want ]] || fail "$mpi: pool at $(avail) after the runs, not $want"
done
# An Open MPI that cannot create a window over memory it did not allocate
# (no single-copy between the ranks: osc/rdma refuses MPI_Win_create) gets
# its own window back, with a line saying why, instead of an abort.
mpicc.openmpi -O2 -o "$work/win-only" "$src/win_only.c"
OMPI_MCA_btl_vader_single_copy_mechanism=none timeout 120 mpirun.openmpi --allow-run-as-root --oversubscribe \
  -n $np "$run" --mpi-win-shared -- "$work/win-only" >"$work/refused" 2>"$work/refused.err" ||
  fail "a refused MPI_Win_create: exit status $?: $(cat "$work/refused" "$work/refused.err")"
[[ $(grep -c '^rank [0-9] ok$' "$work/refused") -eq $np ]] || fail "a refused MPI_Win_create: $(cat "$work/refused")"
grep -q 'refused MPI_Win_create over a node-shared hugetlb segment' "$work/refused.err" ||
  fail "a refused MPI_Win_create: no line says why: $(cat "$work/refused.err")"
[[ $(avail) -eq $want ]] || fail "pool at $(avail) after a refused window, not $want"
echo "openmpi.sh: ok"
