/* SPDX-License-Identifier: BSD-3-Clause */
/* libhugepool_mpi_preload.so, inside: the entry points (mpi-preload.c) know
 * no MPI ABI and forward anything they do not handle; what they do for one
 * MPI ABI is in mpi-preload-calls.c, compiled once per MPI installed here
 * (MPICH's mpi.h, Open MPI's mpi.h) into one hp_mpi_backend each.  At the
 * first MPI call the entry points ask the program's MPI library who it is
 * (MPI_Get_library_version) and use the backend built for it, or none.
 *
 * Why: hugepool-run preloads this library into every program, MPI or not,
 * and whatever MPI the program brings.  Its MPI_* symbols then interpose
 * that MPI's: a program of an ABI no backend was built for must reach its
 * own library unchanged, so the entry points take every handle as a
 * register-wide integer and pass it on as it came (x86-64 and AArch64 pass
 * an int and a pointer argument in one 64-bit register; a callee taking an
 * int reads its low half). */
#ifndef HUGEPOOL_MPI_PRELOAD_H
#define HUGEPOOL_MPI_PRELOAD_H

#include <stddef.h>
#include <stdint.h>

#define HP_MPI_INTERNAL __attribute__((visibility("hidden")))

typedef intptr_t hp_mpi_handle;  /* MPI_Comm, MPI_Info, MPI_Win of any ABI */
typedef ptrdiff_t hp_mpi_aint;   /* MPI_Aint in every ABI */
typedef void (*hp_mpi_fn)(void); /* any function, cast to its type to call */

/* The program's MPI library's function `name` (a PMPI_* name): the next
 * definition after this library (dlsym(RTLD_NEXT)), else one in a library
 * loaded with RTLD_LOCAL (a Python extension module and its libmpi); NULL
 * when no MPI library is loaded. */
HP_MPI_INTERNAL hp_mpi_fn hp_mpi_next(const char *name);

/* Prints "hugepool[pid]: what" once per *done (HUGEPOOL_WARN=0: never). */
HP_MPI_INTERNAL void hp_mpi_warn_once(int *done, const char *what);

/* What one MPI ABI's backend does (mpi-preload-calls.c). */
typedef struct hp_mpi_backend {
  /* How that MPI's MPI_Get_library_version begins ("MPICH Version:",
   * "Open MPI v"), and the MPI the backend was built with, for messages
   * ("MPICH 4.0.2"). */
  const char *prefix;
  const char *built_with;
  /* Resolves what the backend calls (the MPI library's functions and
   * handles, libhugepool_preload.so's hugepool_*); 1 when all are there.
   * Says why not, once, when they are not. */
  int (*activate)(void);
  int (*alloc_mem)(hp_mpi_aint size, hp_mpi_handle info, void *baseptr);
  int (*free_mem)(void *base);
  /* A pointer to a handle (MPI_Win *) is the program's, of its ABI's width:
   * void * here, written through the real type in mpi-preload-calls.c. */
  int (*win_allocate_shared)(hp_mpi_aint size, int disp_unit, hp_mpi_handle info, hp_mpi_handle comm, void *baseptr,
                             void *win);
  int (*win_shared_query)(hp_mpi_handle win, int rank, hp_mpi_aint *size, int *disp_unit, void *baseptr);
  int (*win_get_attr)(hp_mpi_handle win, int keyval, void *value, int *flag);
  int (*win_free)(void *win);
} hp_mpi_backend;

/* The backends compiled in (CMake defines HP_MPI_HAVE_MPICH and
 * HP_MPI_HAVE_OPENMPI for mpi-preload.c). */
HP_MPI_INTERNAL extern const hp_mpi_backend hp_mpi_backend_mpich;
HP_MPI_INTERNAL extern const hp_mpi_backend hp_mpi_backend_openmpi;

/* The backend serving the program's MPI, decided once at the first call:
 * its MPI_Get_library_version names the MPI a backend was built for, every
 * function that backend needs is resolved, and libhugepool_preload.so is
 * loaded.  NULL: every call is forwarded. */
HP_MPI_INTERNAL const hp_mpi_backend *hp_mpi_active(void);

/* Gives the pages hugepool caches back to the pool (hugepool_trim of
 * libhugepool_preload.so, where it is loaded); MPI_Finalize calls it. */
HP_MPI_INTERNAL void hp_finalize_trim(void);

#endif
