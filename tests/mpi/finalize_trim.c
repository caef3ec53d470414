/* SPDX-License-Identifier: BSD-3-Clause */
/* A rank that finishes early gives its cached pages back: run as
 * `mpiexec -n 2 hugepool-run ./prog FLAG` on a pool nobody else changes.
 * Rank 0 allocates, touches and frees a 32 MiB buffer (its cache keeps the
 * 16 pages: the pool's free count does not rise), then calls MPI_Finalize
 * and stays alive until rank 1 has made FLAG.  Rank 1 watches the node's
 * free pool (the kernel's count) rise by those 16 pages while rank 0 sits in
 * or after MPI_Finalize.  Each rank prints one line with "bad 0" when its
 * checks held. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { BUFFER_PAGES = 16 };

static long avail(void) {
  long v[2] = {-1, -1};
  const char *names[2] = {"/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages",
                          "/sys/kernel/mm/hugepages/hugepages-2048kB/resv_hugepages"};
  for (int i = 0; i < 2; i++) {
    FILE *f = fopen(names[i], "r");
    if (!f || fscanf(f, "%ld", &v[i]) != 1) v[i] = -1;
    if (f) (void)fclose(f);
  }
  return v[0] < 0 || v[1] < 0 ? -1 : v[0] - v[1];
}

static void nap(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  (void)nanosleep(&t, NULL);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    (void)fprintf(stderr, "usage: %s FLAG-FILE\n", argv[0]);
    return 2;
  }
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) MPI_Abort(MPI_COMM_WORLD, 2);
  int bad = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    long before = avail();
    size_t bytes = (size_t)BUFFER_PAGES << 21;
    char *p = malloc(bytes);
    if (!p) MPI_Abort(MPI_COMM_WORLD, 3);
    memset(p, 1, bytes);
    long live = avail();
    free(p);
    long cached = avail();
    /* The precondition: the buffer was on pool pages and the cache kept them. */
    if (before - live < BUFFER_PAGES) bad |= 1;
    if (cached != live) bad |= 2;
    printf("rank 0 before %ld live %ld after-free %ld bad %d\n", before, live, cached, bad);
    (void)fflush(stdout);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  long start = rank == 1 ? avail() : 0;
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    MPI_Finalize();
    for (int i = 0; i < 600 && access(argv[1], F_OK) != 0; i++) nap(100);
    return bad;
  }
  long now = avail();
  for (int i = 0; i < 60 && now - start < BUFFER_PAGES; i++) {
    nap(100);
    now = avail();
  }
  if (now - start < BUFFER_PAGES) bad |= 4;
  printf("rank 1 start %ld now %ld bad %d\n", start, now, bad);
  (void)fflush(stdout);
  int fd = open(argv[1], O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd >= 0) (void)close(fd);
  MPI_Finalize();
  return bad;
}
