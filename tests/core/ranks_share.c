/* SPDX-License-Identifier: BSD-3-Clause */
/* ranks-share: ranks of one node sharing one pool sized to the job's live
 * working set.  Each rank, every step, allocates three buffers of changing
 * sizes (2-8 MB, at most 24 MB live), writes them, checks from the kernel's
 * view (/proc/self/smaps KernelPageSize) that each is on 2 MB pages, and
 * frees them in another order.  Rank 0 stops after a quarter of the steps
 * and waits; the others go on.  Prints one JSON line per rank:
 *   {"rank": r, "steps": n, "fallbacks": f, "failures": x, "not_huge": k,
 *    "ms": t, "hugetlb_kb_end": h}
 * and exits 1 if any rank fell back, failed or saw a buffer off hugetlb.
 * With "malloc", the buffers come from malloc/free (the peers: glibc,
 * jemalloc, mimalloc, libhugetlbfs, or hugepool-run's preload); a buffer
 * off 2 MB hugetlb pages per smaps (checked every 16th step) counts in
 * not_huge, a NULL in failures.
 *   mpiexec -n 4 ranks-share [STEPS [malloc]] */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hugepool/hugepool.h"

/* KernelPageSize (kB) of the mapping that holds addr, or -1. */
static long kernel_page_kb(const void *addr) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) return -1;
  char line[256];
  int in = 0;
  long kb = -1;
  unsigned long want = (unsigned long)addr;
  while (fgets(line, sizeof(line), f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) { /* a mapping's first line */
      in = lo <= want && want < hi;
      continue;
    }
    if (in && sscanf(line, "KernelPageSize: %ld kB", &kb) == 1) break;
  }
  fclose(f);
  return kb;
}

static long hugetlb_kb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kb = -1;
  while (fgets(line, sizeof(line), f)) {
    if (sscanf(line, "HugetlbPages: %ld kB", &kb) == 1) break;
  }
  fclose(f);
  return kb;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long steps = argc > 1 ? atol(argv[1]) : 200;
  int use_malloc = argc > 2 && strcmp(argv[2], "malloc") == 0;
  unsigned long long null_bufs = 0;
  long mine = rank == 0 ? steps / 4 : steps;
  unsigned seed = 1234u + (unsigned)rank * 7919u;
  long not_huge = 0;
  struct timespec t0, t1;
  MPI_Barrier(MPI_COMM_WORLD);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long s = 0; s < mine; s++) {
    void *buf[3];
    size_t len[3], total = 0;
    for (int i = 0; i < 3; i++) {
      len[i] = (size_t)(1 + rand_r(&seed) % 4) * (2u << 20); /* 2, 4, 6 or 8 MB: at most 24 MB */
      buf[i] = use_malloc ? malloc(len[i]) : hugepool_alloc(len[i]);
      if (buf[i]) memset(buf[i], (int)s, len[i]);
      if (!buf[i]) null_bufs++;
      total += len[i];
    }
    for (int i = 0; i < 3; i++) {
      if (buf[i] && (s % 16 == 0) && kernel_page_kb(buf[i]) != 2048) not_huge++;
      if (buf[i] && !use_malloc && hugepool_kind_of(buf[i]) != HUGEPOOL_KIND_HUGE_2M) not_huge++;
    }
    (void)total;
    int order = rand_r(&seed) % 3;
    for (int i = 0; i < 3; i++) {
      if (use_malloc)
        free(buf[(i + order) % 3]);
      else
        hugepool_free(buf[(i + order) % 3]);
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  long end_kb = hugetlb_kb();
  hugepool_stats st;
  memset(&st, 0, sizeof(st));
  if (!use_malloc) hugepool_get_stats(&st);
  st.failures += use_malloc ? null_bufs : 0;
  double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
  MPI_Barrier(MPI_COMM_WORLD); /* rank 0 waits here, its cache as it left it */
  printf(
      "{\"rank\": %d, \"ranks\": %d, \"steps\": %ld, \"fallbacks\": %llu, \"failures\": %llu, \"not_huge\": %ld, "
      "\"ms\": %.1f, \"hugetlb_kb_end\": %ld, \"maps\": %llu, \"cache_hits\": %llu}\n",
      rank, size, mine, (unsigned long long)(st.fallbacks_small + st.fallbacks_thp), (unsigned long long)st.failures,
      not_huge, ms, end_kb, (unsigned long long)st.maps, (unsigned long long)st.cache_hits);
  fflush(stdout);
  int bad = st.fallbacks_small + st.fallbacks_thp + st.failures > 0 || not_huge > 0, any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any ? 1 : 0;
}
