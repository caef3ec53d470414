/* libhugepool_mpi_preload.so: MPI entry points for unmodified MPI programs,
 * loaded after libhugepool_preload.so (LD_PRELOAD=this hugepool-run ...:
 * hugepool-run puts the interposer first), and only where asked for.  It links neither MPI nor hugepool: PMPI_* come
 * from the program's MPI library, hugepool_* from libhugepool_preload.so.
 *
 *  - MPI_Alloc_mem / MPI_Free_mem: every request is a hugepool buffer (whole
 *    huge pages, from the cache).  A pool shortage falls back to MPI's own
 *    memory with one warning, like the preload; HUGEPOOL_POLICY=strict
 *    answers MPI_ERR_NO_MEM instead.
 *  - MPI_Win_allocate_shared (opt-in, HUGEPOOL_MPI_WIN_SHARED=1): the
 *    window's memory is one node-shared hugetlb segment, created by the
 *    communicator's first rank and mapped by the others, laid out
 *    contiguously as MPI lays it out by default; the window itself is an
 *    MPI_Win_create window over each rank's part, so RMA, locks,
 *    MPI_Win_sync and the memory model are MPI's own.  MPI_Win_shared_query,
 *    MPI_Win_get_attr(MPI_WIN_CREATE_FLAVOR) and MPI_Win_free know these
 *    windows.  Any failure falls back to MPI's own window in every rank. */
#define _GNU_SOURCE
#include <errno.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hugepool/hugepool.h"

#define HP_MPI_API __attribute__((visibility("default")))

static void warn_once(int *done, const char *what) {
  if (__atomic_exchange_n(done, 1, __ATOMIC_RELAXED)) return;
  const char *quiet = getenv("HUGEPOOL_WARN");
  if (quiet && strcmp(quiet, "0") == 0) return;
  (void)fprintf(stderr, "hugepool[%ld]: %s\n", (long)getpid(), what);
}

static int strict_policy(void) {
  const char *p = getenv("HUGEPOOL_POLICY");
  return p && strcmp(p, "strict") == 0;
}

/* ---- MPI_Alloc_mem / MPI_Free_mem --------------------------------------- */

HP_MPI_API int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void *baseptr) {
  static int warned;
  if (size <= 0) return PMPI_Alloc_mem(size, info, baseptr);
  void *p = hugepool_alloc((size_t)size);
  if (p) {
    *(void **)baseptr = p;
    return MPI_SUCCESS;
  }
  if (strict_policy()) return MPI_ERR_NO_MEM;
  warn_once(&warned,
            "MPI_Alloc_mem: the hugetlb pool is short, MPI's own memory serves this and later requests "
            "that do not fit (HUGEPOOL_POLICY=strict: MPI_ERR_NO_MEM instead)");
  return PMPI_Alloc_mem(size, info, baseptr);
}

HP_MPI_API int MPI_Free_mem(void *base) {
  if (base && hugepool_owns(base)) {
    hugepool_free(base);
    return MPI_SUCCESS;
  }
  return PMPI_Free_mem(base);
}

/* ---- MPI_Win_allocate_shared (opt-in) ------------------------------------ */

typedef struct shared_win {
  MPI_Win win;
  hugepool_segment seg;
  int nranks;
  MPI_Aint *size;   /* [nranks] */
  int *disp_unit;   /* [nranks] */
  MPI_Aint *offset; /* [nranks] into seg */
  struct shared_win *next;
} shared_win;

static shared_win *windows;
static pthread_mutex_t windows_lock = PTHREAD_MUTEX_INITIALIZER;

static shared_win *find_window(MPI_Win win, int unlink) {
  pthread_mutex_lock(&windows_lock);
  shared_win **at = &windows;
  while (*at && (*at)->win != win) at = &(*at)->next;
  shared_win *w = *at;
  if (w && unlink) *at = w->next;
  pthread_mutex_unlock(&windows_lock);
  return w;
}

static void free_window(shared_win *w) {
  if (w->seg.addr) (void)hugepool_segment_unmap(&w->seg);
  free(w->size);
  free(w->disp_unit);
  free(w->offset);
  free(w);
}

static int win_shared_enabled(void) {
  const char *v = getenv("HUGEPOOL_MPI_WIN_SHARED");
  return v && strcmp(v, "1") == 0;
}

/* Every rank of comm agrees: 1 if ok in all. */
static int all_ok(MPI_Comm comm, int ok) {
  int all = 0;
  if (PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS) return 0;
  return all;
}

/* Builds the segment-backed window; 1 on success (in every rank), 0 if
 * every rank must fall back to MPI's own (nothing is held then). */
static int shared_window(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr, MPI_Win *win) {
  static int warned;
  int rank = 0, n = 0;
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &n);
  shared_win *w = calloc(1, sizeof(*w));
  int ok = w != NULL;
  if (ok) {
    w->nranks = n;
    w->size = calloc((size_t)n, sizeof(*w->size));
    w->disp_unit = calloc((size_t)n, sizeof(*w->disp_unit));
    w->offset = calloc((size_t)n, sizeof(*w->offset));
    ok = w->size && w->disp_unit && w->offset;
  }
  if (!all_ok(comm, ok) || !w || !w->size || !w->disp_unit || !w->offset) goto fallback;
  PMPI_Allgather(&size, 1, MPI_AINT, w->size, 1, MPI_AINT, comm);
  PMPI_Allgather(&disp_unit, 1, MPI_INT, w->disp_unit, 1, MPI_INT, comm);
  size_t total = 0;
  for (int i = 0; i < n; i++) {
    w->offset[i] = (MPI_Aint)total;
    total += (size_t)w->size[i];
  }
  if (total == 0) goto fallback;

  /* The first rank creates one segment for the whole window (contiguous,
   * as MPI lays out a window without alloc_shared_noncontig); the others
   * map it.  Two agreements: no rank keeps a window the others gave up. */
  hugepool_segment_handle handle;
  memset(&handle, 0, sizeof(handle));
  ok = 1;
  if (rank == 0) {
    ok = hugepool_segment_create(total, NULL, &w->seg) == 0;
    if (ok) handle = w->seg.handle;
  }
  PMPI_Bcast(&ok, 1, MPI_INT, 0, comm);
  if (!ok) goto fallback;
  PMPI_Bcast(&handle, (int)sizeof(handle), MPI_BYTE, 0, comm);
  if (rank != 0) ok = hugepool_segment_map(&handle, &w->seg) == 0;
  if (!all_ok(comm, ok)) goto fallback;
  if (rank == 0) {
    close(w->seg.fd); /* every rank has mapped it */
    w->seg.fd = -1;
  }
  char *base = (char *)w->seg.addr + w->offset[rank];
  if (PMPI_Win_create(base, size, disp_unit, info, comm, win) != MPI_SUCCESS) goto fallback_late;
  w->win = *win;
  pthread_mutex_lock(&windows_lock);
  w->next = windows;
  windows = w;
  pthread_mutex_unlock(&windows_lock);
  *(void **)baseptr = base;
  return 1;

fallback_late:
  /* MPI_Win_create failed in this rank: MPI's error handler decides what
   * happens next, as it would for MPI_Win_allocate_shared itself. */
fallback:
  warn_once(&warned,
            "MPI_Win_allocate_shared: no node-shared hugetlb segment for this window (pool short?); "
            "MPI's own shared memory serves it");
  if (w) free_window(w);
  return 0;
}

HP_MPI_API int MPI_Win_allocate_shared(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr,
                                       MPI_Win *win) {
  if (!win_shared_enabled() || size < 0 || disp_unit <= 0) {
    return PMPI_Win_allocate_shared(size, disp_unit, info, comm, baseptr, win);
  }
  if (shared_window(size, disp_unit, info, comm, baseptr, win)) return MPI_SUCCESS;
  return PMPI_Win_allocate_shared(size, disp_unit, info, comm, baseptr, win);
}

HP_MPI_API int MPI_Win_shared_query(MPI_Win win, int rank, MPI_Aint *size, int *disp_unit, void *baseptr) {
  shared_win *w = find_window(win, 0);
  if (!w) return PMPI_Win_shared_query(win, rank, size, disp_unit, baseptr);
  if (rank == MPI_PROC_NULL) { /* the first rank with memory, as the standard says */
    for (rank = 0; rank < w->nranks - 1 && w->size[rank] == 0; rank++) {
    }
  }
  if (rank < 0 || rank >= w->nranks) return MPI_ERR_RANK;
  *size = w->size[rank];
  *disp_unit = w->disp_unit[rank];
  *(void **)baseptr = (char *)w->seg.addr + w->offset[rank];
  return MPI_SUCCESS;
}

HP_MPI_API int MPI_Win_get_attr(MPI_Win win, int keyval, void *value, int *flag) {
  static int flavor_shared = MPI_WIN_FLAVOR_SHARED;
  if (keyval == MPI_WIN_CREATE_FLAVOR && find_window(win, 0)) {
    *(int **)value = &flavor_shared;
    *flag = 1;
    return MPI_SUCCESS;
  }
  return PMPI_Win_get_attr(win, keyval, value, flag);
}

HP_MPI_API int MPI_Win_free(MPI_Win *win) {
  shared_win *w = win ? find_window(*win, 1) : NULL;
  int rc = PMPI_Win_free(win); /* collective: no rank is still using the memory after it */
  if (w) free_window(w);
  return rc;
}
