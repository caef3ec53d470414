#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs the build tree into a temporary prefix and builds downstream
# Fortran programs against it: with find_package(hugepool COMPONENTS fortran
# fortran_mpi) and with pkg-config (hugepool-fortran, hugepool-fortran-mpi);
# runs them on a pool of 8 free pages (with-pool).  The .mod files must be in
# the compiler's directory, include/hugepool/fortran/<id>-<major>.
# The pool lock is held only while the programs run.
#   install-test.sh BUILD_DIR MPIEXEC WITH-POOL
set -euo pipefail
build=$1 mpiexec=$2 with_pool=$3
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
major=$(gfortran -dumpversion | cut -d. -f1)
for m in hugepool.mod hugepool_mpi.mod; do
  [[ -f $tmp/prefix/include/hugepool/fortran/gnu-$major/$m ]] || fail "$m not in include/hugepool/fortran/gnu-$major"
done
cmake -S "$here/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
pc=$(find "$tmp/prefix" -name hugepool-fortran.pc -printf '%h\n' | head -n 1)
export PKG_CONFIG_PATH=$pc
gfortran "$here/consumer/consumer.f90" $(pkg-config --cflags --libs hugepool-fortran) -o "$tmp/pc-consumer"
mpifort "$here/consumer/mpi_consumer.f90" $(pkg-config --cflags --libs hugepool-fortran-mpi) -o "$tmp/pc-mpi-consumer"
export LD_LIBRARY_PATH=$tmp/prefix/lib:$tmp/prefix/lib/x86_64-linux-gnu
export UCX_SYSV_HUGETLB_MODE=n UCX_POSIX_HUGETLB_MODE=n
for exe in "$tmp/consumer/fortran_consumer" "$tmp/pc-consumer"; do
  out=$("$with_pool" 8 "$exe"); echo "$out"
  [[ $out == "consumer: kind hugetlb-2M sum 524288.0" ]] || fail "$exe"
done
for exe in "$tmp/consumer/fortran_mpi_consumer" "$tmp/pc-mpi-consumer"; do
  out=$("$with_pool" 8 timeout 120 "$mpiexec" -n 2 "$exe"); echo "$out"
  [[ $(grep -c "read 2 node segments" <<<"$out") -eq 2 ]] || fail "$exe"
done
echo "install test: Fortran consumers (find_package, pkg-config) built and ran"
