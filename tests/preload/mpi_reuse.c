/* SPDX-License-Identifier: BSD-3-Clause */
/* An MPI program that simply mallocs its message buffers (as unmodified
 * codes do): each iteration allocates, sends / receives, checks and frees,
 * so later iterations reuse freed buffers.  Prints per rank whether the data
 * always arrived intact and the page size the kernel reports for the last
 * buffers (from /proc/self/smaps). */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long page_kb_of(const void *p) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) return -1;
  char line[512];
  int inside = 0;
  long kb = -1;
  uintptr_t a = (uintptr_t)p;
  while (fgets(line, sizeof(line), f)) {
    unsigned long s, e;
    if (sscanf(line, "%lx-%lx ", &s, &e) == 2 && strchr(line, ':') > strchr(line, ' ')) {
      inside = a >= s && a < e;
      continue;
    }
    if (inside && sscanf(line, "KernelPageSize: %ld kB", &kb) == 1) break;
  }
  fclose(f);
  return kb;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const size_t sizes[] = {4u << 20, 16u << 20, 3u << 20, 16u << 20, 4u << 20};
  long bad = 0, send_kb = -1, recv_kb = -1;
  uint64_t digest = 0;
  for (int it = 0; it < 20; it++) {
    size_t n = sizes[it % 5] / sizeof(uint64_t);
    uint64_t *sendbuf = malloc(n * sizeof(uint64_t));
    uint64_t *recvbuf = malloc(n * sizeof(uint64_t));
    for (size_t i = 0; i < n; i++) sendbuf[i] = (uint64_t)rank * 1000003u + (uint64_t)it * 7919u + i;
    int peer = (rank + 1) % size, from = (rank + size - 1) % size;
    MPI_Sendrecv(sendbuf, (int)n, MPI_UINT64_T, peer, it, recvbuf, (int)n, MPI_UINT64_T, from, it, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    for (size_t i = 0; i < n; i++) {
      uint64_t want = (uint64_t)from * 1000003u + (uint64_t)it * 7919u + i;
      if (recvbuf[i] != want) bad++;
      digest = digest * 31 + recvbuf[i];
    }
    if (it == 19) {
      send_kb = page_kb_of(sendbuf);
      recv_kb = page_kb_of(recvbuf);
    }
    free(sendbuf);
    free(recvbuf);
  }
  printf("rank %d: errors %ld digest %016llx\n", rank, bad, (unsigned long long)digest);
  fprintf(stderr, "rank %d: page kB send %ld recv %ld\n", rank, send_kb, recv_kb);
  MPI_Finalize();
  return bad != 0;
}
