/* SPDX-License-Identifier: BSD-3-Clause */
/* Node-shared segments for the ranks of an MPI communicator.
 *
 * The collective, in order:
 *  1. split the communicator by node (MPI_COMM_TYPE_SHARED);
 *  2. every rank creates its own segment (reserved and populated: a short
 *     pool fails here, in the rank that is short);
 *  3. all ranks of the communicator agree (allreduce): if one failed, all
 *     give back what they made and return the same error;
 *  4. the node's ranks exchange handles (allgather) and map each other's
 *     segments, checked by the core against their user and identity;
 *  5. agree again; on success every rank closes its creator descriptor (the
 *     mappings keep the files: nothing is left to reopen, and the pages go
 *     back to the pool when the last rank of the node exits).
 * A rank killed at any step takes its descriptor and mappings with it; the
 * files have no name, so nothing outlives the job's processes. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hugepool/mpi.h"

/* Every rank agrees on one error: 0 if all succeeded. */
static int agree(MPI_Comm comm, int err) {
  int worst = 0;
  if (MPI_Allreduce(&err, &worst, 1, MPI_INT, MPI_MAX, comm) != MPI_SUCCESS) return EIO;
  return worst;
}

static void release(hugepool_mpi_segments *s) {
  if (s->segments) {
    for (int i = 0; i < s->node_size; i++) {
      if (s->segments[i].addr) (void)hugepool_segment_unmap(&s->segments[i]);
    }
  }
  free(s->segments);
  free(s->peers);
  free(s->peer_sizes);
  if (s->node_comm != MPI_COMM_NULL) MPI_Comm_free(&s->node_comm);
  memset(s, 0, sizeof(*s));
  s->node_comm = MPI_COMM_NULL;
}

static int fail(hugepool_mpi_segments *s, int err, int mine, const char *what) {
  if (!mine) {
    /* The rank that failed printed why; every rank says it has nothing. */
    char line[256];
    int n = snprintf(line, sizeof(line),
                     "hugepool[%ld]: no shared segments created: a rank could not %s (%s); "
                     "none is held by any rank\n",
                     (long)getpid(), what, strerror(err));
    if (n > 0) (void)!write(STDERR_FILENO, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
  }
  release(s);
  errno = err;
  return -1;
}

int hugepool_mpi_segments_create(MPI_Comm comm, size_t bytes, const hugepool_segment_options *opts,
                                 hugepool_mpi_segments *out) {
  if (!out) {
    errno = EINVAL;
    return -1;
  }
  memset(out, 0, sizeof(*out));
  out->node_comm = MPI_COMM_NULL;
  int rank = 0;
  if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS ||
      MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &out->node_comm) != MPI_SUCCESS) {
    errno = EINVAL;
    return -1;
  }
  MPI_Comm_rank(out->node_comm, &out->node_rank);
  MPI_Comm_size(out->node_comm, &out->node_size);
  const int n = out->node_size, me = out->node_rank;
  out->segments = calloc((size_t)n, sizeof(*out->segments));
  out->peers = calloc((size_t)n, sizeof(*out->peers));
  out->peer_sizes = calloc((size_t)n, sizeof(*out->peer_sizes));
  hugepool_segment_handle *handles = calloc((size_t)n, sizeof(*handles));

  /* steps 2 and 3 */
  int err = 0;
  if (!out->segments || !out->peers || !out->peer_sizes || !handles)
    err = ENOMEM;
  else if (hugepool_segment_create(bytes, opts, &out->segments[me]) != 0)
    err = errno ? errno : EIO;
  int mine = err;
  err = agree(comm, err);
  if (err || !out->segments || !out->peers || !out->peer_sizes || !handles) { /* (the second: for the analyzer) */
    free(handles);
    return fail(out, err, mine, "create its segment");
  }

  /* steps 4 and 5 */
  if (MPI_Allgather(&out->segments[me].handle, (int)sizeof(*handles), MPI_BYTE, handles, (int)sizeof(*handles),
                    MPI_BYTE, out->node_comm) != MPI_SUCCESS) {
    err = EIO;
  }
  for (int i = 0; i < n && !err; i++) {
    if (i != me && hugepool_segment_map(&handles[i], &out->segments[i]) != 0) {
      err = errno ? errno : EIO;
      (void)fprintf(stderr, "hugepool[%ld]: cannot map the shared segment of node rank %d (pid %lld): %s\n",
                    (long)getpid(), i, (long long)handles[i].pid, strerror(err));
    }
  }
  free(handles);
  mine = err;
  err = agree(comm, err);
  if (err) return fail(out, err, mine, "map a node peer's segment");

  /* Every peer has mapped it: the descriptor has served its purpose. */
  close(out->segments[me].fd);
  out->segments[me].fd = -1;
  for (int i = 0; i < n; i++) {
    out->peers[i] = out->segments[i].addr;
    out->peer_sizes[i] = out->segments[i].size;
  }
  out->local = out->peers[me];
  out->local_size = out->peer_sizes[me];
  return 0;
}

int hugepool_mpi_segments_free(hugepool_mpi_segments *segs) {
  if (!segs || segs->node_comm == MPI_COMM_NULL || !segs->segments) {
    errno = EINVAL;
    return -1;
  }
  MPI_Barrier(segs->node_comm);
  release(segs);
  return 0;
}
