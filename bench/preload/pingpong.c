/* SPDX-License-Identifier: BSD-3-Clause */
/* MPI ping-pong between two ranks, 1 KB .. 64 MB.  By default the buffers
 * come from plain malloc (what an unmodified code does), so the same binary
 * can be run plain, under hugepool-run, or with glibc's hugetlb tunable.
 * --hand maps hugetlb buffers by hand (MAP_HUGETLB): the reference.
 * Rank 0 prints: bytes, median / min / max round-trip time (us), and the
 * median bandwidth (MB/s, 2*bytes per round trip). */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void *get(size_t n, int hand) {
  if (!hand) return malloc(n);
  size_t r = (n + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
  void *p = mmap(NULL, r, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

static void put(void *p, size_t n, int hand) {
  if (!hand) {
    free(p);
    return;
  }
  munmap(p, (n + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1));
}

/* One round trip: rank 0 sends and waits for the echo, rank 1 echoes. */
static void round_trip(char *buf, size_t n, int rank) {
  if (rank == 0) {
    MPI_Send(buf, (int)n, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
    MPI_Recv(buf, (int)n, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else {
    MPI_Recv(buf, (int)n, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(buf, (int)n, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
  }
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int hand = argc > 1 && strcmp(argv[1], "--hand") == 0;
  size_t max = argc > 2 ? strtoull(argv[2], NULL, 10) << 20 : (size_t)64 << 20;
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) printf("# bytes median_us min_us max_us MB/s\n");
  static const size_t kib[] = {1, 4, 16, 64, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536};
  for (size_t k = 0; k < sizeof(kib) / sizeof(kib[0]); k++) {
    size_t n = kib[k] << 10;
    if (n > max) break;
    char *buf = get(n, hand);
    if (!buf) {
      fprintf(stderr, "allocation of %zu failed\n", n);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(buf, rank + 1, n);
    int iters = (int)(((size_t)400 << 20) / n);
    if (iters < 20) iters = 20;
    if (iters > 500) iters = 500;
    double *t = malloc(sizeof(double) * (size_t)iters);
    for (int w = 0; w < 3; w++) round_trip(buf, n, rank); /* warm-up */
    for (int i = 0; i < iters; i++) {
      double t0 = MPI_Wtime();
      round_trip(buf, n, rank);
      t[i] = (MPI_Wtime() - t0) * 1e6;
    }
    qsort(t, (size_t)iters, sizeof(double), cmp_double);
    if (rank == 0) {
      double med = t[iters / 2];
      printf("%zu %.1f %.1f %.1f %.0f\n", n, med, t[0], t[iters - 1], 2.0 * (double)n / med);
      fflush(stdout);
    }
    free(t);
    put(buf, n, hand);
  }
  MPI_Finalize();
  return 0;
}
