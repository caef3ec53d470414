/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hugepool MPI layer: node-shared hugetlb segments for the ranks of a
 * communicator (libhugepool_mpi, pkg-config hugepool-mpi, CMake
 * find_package(hugepool COMPONENTS mpi) -> hugepool::hugepool_mpi).
 *
 * One collective call gives every rank its own segment (see
 * hugepool_segment_create() in hugepool.h) and the addresses, in its own
 * address space, of the segments of every rank on its node, so ranks copy
 * into each other's communication buffers with loads and stores.  The call
 * succeeds in every rank of the communicator or fails in every rank (with
 * the same errno, one line on stderr in each): it never leaves some ranks
 * with segments and others waiting.
 */
#ifndef HUGEPOOL_MPI_H
#define HUGEPOOL_MPI_H

#include <mpi.h>
#include <stddef.h>

#include "hugepool/hugepool.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hugepool_mpi_segments {
  MPI_Comm node_comm; /* the ranks of the communicator on this node (owned: freed with the segments) */
  int node_rank;      /* this rank in node_comm */
  int node_size;
  void *local;                /* this rank's segment: peers[node_rank] */
  size_t local_size;          /* its bytes (whole pages) */
  void **peers;               /* [node_size]: every node rank's segment, mapped here */
  size_t *peer_sizes;         /* [node_size]: their bytes */
  hugepool_segment *segments; /* [node_size]: for hugepool_mpi_free() */
} hugepool_mpi_segments;

/* Collective over `comm`: splits it by node (MPI_Comm_split_type with
 * MPI_COMM_TYPE_SHARED), creates a segment of `bytes` bytes in every rank
 * (bytes may differ between ranks; opts may be NULL) and maps every node
 * peer's segment.  Returns 0 in every rank, or -1 in every rank with errno
 * set to the error of a rank that failed (ENOMEM: a pool too small) and
 * nothing held anywhere. */
HUGEPOOL_API int hugepool_mpi_segments_create(MPI_Comm comm, size_t bytes, const hugepool_segment_options *opts,
                                              hugepool_mpi_segments *out);

/* Collective over the communicator given to hugepool_mpi_segments_create():
 * a barrier on the node (no rank unmaps a segment a peer may still be
 * writing), then unmaps every segment and frees node_comm.  Returns 0, or -1
 * with errno = EINVAL for segments that were not created. */
HUGEPOOL_API int hugepool_mpi_segments_free(hugepool_mpi_segments *segs);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_MPI_H */
