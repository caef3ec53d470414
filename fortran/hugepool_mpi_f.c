/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The C half of the Fortran module hugepool_mpi: the collective segments of
 * include/hugepool/mpi.h behind an opaque pointer, with the communicator
 * passed as a Fortran handle (MPI_Fint, what `use mpi` gives and what
 * type(MPI_Comm)%MPI_VAL holds in `use mpi_f08`), converted here with
 * MPI_Comm_f2c: the Fortran side never sees the C MPI ABI.
 */
#include <errno.h>
#include <stdlib.h>

#include "hugepool/mpi.h"

#define HP_F_API __attribute__((visibility("default")))

HP_F_API int hugepool_f_mpi_segments_create(MPI_Fint comm, size_t bytes, int node, void **impl, MPI_Fint *node_comm,
                                            int *node_rank, int *node_size);
HP_F_API int hugepool_f_mpi_segments_free(void **impl);
HP_F_API void *hugepool_f_mpi_peer(void *impl, int rank, size_t *bytes);

/* Returns 0 or the errno of the collective (the same in every rank). */
int hugepool_f_mpi_segments_create(MPI_Fint comm, size_t bytes, int node, void **impl, MPI_Fint *node_comm,
                                   int *node_rank, int *node_size) {
  *impl = NULL;
  hugepool_mpi_segments *segs = calloc(1, sizeof(*segs));
  hugepool_mpi_segments scratch;
  hugepool_segment_options opts = HUGEPOOL_SEGMENT_OPTIONS_INIT;
  opts.node = node;
  /* Without memory for the descriptor this rank still takes part, asking for
   * 0 bytes: the collective then fails in every rank instead of hanging. */
  int rc = hugepool_mpi_segments_create(MPI_Comm_f2c(comm), segs ? bytes : 0, &opts, segs ? segs : &scratch);
  if (rc != 0) {
    int err = segs ? (errno ? errno : EIO) : ENOMEM;
    free(segs);
    return err;
  }
  *impl = segs;
  *node_comm = MPI_Comm_c2f(segs->node_comm);
  *node_rank = segs->node_rank;
  *node_size = segs->node_size;
  return 0;
}

int hugepool_f_mpi_segments_free(void **impl) {
  hugepool_mpi_segments *segs = *impl;
  if (!segs) return EINVAL;
  int rc = hugepool_mpi_segments_free(segs);
  int err = rc == 0 ? 0 : errno;
  free(segs);
  *impl = NULL;
  return err;
}

void *hugepool_f_mpi_peer(void *impl, int rank, size_t *bytes) {
  const hugepool_mpi_segments *segs = impl;
  *bytes = 0;
  if (!segs || rank < 0 || rank >= segs->node_size) return NULL;
  *bytes = segs->peer_sizes[rank];
  return segs->peers[rank];
}
