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
 *    hp_mpi_active() has found a backend built for the program's MPI
 *    (MPICH's ABI, Open MPI's), each forwards its arguments untouched.
 * What a backend does: mpi-preload-calls.c. */
#define _GNU_SOURCE
#include "mpi-preload.h"
#include "option-reader.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HP_MPI_API __attribute__((visibility("default")))

static hp_mpi_fn as_function(void *p) {
  hp_mpi_fn f;
  memcpy(&f, &p, sizeof(f)); /* dlsym's object pointer to a function pointer */
  return f;
}

/* libhugepool_preload.so's option reader (option-reader.h), or NULL where it
 * is not loaded. */
static hp_preload_option_fn preload_option_reader(void) {
  return (hp_preload_option_fn)as_function(hp_dlsym(RTLD_DEFAULT, HP_PRELOAD_OPTION_SYMBOL));
}

void hp_mpi_warn_once(int *done, const char *what) {
  if (__atomic_exchange_n(done, 1, __ATOMIC_RELAXED)) return;
  /* HUGEPOOL_WARN as libhugepool_preload.so read it at load, by the option
   * table's rules (option-reader.h); without the preload, the default (1). */
  hp_preload_option_fn get = preload_option_reader();
  long long value = 1;
  if (get && get("HUGEPOOL_WARN", &value) == 0 && value == 0) return;
  (void)fprintf(stderr, "hugepool[%ld]: %s\n", (long)getpid(), what);
}

/* ---- finding the program's MPI library ---------------------------------- */

typedef struct loaded {
  const char *names[256];
  int count;
} loaded;

static int note_loaded(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  loaded *l = data;
  if (info->dlpi_name && info->dlpi_name[0] && l->count < 256) l->names[l->count++] = info->dlpi_name;
  return 0;
}

hp_mpi_fn hp_mpi_next(const char *name) {
  void *p = hp_dlsym(RTLD_NEXT, name);
  if (p) return as_function(p);
  /* Not in the global scope: an MPI library loaded with RTLD_LOCAL (Python
   * loads extension modules so, with their libmpi).  Ask each loaded
   * object; dlopen runs after dl_iterate_phdr, which holds a loader lock. */
  if (!hp_libc_complete()) return NULL; /* dlopen and dlclose may be missing (libc-floor.h) */
  loaded l = {.count = 0};
  dl_iterate_phdr(note_loaded, &l);
  for (int i = 0; i < l.count && !p; i++) {
    void *h = dlopen(l.names[i], RTLD_LAZY | RTLD_NOLOAD);
    if (!h) continue;
    p = hp_dlsym(h, name);
    dlclose(h); /* NOLOAD took a reference; the object stays as it was */
  }
  return p ? as_function(p) : NULL;
}

void hp_finalize_trim(void) {
  size_t (*trim)(void) = (size_t(*)(void))as_function(hp_dlsym(RTLD_DEFAULT, "hugepool_trim"));
  if (trim) (void)trim();
}

/* ---- deciding once: which backend, if any -------------------------------- */

static const hp_mpi_backend *const backends[] = {
#if defined(HP_MPI_HAVE_MPICH)
    &hp_mpi_backend_mpich,
#endif
#if defined(HP_MPI_HAVE_OPENMPI)
    &hp_mpi_backend_openmpi,
#endif
    NULL,
};

static const hp_mpi_backend *active;
static pthread_once_t decided = PTHREAD_ONCE_INIT;

/* The first line of a library version string, blanks squeezed and cut at
 * its first comma ("Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4",
 * "MPICH Version:\t4.0.2\nMPICH Release date: ..." -> "MPICH Version: 4.0.2"),
 * at most `size` - 1 characters. */
static void first_line(const char *text, char *out, size_t size) {
  size_t n = 0;
  int blank = 0;
  for (const char *c = text; *c && *c != '\n' && *c != ',' && n + 1 < size; c++) {
    if (*c == ' ' || *c == '\t' || *c == '\r') {
      blank = n > 0;
      continue;
    }
    if (blank && n + 2 < size) out[n++] = ' ';
    blank = 0;
    out[n++] = *c;
  }
  out[n] = '\0';
}

static void decide(void) {
  static int warned;
  /* The interposer, where it is loaded, answers no option while it is
   * passive (an older glibc, a sanitizer's heap): every call is forwarded. */
  hp_preload_option_fn get = preload_option_reader();
  long long warn = 1;
  if (get && get("HUGEPOOL_WARN", &warn) != 0) return;
  int (*version)(char *, int *) = (int (*)(char *, int *))hp_mpi_next("PMPI_Get_library_version");
  if (!version) return; /* no MPI library: every call is forwarded (and fails) */
  /* Room for any library's answer: MPICH's limit (8192) is the largest
   * there is (Open MPI's is 256). */
  static char text[8192 + 1];
  int len = 0;
  if (version(text, &len) != 0) return;
  text[len >= 0 && len <= 8192 ? len : 8192] = '\0';
  for (size_t i = 0; backends[i]; i++) {
    if (strncmp(text, backends[i]->prefix, strlen(backends[i]->prefix)) == 0) {
      if (backends[i]->activate()) __atomic_store_n(&active, backends[i], __ATOMIC_RELEASE);
      return;
    }
  }
  char program[128], built[256] = "none";
  first_line(text, program, sizeof(program));
  size_t used = 0;
  for (size_t i = 0; backends[i] && used < sizeof(built); i++) {
    int n = snprintf(built + used, sizeof(built) - used, "%s%s", i ? ", " : "", backends[i]->built_with);
    if (n < 0) break;
    used += (size_t)n;
  }
  char what[512];
  (void)snprintf(what, sizeof(what),
                 "MPI entry points: the program's MPI library (%s) is none of those hugepool's entry points "
                 "were built for (%s); MPI_Alloc_mem and MPI_Win_allocate_shared are left to it",
                 program[0] ? program : "no version string", built);
  hp_mpi_warn_once(&warned, what);
}

const hp_mpi_backend *hp_mpi_active(void) {
  /* Under a glibc older than the preload's core needs, every call is
   * forwarded untouched (libc-floor.h; pthread_once may not even exist). */
  if (!hp_libc_complete()) return NULL;
  pthread_once(&decided, decide);
  return __atomic_load_n(&active, __ATOMIC_ACQUIRE);
}

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
  const hp_mpi_backend *b = hp_mpi_active();
  if (b) return b->alloc_mem(size, info, baseptr);
  alloc_mem_fn next = NEXT(alloc_mem_fn, "PMPI_Alloc_mem");
  return next ? next(size, info, baseptr) : no_mpi("MPI_Alloc_mem");
}

HP_MPI_API int MPI_Free_mem(void *base) {
  const hp_mpi_backend *b = hp_mpi_active();
  if (b) return b->free_mem(base);
  free_mem_fn next = NEXT(free_mem_fn, "PMPI_Free_mem");
  return next ? next(base) : no_mpi("MPI_Free_mem");
}

HP_MPI_API int MPI_Win_allocate_shared(hp_mpi_aint size, int disp_unit, hp_mpi_handle info, hp_mpi_handle comm,
                                       void *baseptr, void *win) {
  const hp_mpi_backend *b = hp_mpi_active();
  if (b) return b->win_allocate_shared(size, disp_unit, info, comm, baseptr, win);
  win_allocate_shared_fn next = NEXT(win_allocate_shared_fn, "PMPI_Win_allocate_shared");
  return next ? next(size, disp_unit, info, comm, baseptr, win) : no_mpi("MPI_Win_allocate_shared");
}

HP_MPI_API int MPI_Win_shared_query(hp_mpi_handle win, int rank, hp_mpi_aint *size, int *disp_unit, void *baseptr) {
  const hp_mpi_backend *b = hp_mpi_active();
  if (b) return b->win_shared_query(win, rank, size, disp_unit, baseptr);
  win_shared_query_fn next = NEXT(win_shared_query_fn, "PMPI_Win_shared_query");
  return next ? next(win, rank, size, disp_unit, baseptr) : no_mpi("MPI_Win_shared_query");
}

HP_MPI_API int MPI_Win_get_attr(hp_mpi_handle win, int keyval, void *value, int *flag) {
  const hp_mpi_backend *b = hp_mpi_active();
  if (b) return b->win_get_attr(win, keyval, value, flag);
  win_get_attr_fn next = NEXT(win_get_attr_fn, "PMPI_Win_get_attr");
  return next ? next(win, keyval, value, flag) : no_mpi("MPI_Win_get_attr");
}

HP_MPI_API int MPI_Win_free(void *win) {
  const hp_mpi_backend *b = hp_mpi_active();
  if (b) return b->win_free(win);
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
