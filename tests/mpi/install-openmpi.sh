#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The installed tree for Open MPI: a downstream program built against the
# Open MPI flavour of the MPI layer (libhugepool_mpi_openmpi), with
# find_package(hugepool COMPONENTS mpi_openmpi) and with pkg-config
# hugepool-mpi-openmpi, run with mpirun.openmpi -n 2: each links Open MPI's
# libmpi and no MPICH, every rank reads its node peers' segments, which are
# on hugetlb pages; then an unmodified Open MPI program under the installed
# hugepool-run, with no HUGEPOOL_MPI_PRELOAD_LIB: MPI_Alloc_mem on 2 MB pages.
#   install-openmpi.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
command -v mpirun.openmpi >/dev/null && command -v mpicc.openmpi >/dev/null ||
  { echo "SKIP: Open MPI is not installed" >&2; exit 77; }
source "$(dirname "$0")/pool.sh"
np=2 want=56 # a segment page per rank, the unmodified program's buffers, Open MPI's own large mallocs
pool_take "$want"
unset HUGEPOOL_MPI_PRELOAD_LIB
cmake --install "$build" --prefix "$work/prefix" >/dev/null
libdir=$(find "$work/prefix" -name hugepool-mpi-openmpi.pc -printf '%h\n' | head -n 1)
[[ -n $libdir ]] || fail "hugepool-mpi-openmpi.pc not installed"
cmake -S "$src/consumer-openmpi" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" >"$work/cmake.log" 2>&1 ||
  fail "find_package(hugepool COMPONENTS mpi_openmpi): $(cat "$work/cmake.log")"
cmake --build "$work/consumer" >/dev/null
g++ -std=c++17 "$src/consumer/mpi_consumer.cpp" $(PKG_CONFIG_PATH=$libdir pkg-config --cflags --libs hugepool-mpi-openmpi) \
  -o "$work/pc-consumer"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1
for exe in "$work/consumer/mpi_consumer" "$work/pc-consumer"; do
  deps=$(LD_LIBRARY_PATH=$work/prefix/lib ldd "$exe")
  grep -q 'libhugepool_mpi_openmpi\.so\.0 => '"$work" <<<"$deps" || fail "$exe: not linked with the installed libhugepool_mpi_openmpi"
  grep -q 'libmpi\.so\.40' <<<"$deps" || fail "$exe: not linked with Open MPI's libmpi"
  grep -q 'libmpich' <<<"$deps" && fail "$exe: linked with MPICH too"
  out=$(LD_LIBRARY_PATH=$work/prefix/lib timeout 120 mpirun.openmpi --oversubscribe -x LD_LIBRARY_PATH -n $np "$exe" 2>&1) ||
    fail "$exe: exit status $?: $out"
  echo "$out"
  [[ $(grep -c "read every node peer's segment" <<<"$out") -eq $np ]] || fail "$exe: a rank did not read its peers"
done
echo "install test (Open MPI): hugepool-mpi-openmpi consumers (find_package, pkg-config) built and ran"
mpicc.openmpi -O2 -I"$src" -o "$work/prog" "$src/win_shared.c"
out=$(timeout 120 mpirun.openmpi --oversubscribe -n $np "$work/prefix/bin/hugepool-run" --mpi-win-shared -- "$work/prog" 2>&1) ||
  fail "unmodified program: exit status $?: $out"
echo "$out"
grep -q 'MPI entry points' <<<"$out" && fail "the installed entry points stood aside"
[[ $(grep -c 'alloc_mem big 2048 small 2048$' <<<"$out") -eq $np && $(grep -c ' bad 0$' <<<"$out") -eq $np ]] ||
  fail "the installed hugepool-run did not put MPI_Alloc_mem memory on hugetlb pages"
[[ $(grep -c 'pages win 2048 shared_hugetlb 2048$' <<<"$out") -eq $np ]] || fail "window not on shared hugetlb pages"
[[ $(avail) -eq $want ]] || fail "pool at $(avail) after the runs, not $want"
echo "install test (Open MPI): mpirun.openmpi -n 2 <installed>/hugepool-run ./prog: MPI_Alloc_mem on hugetlb pages"
