// SPDX-License-Identifier: BSD-3-Clause
// Downstream use of the MPI layer through its C++ wrapper: every rank writes
// its rank into its segment and reads its node peers'.
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <system_error>

#include "hugepool/mpi.hpp"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, bad = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  try {
    hugepool::mpi::node_segments segs(MPI_COMM_WORLD, 1 << 20);
    std::memset(segs.local(), 'a' + segs.node_rank(), segs.size());
    MPI_Barrier(segs.node_comm());
    for (int i = 0; i < segs.node_size(); i++) bad |= segs.peer<char>(i)[segs.peer_size(i) - 1] != 'a' + i;
    MPI_Barrier(segs.node_comm());
  } catch (const std::system_error &e) {
    std::printf("rank %d: %s\n", rank, e.what());
    bad = 1;
  }
  if (!bad) std::printf("rank %d: read every node peer's segment\n", rank);
  MPI_Finalize();
  return bad;
}
