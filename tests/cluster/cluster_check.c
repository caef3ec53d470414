/* SPDX-License-Identifier: BSD-3-Clause */
/* An MPI program that knows nothing of hugepool, run across the test bed's
 * nodes (bed.sh) by the cluster tests.  One line per rank and part, each
 * starting "rank W host H": what it computed (bad 0 when every byte it
 * received or read was the one written) and what the kernel shows behind
 * its memory (/proc/self/smaps, /proc/self/maps).
 *   cluster-check exchange        buffers malloc'ed every iteration, sent to a
 *                                 rank on another node and to the next rank
 *   cluster-check window          MPI_Win_allocate_shared on each node's
 *                                 shared communicator, every node peer's part
 *                                 read, the segments' inodes listed
 *   cluster-check kill W          as window, then world rank W kills itself
 *                                 (SIGKILL) while the window is mapped
 *   cluster-check cache PAGES W.. the world ranks W.. malloc, touch and free
 *                                 PAGES 2 MB pages in turn, and say how much
 *                                 hugetlb memory the process still maps */
#define _GNU_SOURCE /* gethostname */
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../mpi/kernel_view.h"

static int wrank, wsize, lrank, lsize;
static char host[64];
static MPI_Comm node;

static unsigned char pattern(int from, int it, size_t i) { return (unsigned char)(from * 37 + it * 11 + i * 7 + (i >> 13)); }

/* The inode of every shared hugetlb mapping of this process (KernelPageSize
 * 2048 kB and Shared_Hugetlb above 0), comma-separated, sorted by address. */
static void shared_hugetlb_inodes(char *out, size_t len) {
  FILE *f = fopen("/proc/self/smaps", "r");
  char line[512];
  unsigned long inode = 0;
  long kps = 0;
  size_t used = 0;
  out[0] = '\0';
  while (f && fgets(line, sizeof(line), f)) {
    unsigned long s, e, off, ino;
    char perms[8], dev[16];
    if (sscanf(line, "%lx-%lx %7s %lx %15s %lu", &s, &e, perms, &off, dev, &ino) == 6 &&
        strchr(line, ':') > strchr(line, ' ')) {
      inode = ino;
      kps = 0;
    } else if (strncmp(line, "KernelPageSize:", 15) == 0) {
      kps = strtol(line + 15, NULL, 10);
    } else if (strncmp(line, "Shared_Hugetlb:", 15) == 0 && kps == 2048 && strtol(line + 15, NULL, 10) > 0) {
      int n = snprintf(out + used, len - used, "%s%lu", used ? "," : "", inode);
      if (n > 0 && (size_t)n < len - used) used += (size_t)n;
    }
  }
  if (f) fclose(f);
  if (!used) snprintf(out, len, "none");
}

static int exchange(void) {
  const size_t len = 8u << 20;
  int bad = 0;
  long kps_send = 0, kps_recv = 0;
  const int across = (wrank + wsize / 2) % wsize, across_from = (wrank - wsize / 2 + wsize) % wsize;
  const int next = (wrank + 1) % wsize, prev = (wrank + wsize - 1) % wsize;
  for (int it = 0; it < 6; it++) {
    /* new buffers every iteration, as a code that mallocs per message */
    unsigned char *out = malloc(len), *in = malloc(len);
    if (!out || !in) MPI_Abort(MPI_COMM_WORLD, 2);
    for (size_t i = 0; i < len; i++) out[i] = pattern(wrank, it, i);
    memset(in, 0, len);
    int peer_to = it % 2 ? next : across, peer_from = it % 2 ? prev : across_from;
    MPI_Sendrecv(out, (int)len, MPI_BYTE, peer_to, it, in, (int)len, MPI_BYTE, peer_from, it, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    for (size_t i = 0; i < len; i++)
      if (in[i] != pattern(peer_from, it, i)) {
        bad |= 1 << (it % 2);
        break;
      }
    kps_send = smaps_field(out, "KernelPageSize");
    kps_recv = smaps_field(in, "KernelPageSize");
    free(in);
    free(out);
  }
  printf("rank %d host %s local %d/%d exchange pages %ld %ld bad %d\n", wrank, host, lrank, lsize, kps_send, kps_recv,
         bad);
  return bad;
}

static int window(int victim) {
  const MPI_Aint mine = ((MPI_Aint)4 << 20) + 4096 * (lrank + 1); /* ranks of different sizes */
  unsigned char *base = NULL;
  MPI_Win win;
  int bad = 0;
  MPI_Win_allocate_shared(mine, 1, MPI_INFO_NULL, node, &base, &win);
  MPI_Win_lock_all(0, win);
  for (MPI_Aint i = 0; i < mine; i++) base[i] = pattern(wrank, 0, (size_t)i);
  MPI_Win_sync(win);
  MPI_Barrier(node);
  MPI_Win_sync(win);
  /* every node peer's part, written by that peer (its world rank) */
  int *world_of = malloc(sizeof(int) * (size_t)lsize);
  MPI_Allgather(&wrank, 1, MPI_INT, world_of, 1, MPI_INT, node);
  for (int p = 0; p < lsize; p++) {
    MPI_Aint sz;
    int du;
    unsigned char *ptr;
    MPI_Win_shared_query(win, p, &sz, &du, &ptr);
    if (sz != ((MPI_Aint)4 << 20) + 4096 * (p + 1)) bad |= 1;
    for (MPI_Aint i = 0; i < sz; i++)
      if (ptr[i] != pattern(world_of[p], 0, (size_t)i)) {
        bad |= 2;
        break;
      }
  }
  free(world_of);
  char inodes[1024];
  shared_hugetlb_inodes(inodes, sizeof(inodes));
  printf("rank %d host %s local %d/%d window pages %ld shared_hugetlb %ld inodes %s bad %d\n", wrank, host, lrank,
         lsize, smaps_field(base, "KernelPageSize"), smaps_field(base, "Shared_Hugetlb"), inodes, bad);
  fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);
  if (wrank == victim) raise(SIGKILL);
  MPI_Win_unlock_all(win);
  MPI_Win_free(&win);
  return bad;
}

static void cache(long pages, int argc, char **argv) {
  int chosen = 0;
  for (int i = 0; i < argc; i++)
    if (atoi(argv[i]) == wrank) chosen = 1;
  long before = smaps_total("Private_Hugetlb"), after = before;
  /* one chosen rank at a time: the bed's nodes share one pool */
  for (int turn = 0; turn < wsize; turn++) {
    if (turn == wrank && chosen) {
      size_t len = (size_t)pages << 21;
      volatile unsigned char *p = malloc(len);
      if (!p) MPI_Abort(MPI_COMM_WORLD, 3);
      /* volatile stores: a memset before free could be left out */
      for (size_t i = 0; i < len; i += 4096) p[i] = 1;
      free((void *)p);
      after = smaps_total("Private_Hugetlb");
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  printf("rank %d host %s local %d/%d cache chosen %d kept_kb %ld\n", wrank, host, lrank, lsize, chosen,
         after - before);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  MPI_Comm_size(MPI_COMM_WORLD, &wsize);
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, wrank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &lrank);
  MPI_Comm_size(node, &lsize);
  gethostname(host, sizeof(host) - 1);
  const char *mode = argc > 1 ? argv[1] : "exchange";
  int bad = 0;
  if (strcmp(mode, "exchange") == 0) {
    bad = exchange();
  } else if (strcmp(mode, "window") == 0) {
    bad = window(-1);
  } else if (strcmp(mode, "kill") == 0 && argc > 2) {
    bad = window(atoi(argv[2]));
  } else if (strcmp(mode, "cache") == 0 && argc > 2) {
    cache(atol(argv[2]), argc - 3, argv + 3);
  } else {
    if (wrank == 0) fprintf(stderr, "cluster-check: unknown mode %s\n", mode);
    bad = 1;
  }
  MPI_Comm_free(&node);
  printf("rank %d host %s finalize\n", wrank, host);
  fflush(stdout);
  MPI_Finalize();
  return bad != 0;
}
