#!/usr/bin/env bash
# Installs the build tree into a temporary prefix and builds a downstream MPI
# program against the hugepool-mpi component, with find_package(hugepool
# COMPONENTS mpi) and with pkg-config, and runs both with mpiexec -n 2.
set -euo pipefail
build=$1 mpiexec=$2
src=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
pool=/sys/kernel/mm/hugepages/hugepages-2048kB
exec 9>/tmp/hugepool-pool.lock
flock 9
old=$(cat $pool/nr_hugepages)
trap 'echo "$old" >$pool/nr_hugepages; rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
libdir=$(find "$tmp/prefix" -name hugepool-mpi.pc -printf '%h\n' | head -n 1)
g++ -std=c++17 "$src/consumer/mpi_consumer.cpp" $(PKG_CONFIG_PATH=$libdir pkg-config --cflags --libs hugepool-mpi) \
  -o "$tmp/pc-consumer"
# a page for each rank, above what is in use
echo $(($(cat $pool/nr_hugepages) - $(cat $pool/free_hugepages) + $(cat $pool/resv_hugepages) + 2)) >$pool/nr_hugepages
export UCX_POSIX_HUGETLB_MODE=n UCX_SYSV_HUGETLB_MODE=n
for exe in "$tmp/consumer/mpi_consumer" "$tmp/pc-consumer"; do
  out=$(LD_LIBRARY_PATH=$tmp/prefix/lib timeout 120 "$mpiexec" -n 2 "$exe")
  echo "$out"
  [[ $(grep -c "read every node peer's segment" <<<"$out") -eq 2 ]] || { echo "FAIL: $exe"; exit 1; }
done
echo "install test: hugepool-mpi consumers (find_package, pkg-config) built and ran"
