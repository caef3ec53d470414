#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# openmpi.sh SOURCE-DIR BUILD-DIR TEST-BUILD-DIR: the hugepool_mpi module
# and its test built with Open MPI's wrappers (mpicc.openmpi,
# mpifort.openmpi: Open MPI's C ABI differs from MPICH's, so the C half and
# the MPI layer are compiled again against it) and run with mpirun.openmpi.
# Skipped (77) where Open MPI is not installed.
set -euo pipefail
src=$1 bin=$2 tbin=$3
for t in mpicc.openmpi mpifort.openmpi mpirun.openmpi; do
  command -v $t >/dev/null || { echo "SKIP: $t not installed"; exit 77; }
done
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
mkdir "$w/mod"
cp "$bin/fortran/mod/hugepool.mod" "$w/mod/" # the core module is MPI-free: the one gfortran built
mpicc.openmpi -O2 -c -I"$src/include" "$src/mpi/segments.c" -o "$w/segments.o"
mpicc.openmpi -O2 -c -I"$src/include" "$src/fortran/hugepool_mpi_f.c" -o "$w/hugepool_mpi_f.o"
mpifort.openmpi -O2 -c -J"$w/mod" -I"$w/mod" "$bin/fortran/hugepool_mpi.f90" -o "$w/hugepool_mpi.o"
mpifort.openmpi -O2 -cpp -DHP_F08 -c -I"$w/mod" -I"$tbin/mod" "$src/fortran/tests/mpi_segments.F90" -o "$w/f08.o"
mpifort.openmpi -O2 -cpp -c -I"$w/mod" -I"$tbin/mod" "$src/fortran/tests/mpi_segments.F90" -o "$w/mpi.o"
for f in f08 mpi; do
  mpifort.openmpi "$w/$f.o" "$w/hugepool_mpi.o" "$w/hugepool_mpi_f.o" "$w/segments.o" \
    "$tbin/libhugepool_fortran_test_support.a" -L"$bin/fortran" -lhugepool_fortran -L"$bin/lib" -lhugepool \
    $(mpicc.openmpi -showme:link) -Wl,-rpath,"$bin/fortran:$bin/lib" -o "$w/test-$f"
done
# A container: no CMA between ranks, and root is fine.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
for f in f08 mpi; do
  echo "== Open MPI, use $([[ $f == f08 ]] && echo mpi_f08 || echo mpi)"
  "$src/fortran/tests/mpi.sh" mpirun.openmpi "$w/test-$f"
done
