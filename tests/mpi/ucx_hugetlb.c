/* SPDX-License-Identifier: BSD-3-Clause */
/* How much hugetlb memory MPI itself maps in each rank (no hugepool here):
 * after MPI_Init and one message between the ranks, the process's total
 * Shared_Hugetlb and Private_Hugetlb from its smaps.  With Debian's MPICH
 * (ch4:ucx) that is UCX's shared-memory transport, which the UCX variables
 * the tests set must keep off the pool. */
#include <mpi.h>
#include <stdio.h>

#include "kernel_view.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  static char buf[1 << 16];
  if (size > 1 && rank < 2) {
    MPI_Sendrecv_replace(buf, (int)sizeof(buf), MPI_BYTE, rank ^ 1, 0, rank ^ 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  printf("rank %d hugetlb_kb %ld\n", rank, smaps_total("Shared_Hugetlb") + smaps_total("Private_Hugetlb"));
  MPI_Finalize();
  return 0;
}
