/* SPDX-License-Identifier: BSD-3-Clause */
/* libhugepool_mpi_preload.so, inside: the entry points (mpi-preload.c) know
 * no MPI ABI and forward anything they do not handle; what they do for the
 * MPI this library was built against is in mpi-preload-calls.c (mpi.h).
 *
 * Why two halves: hugepool-run preloads this library into every program,
 * MPI or not, and whatever MPI the program brings.  Its MPI_* symbols then
 * interpose that MPI's: a program of another MPI ABI (Open MPI's handles
 * are pointers, MPICH's ints) must reach its own library unchanged, so the
 * entry points take every handle as a register-wide integer and pass it on
 * as it came (x86-64 and AArch64 pass an int and a pointer argument in one
 * 64-bit register; a callee taking an int reads its low half). */
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

/* 1 when this library handles MPI calls: the program's MPI library has the
 * ABI of the mpi.h it was built with (its MPI_Get_library_version says so),
 * every function it needs resolved, and libhugepool_preload.so is loaded;
 * decided once, at the first call.  0: every call is forwarded. */
HP_MPI_INTERNAL int hp_mpi_active(void);

/* The calls, for an active library (mpi-preload-calls.c). */
HP_MPI_INTERNAL int hp_alloc_mem(hp_mpi_aint size, hp_mpi_handle info, void *baseptr);
HP_MPI_INTERNAL int hp_free_mem(void *base);
/* A pointer to a handle (MPI_Win *) is the program's, of its ABI's width:
 * void * here, written through the real type in mpi-preload-calls.c. */
HP_MPI_INTERNAL int hp_win_allocate_shared(hp_mpi_aint size, int disp_unit, hp_mpi_handle info, hp_mpi_handle comm,
                                           void *baseptr, void *win);
HP_MPI_INTERNAL int hp_win_shared_query(hp_mpi_handle win, int rank, hp_mpi_aint *size, int *disp_unit, void *baseptr);
HP_MPI_INTERNAL int hp_win_get_attr(hp_mpi_handle win, int keyval, void *value, int *flag);
HP_MPI_INTERNAL int hp_win_free(void *win);
/* Gives the pages hugepool caches back to the pool (hugepool_trim of
 * libhugepool_preload.so, where it is loaded); MPI_Finalize calls it. */
HP_MPI_INTERNAL void hp_finalize_trim(void);

#endif
