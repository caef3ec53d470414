/* SPDX-License-Identifier: BSD-3-Clause */
/* What libhugepool_mpi_preload.so's entry points do (mpi-preload.c) for
 * one MPI ABI: this file is compiled once per MPI installed (its mpi.h),
 * each copy one hp_mpi_backend, used once hp_mpi_active() has found that
 * MPI behind the program:
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
 *    windows.  Any failure falls back to MPI's own window in every rank.
 *
 * The MPI functions come from the program's MPI library, looked up by name
 * (hp_mpi_next), and hugepool_* from libhugepool_preload.so, looked up in
 * the process (hugepool-run loads it first): this library links neither. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "hugepool/hugepool.h"
#include "mpi-preload.h"
#include "option-reader.h"

/* How the MPI library this file was built for names itself in
 * MPI_Get_library_version (a call of the same ABI in every MPI), and the
 * backend's name. */
#define HP_STR2(x) #x
#define HP_STR(x) HP_STR2(x)
#if defined(MPICH_VERSION)
#define HP_MPI_LIBRARY "MPICH Version:"
#define HP_MPI_BUILT_WITH "MPICH " MPICH_VERSION
#define HP_MPI_BACKEND hp_mpi_backend_mpich
#elif defined(OMPI_MAJOR_VERSION)
#define HP_MPI_LIBRARY "Open MPI v"
#define HP_MPI_BUILT_WITH \
  "Open MPI " HP_STR(OMPI_MAJOR_VERSION) "." HP_STR(OMPI_MINOR_VERSION) "." HP_STR(OMPI_RELEASE_VERSION)
#define HP_MPI_BACKEND hp_mpi_backend_openmpi
#else
#error "mpi-preload-calls.c is written for the MPICH and Open MPI ABIs"
#endif

/* The predefined handles the entry points pass to MPI.  MPICH's are integer
 * constants; Open MPI's are the addresses of objects inside libmpi (MPI_INT
 * is &ompi_mpi_int), and this library links no MPI: under Open MPI they are
 * looked up in the program's MPI when the entry points decide to act. */
#if defined(OMPI_MAJOR_VERSION)
static struct {
  MPI_Datatype int_, aint, byte;
  MPI_Op min;
  MPI_Errhandler errors_return;
} handles;
#define HP_MPI_INT handles.int_
#define HP_MPI_AINT handles.aint
#define HP_MPI_BYTE handles.byte
#define HP_MPI_MIN handles.min
#define HP_MPI_ERRORS_RETURN handles.errors_return
#else
#define HP_MPI_INT MPI_INT
#define HP_MPI_AINT MPI_AINT
#define HP_MPI_BYTE MPI_BYTE
#define HP_MPI_MIN MPI_MIN
#define HP_MPI_ERRORS_RETURN MPI_ERRORS_RETURN
#endif

#define warn_once hp_mpi_warn_once

static hp_mpi_fn as_function(void *p) {
  hp_mpi_fn f;
  memcpy(&f, &p, sizeof(f)); /* dlsym's object pointer to a function pointer */
  return f;
}

/* A HUGEPOOL_* option as libhugepool_preload.so read it at load, by the
 * option table's rules (option-reader.h): one reader for the core and the
 * entry points.  Without the preload, `otherwise` (the table's default). */
static long long option(const char *name, long long otherwise) {
  hp_preload_option_fn get = (hp_preload_option_fn)as_function(dlsym(RTLD_DEFAULT, HP_PRELOAD_OPTION_SYMBOL));
  long long value = 0;
  return get && get(name, &value) == 0 ? value : otherwise;
}

/* ---- deciding once ------------------------------------------------------ */

#define PMPI(fn) __typeof__(&PMPI_##fn) fn
static struct {
  PMPI(Alloc_mem);
  PMPI(Free_mem);
  PMPI(Win_allocate_shared);
  PMPI(Win_shared_query);
  PMPI(Win_get_attr);
  PMPI(Win_free);
  PMPI(Win_create);
  PMPI(Comm_rank);
  PMPI(Comm_size);
  PMPI(Allreduce);
  PMPI(Allgather);
  PMPI(Bcast);
  PMPI(Comm_get_errhandler);
  PMPI(Comm_set_errhandler);
  PMPI(Errhandler_free);
} pmpi;
#define HP(fn) __typeof__(&hugepool_##fn) fn
static struct {
  HP(alloc);
  HP(free);
  HP(owns);
  HP(segment_create);
  HP(segment_map);
  HP(segment_unmap);
} hp;

/* Resolves what this backend calls; 1 when all of it is there. */
static int activate(void) {
  static int warned;
  int ok = 1;
#define RESOLVE_PMPI(fn) ok &= (pmpi.fn = (__typeof__(pmpi.fn))hp_mpi_next("PMPI_" #fn)) != NULL
  RESOLVE_PMPI(Alloc_mem);
  RESOLVE_PMPI(Free_mem);
  RESOLVE_PMPI(Win_allocate_shared);
  RESOLVE_PMPI(Win_shared_query);
  RESOLVE_PMPI(Win_get_attr);
  RESOLVE_PMPI(Win_free);
  RESOLVE_PMPI(Win_create);
  RESOLVE_PMPI(Comm_rank);
  RESOLVE_PMPI(Comm_size);
  RESOLVE_PMPI(Allreduce);
  RESOLVE_PMPI(Allgather);
  RESOLVE_PMPI(Bcast);
  RESOLVE_PMPI(Comm_get_errhandler);
  RESOLVE_PMPI(Comm_set_errhandler);
  RESOLVE_PMPI(Errhandler_free);
#if defined(OMPI_MAJOR_VERSION)
  /* A predefined handle is a data object: the program may hold a copy of
   * it (a copy relocation: an executable that names MPI_MIN gets its own
   * ompi_mpi_op_min, which libmpi initialises and uses from then on, and
   * libmpi's original stays as loaded, its function pointers NULL).  The
   * global scope's definition, the executable's first, is the one MPI
   * uses; RTLD_NEXT would skip the executable.  An MPI loaded RTLD_LOCAL
   * is not in the global scope: then hp_mpi_next finds it. */
#define RESOLVE_HANDLE(field, type, object)                \
  do {                                                     \
    void *obj = dlsym(RTLD_DEFAULT, object);               \
    if (!obj) {                                            \
      hp_mpi_fn f = hp_mpi_next(object);                   \
      memcpy(&obj, &f, sizeof(obj));                       \
    }                                                      \
    ok &= (handles.field = (type)obj) != NULL;             \
  } while (0)
  RESOLVE_HANDLE(int_, MPI_Datatype, "ompi_mpi_int");
  RESOLVE_HANDLE(aint, MPI_Datatype, "ompi_mpi_aint");
  RESOLVE_HANDLE(byte, MPI_Datatype, "ompi_mpi_byte");
  RESOLVE_HANDLE(min, MPI_Op, "ompi_mpi_op_min");
  RESOLVE_HANDLE(errors_return, MPI_Errhandler, "ompi_mpi_errors_return");
#endif
#define RESOLVE_HP(fn) ok &= (hp.fn = (__typeof__(hp.fn))as_function(dlsym(RTLD_DEFAULT, "hugepool_" #fn))) != NULL
  RESOLVE_HP(alloc);
  RESOLVE_HP(free);
  RESOLVE_HP(owns);
  RESOLVE_HP(segment_create);
  RESOLVE_HP(segment_map);
  RESOLVE_HP(segment_unmap);
  if (!ok) {
    warn_once(&warned,
              "MPI entry points: libhugepool_preload.so or a function of the MPI library is missing "
              "(run the program under hugepool-run); MPI's own calls serve it");
    return 0;
  }
  return 1;
}

/* HUGEPOOL_POLICY=strict (any case): MPI_ERR_NO_MEM rather than MPI's own
 * memory.  The preload's default is its fallback, so is the default here. */
static int strict_policy(void) { return option("HUGEPOOL_POLICY", -1) == HUGEPOOL_POLICY_STRICT; }

/* ---- MPI_Alloc_mem / MPI_Free_mem --------------------------------------- */

static int hp_alloc_mem(hp_mpi_aint size, hp_mpi_handle info_handle, void *baseptr) {
  static int warned;
  MPI_Info info = (MPI_Info)info_handle; /* NOLINT(performance-no-int-to-ptr): a pointer in Open MPI's ABI */
  if (size <= 0) return pmpi.Alloc_mem(size, info, baseptr);
  void *p = hp.alloc((size_t)size);
  if (p) {
    *(void **)baseptr = p;
    return MPI_SUCCESS;
  }
  if (strict_policy()) return MPI_ERR_NO_MEM;
  warn_once(&warned,
            "MPI_Alloc_mem: the hugetlb pool is short, MPI's own memory serves this and later requests "
            "that do not fit (HUGEPOOL_POLICY=strict: MPI_ERR_NO_MEM instead)");
  return pmpi.Alloc_mem(size, info, baseptr);
}

static int hp_free_mem(void *base) {
  if (base && hp.owns(base)) {
    hp.free(base);
    return MPI_SUCCESS;
  }
  return pmpi.Free_mem(base);
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
  if (w->seg.addr) (void)hp.segment_unmap(&w->seg);
  free(w->size);
  free(w->disp_unit);
  free(w->offset);
  free(w);
}

static int win_shared_enabled(void) { return option("HUGEPOOL_MPI_WIN_SHARED", 0) == 1; }

/* Every rank of comm agrees: 1 if ok in all. */
static int all_ok(MPI_Comm comm, int ok) {
  int all = 0;
  if (pmpi.Allreduce(&ok, &all, 1, HP_MPI_INT, HP_MPI_MIN, comm) != MPI_SUCCESS) return 0;
  return all;
}

/* MPI_Win_create over the segment, under MPI_ERRORS_RETURN: an MPI that
 * cannot create a window over memory it did not allocate (Open MPI without
 * a one-sided component for the transports in use: osc/rdma needs single-
 * copy between the ranks) refuses, and the program's own call then gets
 * MPI's own window instead of an abort from this one.  1 if every rank of
 * comm has the window; 0 if not, with none held anywhere. */
static int create_window(void *base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, MPI_Win *win) {
  MPI_Errhandler was;
  if (pmpi.Comm_get_errhandler(comm, &was) != MPI_SUCCESS) return 0;
  int ok = pmpi.Comm_set_errhandler(comm, HP_MPI_ERRORS_RETURN) == MPI_SUCCESS &&
           pmpi.Win_create(base, size, disp_unit, info, comm, win) == MPI_SUCCESS;
  int all = all_ok(comm, ok);
  if (ok && !all) pmpi.Win_free(win);
  (void)pmpi.Comm_set_errhandler(comm, was);
  (void)pmpi.Errhandler_free(&was);
  return all;
}

/* Builds the segment-backed window; 1 on success (in every rank), 0 if
 * every rank must fall back to MPI's own (nothing is held then). */
static int shared_window(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr, MPI_Win *win) {
  static int warned;
  int rank = 0, n = 0;
  pmpi.Comm_rank(comm, &rank);
  pmpi.Comm_size(comm, &n);
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
  pmpi.Allgather(&size, 1, HP_MPI_AINT, w->size, 1, HP_MPI_AINT, comm);
  pmpi.Allgather(&disp_unit, 1, HP_MPI_INT, w->disp_unit, 1, HP_MPI_INT, comm);
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
    ok = hp.segment_create(total, NULL, &w->seg) == 0;
    if (ok) handle = w->seg.handle;
  }
  pmpi.Bcast(&ok, 1, HP_MPI_INT, 0, comm);
  if (!ok) goto fallback;
  pmpi.Bcast(&handle, (int)sizeof(handle), HP_MPI_BYTE, 0, comm);
  if (rank != 0) ok = hp.segment_map(&handle, &w->seg) == 0;
  if (!all_ok(comm, ok)) goto fallback;
  if (rank == 0) {
    close(w->seg.fd); /* every rank has mapped it */
    w->seg.fd = -1;
  }
  char *base = (char *)w->seg.addr + w->offset[rank];
  if (!create_window(base, size, disp_unit, info, comm, win)) {
    static int refused;
    warn_once(&refused,
              "MPI_Win_allocate_shared: the MPI library refused MPI_Win_create over a node-shared hugetlb "
              "segment (Open MPI: no one-sided component for these transports, e.g. with "
              "btl_vader_single_copy_mechanism=none); MPI's own shared memory serves the window");
    free_window(w);
    return 0;
  }
  w->win = *win;
  pthread_mutex_lock(&windows_lock);
  w->next = windows;
  windows = w;
  pthread_mutex_unlock(&windows_lock);
  *(void **)baseptr = base;
  return 1;

fallback:
  warn_once(&warned,
            "MPI_Win_allocate_shared: no node-shared hugetlb segment for this window (pool short?); "
            "MPI's own shared memory serves it");
  if (w) free_window(w);
  return 0;
}

static int hp_win_allocate_shared(hp_mpi_aint size, int disp_unit, hp_mpi_handle info_handle, hp_mpi_handle comm_handle,
                           void *baseptr, void *win_ptr) {
  MPI_Info info = (MPI_Info)info_handle; /* NOLINT(performance-no-int-to-ptr): a pointer in Open MPI's ABI */
  MPI_Comm comm = (MPI_Comm)comm_handle; /* NOLINT(performance-no-int-to-ptr): a pointer in Open MPI's ABI */
  MPI_Win *win = win_ptr;
  if (!win_shared_enabled() || size < 0 || disp_unit <= 0) {
    return pmpi.Win_allocate_shared(size, disp_unit, info, comm, baseptr, win);
  }
  if (shared_window(size, disp_unit, info, comm, baseptr, win)) return MPI_SUCCESS;
  return pmpi.Win_allocate_shared(size, disp_unit, info, comm, baseptr, win);
}

static int hp_win_shared_query(hp_mpi_handle win_handle, int rank, hp_mpi_aint *size, int *disp_unit, void *baseptr) {
  MPI_Win win = (MPI_Win)win_handle; /* NOLINT(performance-no-int-to-ptr): a pointer in Open MPI's ABI */
  shared_win *w = find_window(win, 0);
  if (!w) return pmpi.Win_shared_query(win, rank, size, disp_unit, baseptr);
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

static int hp_win_get_attr(hp_mpi_handle win_handle, int keyval, void *value, int *flag) {
  MPI_Win win = (MPI_Win)win_handle; /* NOLINT(performance-no-int-to-ptr): a pointer in Open MPI's ABI */
  static int flavor_shared = MPI_WIN_FLAVOR_SHARED;
  if (keyval == MPI_WIN_CREATE_FLAVOR && find_window(win, 0)) {
    *(int **)value = &flavor_shared;
    *flag = 1;
    return MPI_SUCCESS;
  }
  return pmpi.Win_get_attr(win, keyval, value, flag);
}

static int hp_win_free(void *win_ptr) {
  MPI_Win *win = win_ptr;
  shared_win *w = win ? find_window(*win, 1) : NULL;
  int rc = pmpi.Win_free(win); /* collective: no rank is still using the memory after it */
  if (w) free_window(w);
  return rc;
}

const hp_mpi_backend HP_MPI_BACKEND = {
    .prefix = HP_MPI_LIBRARY,
    .built_with = HP_MPI_BUILT_WITH,
    .activate = activate,
    .alloc_mem = hp_alloc_mem,
    .free_mem = hp_free_mem,
    .win_allocate_shared = hp_win_allocate_shared,
    .win_shared_query = hp_win_shared_query,
    .win_get_attr = hp_win_get_attr,
    .win_free = hp_win_free,
};
