#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs the build tree into a temporary prefix and builds a downstream MPI
# program against the hugepool-mpi component, with find_package(hugepool
# COMPONENTS mpi) and with pkg-config, and runs both with mpiexec -n 2; then
# runs an unmodified MPI program under the installed hugepool-run, which must
# preload the installed MPI entry points and put MPI_Alloc_mem memory on
# hugetlb pages (each rank's smaps).
#   install-test.sh BUILD_DIR MPIEXEC [UNMODIFIED_MPI_PROGRAM]
set -euo pipefail
build=$1 mpiexec=$2 unmodified=${3:-}
src=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
pool=/sys/kernel/mm/hugepages/hugepages-2048kB
source "$src/../pool/pool-lock.sh"
trap 'pool_release; rm -rf "$tmp"' EXIT
pool_hold
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
libdir=$(find "$tmp/prefix" -name hugepool-mpi.pc -printf '%h\n' | head -n 1)
g++ -std=c++17 "$src/consumer/mpi_consumer.cpp" $(PKG_CONFIG_PATH=$libdir pkg-config --cflags --libs hugepool-mpi) \
  -o "$tmp/pc-consumer"
# a page for each rank, and the unmodified program's buffers, above what is in use
pool_set 56
# UCX's SysV shared memory stays off the pool (mpi/README.md: UCX variables).
export UCX_SYSV_HUGETLB_MODE=n UCX_POSIX_HUGETLB_MODE=n
for exe in "$tmp/consumer/mpi_consumer" "$tmp/pc-consumer"; do
  out=$(LD_LIBRARY_PATH=$tmp/prefix/lib timeout 120 "$mpiexec" -n 2 "$exe")
  echo "$out"
  [[ $(grep -c "read every node peer's segment" <<<"$out") -eq 2 ]] || { echo "FAIL: $exe"; exit 1; }
done
echo "install test: hugepool-mpi consumers (find_package, pkg-config) built and ran"
[[ -n $unmodified ]] || exit 0
run=$tmp/prefix/bin/hugepool-run
mpilib=$(find "$tmp/prefix" -name libhugepool_mpi_preload.so | head -n 1)
[[ -n $mpilib ]] || { echo "FAIL: libhugepool_mpi_preload.so not installed"; exit 1; }
preload=$("$run" -- sh -c 'echo "$LD_PRELOAD"')
[[ $(readlink -f "${preload##* }") == $(readlink -f "$mpilib") ]] ||
  { echo "FAIL: the installed hugepool-run preloads '$preload', not the installed $mpilib"; exit 1; }
out=$(timeout 120 "$mpiexec" -n 2 "$run" -- "$unmodified")
echo "$out"
[[ $(grep -c 'alloc_mem big 2048 small 2048$' <<<"$out") -eq 2 && $(grep -c ' bad 0$' <<<"$out") -eq 2 ]] ||
  { echo "FAIL: the installed hugepool-run did not put MPI_Alloc_mem memory on hugetlb pages"; exit 1; }
echo "install test: mpiexec -n 2 <installed>/hugepool-run ./prog: MPI_Alloc_mem on hugetlb pages"
