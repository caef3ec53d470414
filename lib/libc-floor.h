/* SPDX-License-Identifier: BSD-3-Clause */
/* The oldest glibc a preloaded object loads under, and what it does there.
 *
 * A site's module puts the preload into every process of a job, and jobs
 * run containers (Apptainer passes the host's environment in, and sites
 * bind their software trees into them) and log in to nodes of an older
 * release.  Linked as usual against this build's glibc, the preload names
 * the symbol versions of that glibc (pthread_create@GLIBC_2.34, ...), and
 * under a glibc that lacks one the loader refuses every program before its
 * first instruction: "version `GLIBC_2.34' not found".  So the objects that
 * are preloaded, and the core they are made of, are compiled with this
 * header first (-include), and:
 *   - every glibc function they call whose version is newer than glibc 2.17
 *     is named at its oldest version (dlsym@GLIBC_2.2.5: glibc 2.34 and
 *     later keep those names as aliases) and weakly: under glibc 2.17-2.33
 *     these live in libpthread and libdl, which a process may not have
 *     loaded, and then the name is NULL instead of a refused program;
 *   - the rest are called through the system call (os-kernel.h) or are at
 *     most 2.17 (tests/preload/libc-floor checks the objects' versions);
 *   - at run time the core works only under glibc HP_LIBC_ACTIVE_FLOOR or
 *     later (hp_libc_complete()): under an older glibc the preload hands
 *     every call to glibc and the process runs as without it (tested in a
 *     glibc 2.31 root).  Below 2.17 the loader still refuses.
 * The jemalloc of the small heap gets the same names (cmake/jemalloc-
 * private.cmake reads HP_LIBC_OLD_NAMES below).  Sanitizer builds (never
 * preloaded) name the current versions: their interceptors stay in front. */
#ifndef HUGEPOOL_LIBC_FLOOR_H
#define HUGEPOOL_LIBC_FLOOR_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <gnu/libc-version.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

/* glibc from which every name below is in libc.so.6 itself. */
#define HP_LIBC_ACTIVE_FLOOR_MAJOR 2
#define HP_LIBC_ACTIVE_FLOOR_MINOR 34

/* The oldest version of each name: the architecture's first glibc (V0), or
 * 2.12 for the thread names and 2.3.4 for the affinity ones (the first
 * aarch64 glibc, 2.17, had them all). */
#if defined(__x86_64__)
#define HP_LIBC_V0 "GLIBC_2.2.5"
#define HP_LIBC_V12 "GLIBC_2.12"
#define HP_LIBC_V34 "GLIBC_2.3.4"
#elif defined(__aarch64__)
#define HP_LIBC_V0 "GLIBC_2.17"
#define HP_LIBC_V12 "GLIBC_2.17"
#define HP_LIBC_V34 "GLIBC_2.17"
#endif

/* X(name, version): every glibc name newer than 2.17 that a preloaded object
 * calls (one per line: cmake/jemalloc-private.cmake reads them). */
#define HP_LIBC_OLD_NAMES(X)                     \
  X(dlsym, HP_LIBC_V0)                           \
  X(dlclose, HP_LIBC_V0)                         \
  X(dlerror, HP_LIBC_V0)                         \
  X(pthread_create, HP_LIBC_V0)                  \
  X(pthread_join, HP_LIBC_V0)                    \
  X(pthread_once, HP_LIBC_V0)                    \
  X(pthread_key_create, HP_LIBC_V0)              \
  X(pthread_setspecific, HP_LIBC_V0)             \
  X(pthread_mutex_trylock, HP_LIBC_V0)           \
  X(pthread_mutexattr_init, HP_LIBC_V0)          \
  X(pthread_mutexattr_destroy, HP_LIBC_V0)       \
  X(pthread_mutexattr_settype, HP_LIBC_V0)       \
  X(pthread_sigmask, HP_LIBC_V0)                 \
  X(pthread_attr_setstacksize, HP_LIBC_V0)       \
  X(pthread_attr_setaffinity_np, HP_LIBC_V34)    \
  X(pthread_getname_np, HP_LIBC_V12)             \
  X(pthread_setname_np, HP_LIBC_V12)

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HP_LIBC_FLOOR_OFF 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define HP_LIBC_FLOOR_OFF 1
#endif
#endif

#if defined(HP_LIBC_V0) && !defined(HP_LIBC_FLOOR_OFF)
#define HP_LIBC_PRAGMA(x) _Pragma(#x)
#define HP_LIBC_OLD(name, version) \
  HP_LIBC_PRAGMA(weak name)        \
  __asm__(".symver " #name "," #name "@" version);
HP_LIBC_OLD_NAMES(HP_LIBC_OLD)
/* dlopen too, but where the preload defines its own (preload/dlopen.c: a
 * versioned name there would be a definition); the core's one call of it
 * (registrar-gpu.c) runs only where hp_libc_complete() said yes. */
#ifndef HP_LIBC_FLOOR_DEFINES_DLOPEN
HP_LIBC_OLD(dlopen, HP_LIBC_V0)
#endif
#undef HP_LIBC_OLD

/* Does this process's glibc have everything the core calls?  glibc 2.34 or
 * later, every name above found.  Worked out once per object that asks (the
 * answer is kept: free() asks it on its slower paths), then one load. */
static inline bool hp_libc_complete(void) {
  static _Atomic int answer; /* 0: not worked out yet, 1: yes, 2: no */
  int a = atomic_load_explicit(&answer, memory_order_relaxed);
  if (__builtin_expect(a != 0, 1)) return a == 1;
  const char *v = gnu_get_libc_version();
  int major = 0, minor = 0;
  while (*v >= '0' && *v <= '9') major = major * 10 + (*v++ - '0');
  if (*v == '.') v++;
  while (*v >= '0' && *v <= '9') minor = minor * 10 + (*v++ - '0');
  bool ok = major > HP_LIBC_ACTIVE_FLOOR_MAJOR ||
            (major == HP_LIBC_ACTIVE_FLOOR_MAJOR && minor >= HP_LIBC_ACTIVE_FLOOR_MINOR);
#define HP_LIBC_FOUND(name, version) &&((name) != NULL)
  ok = ok HP_LIBC_OLD_NAMES(HP_LIBC_FOUND);
#undef HP_LIBC_FOUND
  atomic_store_explicit(&answer, ok ? 1 : 2, memory_order_relaxed);
  return ok;
}

/* dlsym where the process has one: under glibc 2.17-2.33 only with libdl
 * loaded; NULL (nothing found) otherwise.  RTLD_NEXT keeps its meaning: this
 * is compiled into each caller's object. */
static inline void *hp_dlsym(void *restrict handle, const char *restrict name) {
  return dlsym ? dlsym(handle, name) : NULL;
}
#else
static inline bool hp_libc_complete(void) { return true; }
static inline void *hp_dlsym(void *restrict handle, const char *restrict name) { return dlsym(handle, name); }
#endif

#endif /* HUGEPOOL_LIBC_FLOOR_H */
