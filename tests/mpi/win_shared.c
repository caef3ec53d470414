/* SPDX-License-Identifier: BSD-3-Clause */
/* An MPI-3 program written against MPI_Alloc_mem and MPI_Win_allocate_shared,
 * knowing nothing of hugepool: the tests run it as is, under hugepool-run
 * and with HUGEPOOL_MPI_WIN_SHARED=1, and compare what it computes.
 * Lines "rank R result ..." must be the same in every run; lines
 * "rank R pages ..." say what the kernel shows behind its memory. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_view.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm node;
  int wrank, r, n, bad = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, wrank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &r);
  MPI_Comm_size(node, &n);
  const int right = (r + 1) % n, left = (r + n - 1) % n;

  /* MPI_Alloc_mem: a big and a small buffer, the big one used as an RMA window */
  const int big = 1 << 19; /* doubles: 4 MiB */
  double *buf = NULL;
  char *small = NULL;
  MPI_Alloc_mem((MPI_Aint)big * 8, MPI_INFO_NULL, &buf);
  MPI_Alloc_mem(1000, MPI_INFO_NULL, &small);
  memset(small, 7, 1000);
  for (int i = 0; i < big; i++) buf[i] = -1;
  MPI_Win bwin;
  MPI_Win_create(buf, (MPI_Aint)big * 8, 8, MPI_INFO_NULL, node, &bwin);
  MPI_Win_fence(0, bwin);
  double mine = 1000.0 * r;
  MPI_Put(&mine, 1, MPI_DOUBLE, right, big - 1, 1, MPI_DOUBLE, bwin);
  MPI_Win_fence(0, bwin);
  if (buf[big - 1] != 1000.0 * left) bad |= 1;
  MPI_Win_free(&bwin);
  printf("rank %d pages alloc_mem big %ld small %ld\n", r, smaps_field(buf, "KernelPageSize"),
         smaps_field(small, "KernelPageSize"));
  MPI_Free_mem(small);
  MPI_Free_mem(buf);

  /* MPI_Win_allocate_shared: ranks of different sizes, load/store + sync, RMA */
  const int count = 1000 * (r + 1);
  double *base = NULL;
  MPI_Win win;
  MPI_Win_allocate_shared((MPI_Aint)count * 8, 8, MPI_INFO_NULL, node, &base, &win);
  int *flavor = NULL, *model = NULL, flag = 0;
  MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &flavor, &flag);
  if (!flag || *flavor != MPI_WIN_FLAVOR_SHARED) bad |= 2;
  MPI_Win_get_attr(win, MPI_WIN_MODEL, &model, &flag);
  if (!flag || *model != MPI_WIN_UNIFIED) bad |= 4;
  MPI_Win_lock_all(0, win);
  for (int i = 0; i < count; i++) base[i] = r * 1e6 + i;
  MPI_Win_sync(win);
  MPI_Barrier(node);
  MPI_Win_sync(win);
  double sum = 0;
  double *first = NULL;
  MPI_Aint offset = 0;
  for (int p = 0; p < n; p++) {
    MPI_Aint sz;
    int du;
    double *ptr;
    MPI_Win_shared_query(win, p, &sz, &du, &ptr);
    if (p == 0) first = ptr;
    if (sz != (MPI_Aint)1000 * (p + 1) * 8 || du != 8) bad |= 8;
    if (ptr != first + offset) bad |= 16; /* contiguous, as by default */
    offset += sz / 8;
    for (int i = 0; i < 1000 * (p + 1); i++) {
      if (ptr[i] != p * 1e6 + i) bad |= 32;
      sum += ptr[i];
    }
  }
  MPI_Win_sync(win);
  MPI_Barrier(node);
  /* RMA through the window: +1 on everyone's element 0, my rank into my
   * right neighbour's element 1, its element 2 read back. */
  double one = 1, me = r, got = 0;
  for (int p = 0; p < n; p++) MPI_Accumulate(&one, 1, MPI_DOUBLE, p, 0, 1, MPI_DOUBLE, MPI_SUM, win);
  MPI_Put(&me, 1, MPI_DOUBLE, right, 1, 1, MPI_DOUBLE, win);
  MPI_Get(&got, 1, MPI_DOUBLE, right, 2, 1, MPI_DOUBLE, win);
  MPI_Win_flush_all(win);
  MPI_Win_sync(win);
  MPI_Barrier(node);
  MPI_Win_sync(win);
  if (base[0] != r * 1e6 + n || base[1] != left || got != right * 1e6 + 2) bad |= 64;
  MPI_Win_unlock_all(win);
  printf("rank %d pages win %ld shared_hugetlb %ld\n", r, smaps_field(base, "KernelPageSize"),
         smaps_field(base, "Shared_Hugetlb"));
  MPI_Win_free(&win);
  /* Every rank learns whether all passed.  Naming MPI_INT and MPI_MIN gives
   * an executable its own copies of Open MPI's predefined handles (copy
   * relocations), as most programs' have: the entry points must use those,
   * not libmpi's originals (never initialised then). */
  int ok = bad == 0, all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, node);
  if (!all) bad |= 128;
  printf("rank %d result sum %.0f bad %d\n", r, sum, bad);
  MPI_Comm_free(&node);
  MPI_Finalize();
  return bad != 0;
}
