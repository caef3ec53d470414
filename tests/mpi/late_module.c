/* SPDX-License-Identifier: BSD-3-Clause */
/* A module linked with MPI and loaded late (see late_load.c), as an
 * mpi4py-style Python extension module is: its MPI calls go through the
 * process's global scope first, where hugepool-run's MPI entry points are. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "kernel_view.h"

int late_module_run(void);
int late_module_run(void) {
  int argc = 0, rank = 0, bad = 0;
  char **argv = NULL;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char *big = NULL, *small = NULL;
  if (MPI_Alloc_mem(4 << 20, MPI_INFO_NULL, &big) != MPI_SUCCESS) bad |= 1;
  if (MPI_Alloc_mem(1000, MPI_INFO_NULL, &small) != MPI_SUCCESS) bad |= 2;
  if (!bad) {
    memset(big, rank + 1, 4 << 20);
    memset(small, rank + 1, 1000);
    /* each rank sends its buffer's first byte to the other: the memory works with MPI */
    char got = 0;
    int peer = rank ^ 1;
    MPI_Sendrecv(big, 1, MPI_CHAR, peer, 0, &got, 1, MPI_CHAR, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (got != peer + 1) bad |= 4;
    printf("rank %d late alloc_mem big %ld small %ld bad %d\n", rank, smaps_field(big, "KernelPageSize"),
           smaps_field(small, "KernelPageSize"), bad);
    MPI_Free_mem(small);
    MPI_Free_mem(big);
  }
  MPI_Finalize();
  return bad;
}
