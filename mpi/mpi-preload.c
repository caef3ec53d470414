/* SPDX-License-Identifier: BSD-3-Clause */
/* libhugepool_mpi_preload.so: MPI entry points for unmodified MPI programs.
 * hugepool-run preloads it after libhugepool_preload.so into every program
 * it starts (--mpi off: not at all), so this file must cost nothing where
 * MPI is absent and change nothing where its MPI is not the one it knows:
 *  - no DT_NEEDED on any MPI library, no constructor: a program that never
 *    calls MPI never runs a line of it (python3, sqlite3, a compiler);
 *  - the MPI functions it calls on are looked up at the first MPI call
 *    (dlsym), so a program that loads MPI late (dlopen, mpi4py) is served
 *    as one linked with it;
 *  - the entry points know no MPI ABI (mpi-preload.h): until
 *    hp_mpi_active() says the program's MPI is the one this library was
 *    built for, each forwards its arguments untouched.
 * What they do when active: mpi-preload-calls.c. */
#define _GNU_SOURCE
#include "mpi-preload.h"

#include <stdio.h>
#include <unistd.h>

#define HP_MPI_API __attribute__((visibility("default")))

/* The program's own PMPI_name, cached (every thread stores the same). */
static hp_mpi_fn next_cached(hp_mpi_fn *cache, const char *name) {
  hp_mpi_fn f = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
  if (!f) {
    f = hp_mpi_next(name);
    __atomic_store_n(cache, f, __ATOMIC_RELEASE);
  }
  return f;
}
#define NEXT(type, name) ((type)next_cached(&next_##type, name))

/* The entry points, as the loader sees them (no mpi.h here: see
 * mpi-preload.h). */
HP_MPI_API int MPI_Alloc_mem(hp_mpi_aint size, hp_mpi_handle info, void *baseptr);
HP_MPI_API int MPI_Free_mem(void *base);
HP_MPI_API int MPI_Win_allocate_shared(hp_mpi_aint size, int disp_unit, hp_mpi_handle info, hp_mpi_handle comm,
                                       void *baseptr, void *win);
HP_MPI_API int MPI_Win_shared_query(hp_mpi_handle win, int rank, hp_mpi_aint *size, int *disp_unit, void *baseptr);
HP_MPI_API int MPI_Win_get_attr(hp_mpi_handle win, int keyval, void *value, int *flag);
HP_MPI_API int MPI_Win_free(void *win);
HP_MPI_API int MPI_Finalize(void);

/* No MPI library behind an MPI call: only a program with its own partial
 * MPI symbols gets here.  Any non-zero value is an MPI error code. */
static int no_mpi(const char *name) {
  (void)fprintf(stderr, "hugepool[%ld]: %s: no MPI library is loaded to serve it\n", (long)getpid(), name);
  return 1;
}

typedef int (*alloc_mem_fn)(hp_mpi_aint, hp_mpi_handle, void *);
static hp_mpi_fn next_alloc_mem_fn;
typedef int (*free_mem_fn)(void *);
static hp_mpi_fn next_free_mem_fn;
typedef int (*win_allocate_shared_fn)(hp_mpi_aint, int, hp_mpi_handle, hp_mpi_handle, void *, void *);
static hp_mpi_fn next_win_allocate_shared_fn;
typedef int (*win_shared_query_fn)(hp_mpi_handle, int, hp_mpi_aint *, int *, void *);
static hp_mpi_fn next_win_shared_query_fn;
typedef int (*win_get_attr_fn)(hp_mpi_handle, int, void *, int *);
static hp_mpi_fn next_win_get_attr_fn;
typedef int (*win_free_fn)(void *);
static hp_mpi_fn next_win_free_fn;
typedef int (*finalize_fn)(void);
static hp_mpi_fn next_finalize_fn;

HP_MPI_API int MPI_Alloc_mem(hp_mpi_aint size, hp_mpi_handle info, void *baseptr) {
  if (hp_mpi_active()) return hp_alloc_mem(size, info, baseptr);
  alloc_mem_fn next = NEXT(alloc_mem_fn, "PMPI_Alloc_mem");
  return next ? next(size, info, baseptr) : no_mpi("MPI_Alloc_mem");
}

HP_MPI_API int MPI_Free_mem(void *base) {
  if (hp_mpi_active()) return hp_free_mem(base);
  free_mem_fn next = NEXT(free_mem_fn, "PMPI_Free_mem");
  return next ? next(base) : no_mpi("MPI_Free_mem");
}

HP_MPI_API int MPI_Win_allocate_shared(hp_mpi_aint size, int disp_unit, hp_mpi_handle info, hp_mpi_handle comm,
                                       void *baseptr, void *win) {
  if (hp_mpi_active()) return hp_win_allocate_shared(size, disp_unit, info, comm, baseptr, win);
  win_allocate_shared_fn next = NEXT(win_allocate_shared_fn, "PMPI_Win_allocate_shared");
  return next ? next(size, disp_unit, info, comm, baseptr, win) : no_mpi("MPI_Win_allocate_shared");
}

HP_MPI_API int MPI_Win_shared_query(hp_mpi_handle win, int rank, hp_mpi_aint *size, int *disp_unit, void *baseptr) {
  if (hp_mpi_active()) return hp_win_shared_query(win, rank, size, disp_unit, baseptr);
  win_shared_query_fn next = NEXT(win_shared_query_fn, "PMPI_Win_shared_query");
  return next ? next(win, rank, size, disp_unit, baseptr) : no_mpi("MPI_Win_shared_query");
}

HP_MPI_API int MPI_Win_get_attr(hp_mpi_handle win, int keyval, void *value, int *flag) {
  if (hp_mpi_active()) return hp_win_get_attr(win, keyval, value, flag);
  win_get_attr_fn next = NEXT(win_get_attr_fn, "PMPI_Win_get_attr");
  return next ? next(win, keyval, value, flag) : no_mpi("MPI_Win_get_attr");
}

HP_MPI_API int MPI_Win_free(void *win) {
  if (hp_mpi_active()) return hp_win_free(win);
  win_free_fn next = NEXT(win_free_fn, "PMPI_Win_free");
  return next ? next(win) : no_mpi("MPI_Win_free");
}

/* A rank that finishes early waits in MPI_Finalize for the others, often for
 * long: the pages its cache holds go back to the node's pool first, so the
 * ranks still working can map them.  MPI_Finalize has no handles, so this
 * holds for any MPI, active or not. */
HP_MPI_API int MPI_Finalize(void) {
  hp_finalize_trim();
  finalize_fn next = NEXT(finalize_fn, "PMPI_Finalize");
  return next ? next() : no_mpi("MPI_Finalize");
}
