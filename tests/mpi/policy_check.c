/* SPDX-License-Identifier: BSD-3-Clause */
/* Asks the core (malloc, through the preload) and the MPI entry points
 * (MPI_Alloc_mem) for the same buffer, larger than the pool, and prints
 * what each did: "core refused 1 mpi refused 1".  (policy.sh) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *volatile keep; /* so that the compiler keeps malloc and free */

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  size_t size = (size_t)256 << 20;
  keep = malloc(size);
  int core_refused = keep == NULL;
  free(keep);
  void *q = NULL;
  int rc = MPI_Alloc_mem((MPI_Aint)size, MPI_INFO_NULL, &q);
  if (rc == MPI_SUCCESS) {
    memset(q, 1, size);
    MPI_Free_mem(q);
  }
  printf("core refused %d mpi refused %d\n", core_refused, rc != MPI_SUCCESS);
  MPI_Finalize();
  return 0;
}
