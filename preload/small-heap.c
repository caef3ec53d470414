/* SPDX-License-Identifier: BSD-3-Clause */
/* The small heap (HUGEPOOL_SMALL_HEAP=1): requests up to 256 KB served by
 * jemalloc arenas whose memory is hugetlb chunks (heap-chunks.c), so a
 * whole heap can live on huge pages, with jemalloc's speed: thread caches,
 * size-class bins with their own locks, decay that gives memory back.
 *
 * All of it is libhugepool_small_heap.so, which the interposer loads only
 * where the heap was asked for (small-heap-bridge.h): its one export,
 * hugepool_small_heap_entry at the end of this file, takes the core's calls
 * and hands back the heap's.
 *
 * The jemalloc here is a private copy of Debian's libjemalloc_pic.a made at
 * build time (cmake/jemalloc-private.cmake): every symbol it defines is renamed
 * hpje_*, none is exported (small-heap-exports.map), and its constructor is
 * gone, so it starts only here, from the preload's initialisation
 * (allocations made meanwhile, pthread_atfork's and the background thread's
 * included, go to glibc).  The program's own allocator, whatever it is,
 * never meets it.
 *
 * One arena per CPU (at most HEAP_ARENAS), each thread bound to one, round
 * robin, the first time it allocates; jemalloc's own automatic arena (0)
 * serves nothing.  Frees go to jemalloc whichever thread frees: it finds the
 * arena from the pointer. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "heap.h"

/* The private jemalloc's entry points (cmake/jemalloc-private.cmake). */
void *hpje_malloc(size_t size);
void *hpje_calloc(size_t count, size_t size);
void *hpje_mallocx(size_t size, int flags);
void *hpje_rallocx(void *ptr, size_t size, int flags);
size_t hpje_nallocx(size_t size, int flags);
void hpje_free(void *ptr);
size_t hpje_sallocx(const void *ptr, int flags);
int hpje_mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);

/* Its configuration: this string, and nothing from the environment or
 * /etc/malloc.conf (see the glue below).  narenas:1: jemalloc's automatic
 * arena serves nothing here; retain:false so that jemalloc gives extents
 * back (dalloc) after its decay instead of keeping them; muzzy_decay_ms:0
 * so that dirty extents go straight to dalloc; one background thread
 * purges after dirty_decay_ms even when the program makes no more calls
 * (started once the heap holds HC_GROWN_CHUNKS chunks, see below);
 * tcache_max:65536: thread caches up to 64 KB, not 32 KB (jemalloc's large
 * path, above it, costs a lock and an extent lookup per call; measured in
 * bench/RESULTS.md section 11); lg_extent_max_active_fit:10: a free extent
 * may serve a request up to 1024 times smaller (jemalloc's default, 64,
 * left the 2 MB extents that coalesce inside a chunk unused for small slabs,
 * and a churning heap took a new chunk for nearly every slab). */
const char *hpje_malloc_conf =
    "narenas:1,retain:false,dss:disabled,muzzy_decay_ms:0,dirty_decay_ms:1000,"
    "background_thread:false,max_background_threads:1,tcache_max:65536,lg_extent_max_active_fit:10";

/* jemalloc's background thread costs every process a thread at start-up
 * (with the rest of jemalloc's start, 1 ms of CPU per exec: a make -j2 or a
 * compiler driver runs hundreds of short processes, /bin/true 2-3x plain).
 * A heap of a few chunks has little to give back, so the thread starts only
 * once the heap has held HC_GROWN_CHUNKS chunks (16 MB); a program that
 * frees a larger heap and goes idle still has it back in the pool after the
 * decay.  The chunks' hook sets hc_grown; a malloc call, outside jemalloc
 * (its locks free), starts the thread, once. */
static atomic_bool background_on;

static void start_background_if_grown(void) {
  if (HPL_LIKELY(!atomic_load_explicit(&hc_grown, memory_order_relaxed))) return;
  if (atomic_load_explicit(&background_on, memory_order_relaxed) || atomic_exchange(&background_on, true)) return;
  bool on = true;
  (void)hpje_mallctl("background_thread", NULL, NULL, &on, sizeof(on));
}

/* One arena per CPU, at most HEAP_ARENAS, each made when the first thread
 * bound to its slot makes its first request: making one costs about 22 page
 * faults of jemalloc's metadata, so a process that stays single-threaded
 * (every short process of a job script) makes one, not one per CPU (on a
 * node of 16 CPUs or more, 330 faults fewer per exec: bench/RESULTS.md
 * section 33).  A slot holds the arena's index, 0 until it is made (index 0
 * is jemalloc's automatic arena, never one of these). */
#define HEAP_ARENAS 16
static _Atomic unsigned arenas[HEAP_ARENAS];
static unsigned n_arenas; /* slots in use: set once by sh_init */
static extent_hooks_t *arena_hooks;
static atomic_uint next_arena;

/* A new arena whose extents come from the chunks' hooks: its index, or 0
 * with err set. */
static unsigned arena_make(int *err) {
  /* jemalloc 5.3's arena_config_t: the arenas' metadata stays on jemalloc's
   * own mappings (4 KB pages), only their extents come from the hooks. */
  struct {
    extent_hooks_t *extent_hooks;
    bool metadata_use_hooks;
  } config = {arena_hooks, false};
  unsigned ind = 0;
  size_t len = sizeof(ind);
  *err = hpje_mallctl("experimental.arenas_create_ext", &ind, &len, &config, sizeof(config));
  return *err ? 0 : ind;
}

/* The arena of slot i, made now if no thread has made it yet.  Two threads
 * may make one for the same slot at once: the first to store it wins, and
 * the other thread keeps the arena it made for itself (jemalloc serialises
 * the making, and an arena whose only thread exits is left to its decay).
 * No lock of ours, so nothing to hold across fork(): jemalloc's own
 * handlers cover a making in progress. */
static unsigned arena_of_slot(unsigned i) {
  unsigned ind = atomic_load_explicit(&arenas[i], memory_order_acquire);
  if (HPL_LIKELY(ind != 0)) return ind;
  int err;
  unsigned made = arena_make(&err);
  if (made == 0) return atomic_load_explicit(&arenas[0], memory_order_acquire); /* slot 0 is made by sh_init */
  unsigned expected = 0; /* a thread that loses the store keeps the arena it made */
  (void)atomic_compare_exchange_strong_explicit(&arenas[i], &expected, made, memory_order_acq_rel,
                                                memory_order_acquire);
  return made;
}

/* A thread is bound to one of the heap's arenas before its first request:
 * jemalloc's own association (thread.arena) lets plain malloc, calloc and
 * realloc take jemalloc's fast path (a thread-cache pop for most requests,
 * a quarter of mallocx's instructions, whose flags send every call down its
 * general path), and the flags name the same arena where flags are needed.
 * A thread never bound would be served by jemalloc's automatic arena, whose
 * memory is not on hugetlb chunks: hence the check on every call. */
static int flags_of_thread(void) {
  int f = SH_THREAD.arena_flags;
  if (HPL_LIKELY(f != 0)) return f;
  unsigned i = atomic_fetch_add_explicit(&next_arena, 1, memory_order_relaxed) % n_arenas;
  unsigned ind = arena_of_slot(i);
  if (hpje_mallctl("thread.arena", NULL, NULL, &ind, sizeof(ind)) != 0) return 0;
  f = MALLOCX_ARENA(ind);
  SH_THREAD.arena_flags = f;
  return f;
}

static int sh_init(void) {
  arena_hooks = hc_init();
  if (!arena_hooks) return -1;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  n_arenas = cpus < 1 ? 1 : cpus > HEAP_ARENAS ? HEAP_ARENAS : (unsigned)cpus;
  int err;
  unsigned first = arena_make(&err); /* the first now: a refusal is said at start, once */
  if (first == 0) {
    char text[160];
    (void)snprintf(text, sizeof(text), "small heap: jemalloc refused to create an arena (%s); small requests stay "
                   "with glibc", strerror(err));
    sh_core.warn(text);
    return -1;
  }
  atomic_store_explicit(&arenas[0], first, memory_order_release);
  return 0;
}

static bool sh_reentered(void) { return hc_in_hook(); }

/* The arena flags for a request the heap may take, or 0: the pool is short
 * (heap.h: hc_short) or the thread could not be bound; glibc serves it. */
static int flags_if_serving(void) {
  if (hc_short()) return 0;
  return flags_of_thread();
}

static void *sh_malloc(size_t size, bool zero) {
  start_background_if_grown();
  if (HPL_UNLIKELY(flags_if_serving() == 0)) return NULL;
  return zero ? hpje_calloc(1, size ? size : 1) : hpje_malloc(size ? size : 1);
}

static void *sh_memalign(size_t alignment, size_t size) {
  int flags = flags_if_serving();
  if (HPL_UNLIKELY(flags == 0)) return NULL;
  return hpje_mallocx(size ? size : 1, flags | MALLOCX_ALIGN(alignment));
}

/* Below this both sides are jemalloc small size classes (slabs: a block
 * never grows in place there) that its malloc fast path serves. */
#define SMALL_CLASSES_MAX ((size_t)4096)

static void *sh_realloc(void *ptr, size_t size) {
  /* A size of the block's own class keeps the block, as jemalloc would, but
   * without its realloc's bookkeeping, which counts the whole new size as
   * allocated: a string grown a few bytes at a time past 64 KB set off a
   * thread-cache event at every step. */
  size_t usable = hpje_sallocx(ptr, 0);
  if (size <= usable && hpje_nallocx(size, 0) == usable) return ptr;
  int flags = flags_if_serving();
  if (HPL_UNLIKELY(flags == 0)) return NULL;
  if (size > SMALL_CLASSES_MAX || usable > SMALL_CLASSES_MAX) return hpje_rallocx(ptr, size, flags);
  /* Between small classes jemalloc's realloc too takes a new block and
   * copies, through its general path (sqlite3 growing its values: 518
   * instructions a call, glibc's realloc 335): the fast paths of malloc
   * and free do it, copy included, in 166. */
  void *fresh = hpje_malloc(size);
  if (!fresh) return NULL;
  memcpy(fresh, ptr, usable < size ? usable : size);
  hpje_free(ptr);
  return fresh;
}

static void sh_free(void *ptr) { hpje_free(ptr); /* jemalloc finds the arena from the pointer */ }

static size_t sh_usable_size(const void *ptr) { return hpje_sallocx(ptr, 0); }

static bool sh_owns(const void *ptr) { return hc_owns(ptr); }

static void sh_stats(hp_small_heap_counters *out) {
  hc_counters c;
  hc_stats(&c);
  out->chunks = c.chunks;
  out->chunks_peak = c.chunks_peak;
  out->chunks_returned = c.chunks_returned;
  out->bytes_in_extents = c.bytes_in_extents;
}

/* ---- glue: the libc calls cmake/jemalloc-private.cmake sends here ------- */

/* jemalloc reads MALLOC_CONF with it: settings meant for the program's
 * allocator (a jemalloc too, maybe) must not reach this one. */
char *hpl_je_secure_getenv(const char *name) {
  (void)name;
  return NULL;
}

/* ... and /etc/malloc.conf (a symbolic link whose target is the settings). */
ssize_t hpl_je_readlink(const char *restrict path, char *restrict buf, size_t len) {
  if (strcmp(path, "/etc/malloc.conf") == 0) {
    errno = ENOENT;
    return -1;
  }
  return readlink(path, buf, len);
}

/* jemalloc looks up the next pthread_create at start-up; the preload defines
 * none, so it is libc's, and no dlsym (which may calloc) is needed. */
void *hpl_je_dlsym(void *restrict handle, const char *restrict name) {
  if (strcmp(name, "pthread_create") == 0) {
    int (*create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *) = pthread_create;
    void *sym;
    memcpy(&sym, &create, sizeof(sym)); /* what dlsym returns: a function as an object pointer */
    return sym;
  }
  return dlsym(handle, name);
}

/* Heap profiling's unwinder: profiling is never enabled here. */
int hpl_je_unwind_backtrace(void *trace, void *arg) {
  (void)trace, (void)arg;
  return 5; /* _URC_END_OF_STACK */
}

uintptr_t hpl_je_unwind_get_ip(void *context) {
  (void)context;
  return 0;
}

/* Heap profiling's arithmetic: jemalloc's sampling interval (log) and its
 * table of unbiased sizes (exp, round), libm's functions.  Debian builds
 * jemalloc with profiling, but it is never enabled here: hpje_malloc_conf
 * sets no prof option and no other source of settings reaches this jemalloc
 * (hpl_je_secure_getenv, hpl_je_readlink), so nothing calls these.  They
 * keep libm out of every preloaded process (loading it cost each exec
 * 0.13 ms: bench/RESULTS.md section 33).  Were one called after all, it says
 * so and aborts rather than return a wrong number. */
static _Noreturn void no_profiling(void) {
  static const char msg[] = "hugepool: the small heap's jemalloc started heap profiling, which the preload "
                            "never enables; aborting\n";
  ssize_t w = write(STDERR_FILENO, msg, sizeof(msg) - 1);
  (void)w;
  abort();
}

double hpl_je_log(double x) {
  (void)x;
  no_profiling();
}

double hpl_je_exp(double x) {
  (void)x;
  no_profiling();
}

double hpl_je_round(double x) {
  (void)x;
  no_profiling();
}

/* jemalloc's madvise and mprotect, on its own metadata mappings only (the
 * heap's extents come from hooks with no purge: heap-chunks.c), go straight
 * to the kernel: the plain names bind to this library's exports
 * (protect.c), which look the range up in the core's registry, and that
 * must not happen from inside jemalloc, under its locks. */
int hpl_je_madvise(void *addr, size_t len, int advice) { return sh_core.madvise(addr, len, advice); }

int hpl_je_mprotect(void *addr, size_t len, int prot) { return sh_core.mprotect(addr, len, prot); }

/* ---- the object's one export (small-heap-bridge.h) ----------------------- */
hp_small_heap_core sh_core;

static const hp_small_heap_ops ops = {
    .version = HP_SMALL_HEAP_VERSION,
    .init = sh_init,
    .malloc = sh_malloc,
    .memalign = sh_memalign,
    .realloc = sh_realloc,
    .free = sh_free,
    .usable_size = sh_usable_size,
    .owns = sh_owns,
    .reentered = sh_reentered,
    .stats = sh_stats,
};

__attribute__((visibility("default"))) const hp_small_heap_ops *hugepool_small_heap_entry(
    const hp_small_heap_core *core);
const hp_small_heap_ops *hugepool_small_heap_entry(const hp_small_heap_core *core) {
  if (!core || core->version != HP_SMALL_HEAP_VERSION) return NULL;
  sh_core = *core;
  return &ops;
}
