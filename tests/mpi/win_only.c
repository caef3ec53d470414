/* SPDX-License-Identifier: BSD-3-Clause */
/* MPI_Win_allocate_shared alone (no MPI_Win_create of the program's own):
 * a 16 MiB window per node, every rank writes its part and reads its
 * neighbour's through MPI_Win_shared_query.  Prints "rank R ok" or
 * "rank R bad". */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm node;
  int r, n;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &r);
  MPI_Comm_size(node, &n);
  MPI_Aint part = (16 << 20) / n;
  char *base = NULL;
  MPI_Win win;
  MPI_Win_allocate_shared(part, 1, MPI_INFO_NULL, node, &base, &win);
  memset(base, 'a' + r, (size_t)part);
  MPI_Win_fence(0, win);
  int peer = (r + 1) % n, du = 0;
  MPI_Aint sz = 0;
  char *theirs = NULL;
  MPI_Win_shared_query(win, peer, &sz, &du, &theirs);
  int ok = sz == part && theirs[0] == 'a' + peer && theirs[part - 1] == 'a' + peer;
  MPI_Win_fence(0, win);
  MPI_Win_free(&win);
  printf("rank %d %s\n", r, ok ? "ok" : "bad");
  MPI_Comm_free(&node);
  MPI_Finalize();
  return !ok;
}
