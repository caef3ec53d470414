/* SPDX-License-Identifier: BSD-3-Clause */
/* Routing: requests at or above HUGEPOOL_THRESHOLD go to hugepool (unless
 * beyond the pool share, hold.c), the rest to glibc (or to the small heap
 * when HUGEPOOL_SMALL_HEAP=1); frees and
 * reallocs follow the pointer, not the size.  Also: the shortage policy,
 * the preload's counters, and start-up without recursion. */
#define _GNU_SOURCE
#include "preload.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hooks.h" /* the core's option table, hooks and diagnostics */

_Atomic size_t hpl_threshold = (size_t)1 << 20; /* the option's default until init */
atomic_bool hpl_small_heap_on;
atomic_bool hpl_glibc_direct; /* false until init: every call starts it */

enum { ST_NEW, ST_INITIALISING, ST_READY, ST_PASSIVE };
static atomic_int state = ST_NEW;

/* Set while this thread runs our initialisation: anything it allocates
 * (pthread_atfork's table, say) goes straight to glibc. */
static __thread int in_init __attribute__((tls_model("initial-exec")));

/* Shortage policy, from HUGEPOOL_POLICY: fallback (the preload's default)
 * gives a refused large request to glibc; strict fails it; thp and small
 * let the core fall back, and glibc serves what the core still refuses. */
static bool policy_strict;
static bool small_heap_wanted; /* --small-heap, glibc behind us: the constructor loads it */
static atomic_bool shortage_reported;

/* The counters below are written on request paths, the settings above are
 * read by every malloc and free: a counter on a settings' cache line makes
 * two threads pass that line back and forth at every call (4 MB
 * malloc+free pairs in two threads cost 2-2.7x one thread's until they were
 * kept apart).  So the counters have cache lines of their own, and the one
 * every served request bumps is split by thread (slots of 64 bytes, a
 * thread's slot picked round robin when it first counts). */
#define COUNT_SLOTS 64
typedef struct {
  _Alignas(64) _Atomic uint64_t n;
} count_slot;
static count_slot n_huge[COUNT_SLOTS]; /* requests served by hugepool, summed */
static atomic_uint next_count_slot;
static __thread unsigned my_count_slot __attribute__((tls_model("initial-exec"))); /* slot + 1; 0: none yet */

static struct {
  _Alignas(64) _Atomic uint64_t n_fallback; /* large requests given to glibc because the pool was short */
  _Atomic uint64_t bytes_fallback;          /* ... and their bytes */
  _Atomic uint64_t n_strict_failures;       /* large requests refused (strict) */
  _Atomic uint64_t n_small_fallback;        /* small requests given to glibc: no chunk for the small heap */
  atomic_bool small_shortage_reported;
} ctr; /* aligned by its first member: a line of its own */

static void count_huge(void) {
  unsigned s = my_count_slot;
  if (__builtin_expect(s == 0, 0)) s = my_count_slot = atomic_fetch_add(&next_count_slot, 1) % COUNT_SLOTS + 1;
  atomic_fetch_add_explicit(&n_huge[s - 1].n, 1, memory_order_relaxed);
}

static uint64_t huge_count(void) {
  uint64_t sum = 0;
  for (size_t i = 0; i < COUNT_SLOTS; i++) sum += atomic_load_explicit(&n_huge[i].n, memory_order_relaxed);
  return sum;
}

/* What the kernel says: hugetlb memory this process has touched, in KiB
 * (Private_Hugetlb in /proc/self/smaps_rollup; cached buffers included). */
static uint64_t kernel_hugetlb_kib(void) {
  char buf[2048];
  if (os_read_file("/proc/self/smaps_rollup", buf, sizeof(buf)) <= 0) return 0;
  const char *line = strstr(buf, "Private_Hugetlb:");
  return line ? strtoull(line + strlen("Private_Hugetlb:"), NULL, 10) : 0;
}

/* Appends rows to out[*n, max). */
static void add_rows(hp_extra_stat *out, size_t max, size_t *n, const hp_extra_stat *rows, size_t count) {
  for (size_t i = 0; i < count && *n < max; i++) out[(*n)++] = rows[i];
}

static size_t extra_stats(hp_extra_stat *out, size_t max) {
  uint64_t held_n, held_bytes;
  hpl_hold_counts(&held_n, &held_bytes);
  hp_extra_stat preload_rows[] = {
      {"preload_threshold", "preload: threshold", atomic_load(&hpl_threshold), HP_EXTRA_BYTES},
      {"kernel_private_hugetlb_bytes", "kernel: Private_Hugetlb", kernel_hugetlb_kib() << 10, HP_EXTRA_BYTES},
      {"preload_huge_allocs", "preload: requests to hugepool", huge_count(), HP_EXTRA_ACTIVITY},
      {"preload_fallbacks", "preload: fallbacks to glibc", atomic_load(&ctr.n_fallback), HP_EXTRA_ACTIVITY},
      {"preload_fallback_bytes", "preload: bytes fallen back", atomic_load(&ctr.bytes_fallback), HP_EXTRA_BYTES},
      {"preload_held_back", "preload: beyond the pool share, to glibc", held_n, HP_EXTRA_ACTIVITY},
      {"preload_held_back_bytes", "preload: bytes beyond the pool share", held_bytes, HP_EXTRA_BYTES},
      {"preload_strict_failures", "preload: large requests refused", atomic_load(&ctr.n_strict_failures),
       HP_EXTRA_ACTIVITY},
      {"preload_pages_split", "preload: 2 MB pages split to 4 KB", split_count(), 0},
      {"preload_deepbind_stripped", "preload: dlopen RTLD_DEEPBIND taken off", atomic_load(&hpl_deepbind_stripped), 0},
  };
  size_t n = 0;
  add_rows(out, max, &n, preload_rows, sizeof(preload_rows) / sizeof(preload_rows[0]));
  if (!atomic_load(&hpl_small_heap_on)) return n;
  hp_small_heap_counters sh = {0};
  hpl_sh.stats(&sh);
  hp_extra_stat small_heap_rows[] = {
      {"small_heap_chunks", "small heap: 2 MB chunks", sh.chunks, HP_EXTRA_ACTIVITY},
      {"small_heap_chunks_peak", "small heap: 2 MB chunks (peak)", sh.chunks_peak, 0},
      {"small_heap_chunks_returned", "small heap: chunks given back to pool", sh.chunks_returned, 0},
      {"small_heap_bytes", "small heap: bytes in jemalloc's extents", sh.bytes_in_extents, HP_EXTRA_BYTES},
      {"small_heap_fallbacks", "small heap: fallbacks to glibc", atomic_load(&ctr.n_small_fallback), HP_EXTRA_ACTIVITY},
  };
  add_rows(out, max, &n, small_heap_rows, sizeof(small_heap_rows) / sizeof(small_heap_rows[0]));
  uint64_t py_served = 0, py_fallback = 0;
  if (!hpl_python_counts(&py_served, &py_fallback)) return n;
  hp_extra_stat python_rows[] = {
      {"python_arenas", "CPython: arenas on 2 MB pages", py_served, HP_EXTRA_ACTIVITY},
      {"python_arena_fallbacks", "CPython: arenas left to its mmap", py_fallback, HP_EXTRA_ACTIVITY},
  };
  add_rows(out, max, &n, python_rows, sizeof(python_rows) / sizeof(python_rows[0]));
  return n;
}

/* What the preload tells the core (lib/embed.h), by policy: strict names
 * the preload's alternative in the core's shortage line; fallback (the
 * default) prints its own line, serves refusals from glibc and is named in
 * the statistics. */
static const hp_embedder embed_strict = {
    .shortage_advice =
        "let glibc serve refused requests with hugepool-run --policy fallback (the preload's "
        "default), or fall back to THP or 4 KB pages with HUGEPOOL_POLICY=thp|small",
    .extra_stats = extra_stats,
};
static const hp_embedder embed_fallback = {
    .quiet_shortage = true,  /* we print one line of our own */
    .serves_refusals = true, /* glibc serves what the pool refuses */
    .policy_label = "fallback",
    .extra_stats = extra_stats,
};
static const hp_embedder embed_other = {.extra_stats = extra_stats};

/* Every request to the heap behind us, no threshold ever reached. */
static void go_passive(hpl_passive_why why, const char *who) {
  atomic_store(&hpl_threshold, SIZE_MAX);
  atomic_store(&state, ST_PASSIVE);
  in_init = 0;
  hp_no_start_at_load();
  hpl_say_passive(why, who);
}

static void preload_init(void) {
  int expected = ST_NEW;
  if (!atomic_compare_exchange_strong(&state, &expected, ST_INITIALISING)) return;
  if (!hp_libc_complete()) { /* glibc's heap, straight: dlsym may be missing */
    atomic_store(&hpl_glibc_direct, hpl_early_close());
    go_passive(HPL_PASSIVE_OLD_GLIBC, NULL);
    return;
  }
  in_init = 1;
  char who[256] = "";
  hpl_heap_kind heap = hpl_find_heap(who, sizeof(who));
  if (heap == HPL_HEAP_SANITIZER) {
    go_passive(HPL_PASSIVE_SANITIZER, who);
    return;
  }
  options_use_preload_defaults();
  (void)hugepool_get_policy(); /* runs the core's init: options, atfork */
  size_t threshold = option_get(HP_OPT_THRESHOLD) ? (size_t)option_get(HP_OPT_THRESHOLD) : 1;
  bool share = heap == HPL_HEAP_OTHER && hpl_share_other_heap(who) && hpl_next_whole; /* a part missing: left */
  if (heap == HPL_HEAP_OTHER) hpl_say_other_heap(who, share ? threshold : SIZE_MAX, option_get(HP_OPT_SMALL_HEAP));
  if (heap == HPL_HEAP_OTHER && !share) {
    go_passive(HPL_PASSIVE_OTHER_HEAP, who);
    return;
  }
  long long policy = option_get(HP_OPT_POLICY); /* the core runs fallback as strict */
  policy_strict = policy == HUGEPOOL_POLICY_STRICT;
  hpl_hold_init(policy_strict);
  (void)hp_embed(policy_strict ? &embed_strict : policy == HP_POLICY_FALLBACK ? &embed_fallback : &embed_other);
  small_heap_wanted = option_get(HP_OPT_SMALL_HEAP) && heap == HPL_HEAP_GLIBC;
  atomic_store(&hpl_glibc_direct, heap == HPL_HEAP_GLIBC && hpl_early_close() && !small_heap_wanted);
  atomic_store(&hpl_threshold, threshold);
  atomic_store(&state, ST_READY);
  in_init = 0;
}

/* High priority: before the program's constructors allocate much. */
__attribute__((constructor(101))) static void preload_constructor(void) {
  preload_init();
  if (small_heap_wanted) hpl_small_heap_start(); /* here, never from a malloc: preload.h says why */
}

static inline bool ready(void) {
  int now = atomic_load_explicit(&state, memory_order_acquire);
  if (HPL_LIKELY(now == ST_READY)) return true;
  if (now == ST_PASSIVE || in_init || !environ) return false; /* !environ: before libc's start (a preinit) */
  preload_init();
  return atomic_load_explicit(&state, memory_order_acquire) == ST_READY;
}

/* One line per process: the first fallback.  Later large requests try the
 * pool again first (pages may have been freed or reserved meanwhile); each
 * one that falls back too is counted, not reported. */
static void report_fallback(size_t size) {
  if (hp_trace_on())
    hp_trace(HP_TRACE_FALLBACK, "%zu bytes to glibc malloc: the pool is short (%ld free 2 MB pages)", size,
             hugepool_pool_free_pages(-1));
  if (atomic_exchange(&shortage_reported, true) || option_get(HP_OPT_WARN) == 0) return; /* -q, HUGEPOOL_WARN=0 */
  size_t page = hugepool_get_page_size();
  char pool[400], asked[32], line[1024];
  hp_describe_shortage(pool, sizeof(pool), size, page, -1);
  hp_asked_size(asked, sizeof(asked), size); /* what the program asked for */
  long pid = (long)getpid();
  /* First line: what was asked and the fix; then what happens meanwhile. */
  int n = snprintf(line, sizeof(line),
                   "hugepool-preload[%ld]: cannot map %s on %s\n"
                   "hugepool-preload[%ld]:   glibc malloc serves it; later requests try the pool again first "
                   "(each fallback is counted in the statistics; said once); --policy strict fails instead\n%s",
                   pid, asked, pool, pid,
                   hp_trace_on() ? "hugepool-preload: a job: 'hugepool doctor --need SIZE --ranks N' (MPI: UCX "
                                   "takes 3 pages per rank too)\n"
                                 : "");
  if (n > 0) os_write_stderr(line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

/* Every large request glibc serves because the pool was short: reported
 * once, counted always. */
static void count_fallback(size_t size) {
  report_fallback(size);
  atomic_fetch_add_explicit(&ctr.n_fallback, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&ctr.bytes_fallback, size, memory_order_relaxed);
}

/* Under --policy strict a request the pool cannot cover is ENOMEM (counted). */
static bool refused_strict(void) {
  if (!policy_strict) return false;
  atomic_fetch_add_explicit(&ctr.n_strict_failures, 1, memory_order_relaxed);
  errno = ENOMEM;
  return true;
}

/* A request at or above the threshold; `alignment` (<= 2 MB, or 0) matters
 * only for the fallback: hugepool buffers are 2 MB aligned. */
static void *large_alloc(size_t size, bool zero, size_t alignment) {
  if (!hpl_beyond_share(size, true)) { /* HUGEPOOL_HOLD (hold.c): else glibc's, no fallback */
    void *p = zero ? hugepool_calloc(1, size) : hugepool_alloc(size);
    if (HPL_LIKELY(p != NULL)) {
      count_huge();
      return p;
    }
    if (refused_strict()) return NULL;
    count_fallback(size);
  }
  return hpl_next_alloc(size, zero, alignment);
}

/* The small heap's shortage, said once per process (preload.h). */
void hpl_say_small_shortage(void) {
  if (atomic_load_explicit(&ctr.small_shortage_reported, memory_order_relaxed) ||
      atomic_exchange(&ctr.small_shortage_reported, true) || option_get(HP_OPT_WARN) == 0)
    return;
  char pool[400], line[700];
  hp_describe_shortage(pool, sizeof(pool), HP_2M, HP_2M, -1);
  int n = snprintf(line, sizeof(line),
                   "hugepool-preload[%ld]: cannot map a 2 MiB chunk for the small heap on %s. Small requests fall "
                   "back to glibc malloc until the pool has pages again (each one is counted in the statistics, this "
                   "line is printed once)\n",
                   (long)getpid(), pool);
  if (n > 0) os_write_stderr(line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

/* A small request the heap could not serve (no chunk: the pool is short):
 * glibc serves it, every one counted.  The heap looks at the pool again at
 * most once a millisecond. */
static void count_small_fallback(void) {
  atomic_fetch_add_explicit(&ctr.n_small_fallback, 1, memory_order_relaxed);
  hpl_say_small_shortage();
}

static bool small_heap_takes(size_t size) {
  return atomic_load_explicit(&hpl_small_heap_on, memory_order_acquire) && size <= HPL_SMALL_MAX &&
         hugepool_small_heap_thread.in_hook == 0; /* not from inside the heap's hooks */
}

/* Not ready: passive (the heap behind us), or starting (glibc's, noted). */
static void *unready_alloc(size_t size, bool zero, size_t alignment) {
  if (atomic_load_explicit(&state, memory_order_acquire) == ST_PASSIVE) return hpl_next_alloc(size, zero, alignment);
  return hpl_early_alloc(size, zero, alignment);
}

static void *route(size_t size, bool zero) {
  if (!ready()) return unready_alloc(size, zero, 0);
  if (size >= atomic_load_explicit(&hpl_threshold, memory_order_relaxed)) return large_alloc(size, zero, 0);
  if (small_heap_takes(size)) {
    void *p = hpl_sh.malloc(size, zero);
    if (HPL_LIKELY(p != NULL)) return p;
    count_small_fallback();
  }
  return hpl_next_alloc(size, zero, 0);
}

void *hpl_malloc_slow(size_t size) { return route(size, false); }

void *hpl_calloc(size_t count, size_t size) { return route(count * size, true); /* overflow checked by caller */ }

/* Where a pointer came from.  No small-heap object is 2 MB aligned (each
 * chunk's first page is its map). */
typedef enum { FROM_GLIBC, FROM_HUGEPOOL, FROM_SMALL_HEAP } origin;

/* Ready or not: before, and when passive, nothing is hugepool's. */
bool hpl_serving(void) { return atomic_load_explicit(&state, memory_order_acquire) == ST_READY; }

static origin origin_of(const void *ptr) {
  if (HPL_UNLIKELY(!hpl_serving())) return FROM_GLIBC; /* glibc's or the heap's behind us */
  if (((uintptr_t)ptr & (HPL_2M - 1)) == 0) {
    return hugepool_owns(ptr) ? FROM_HUGEPOOL : FROM_GLIBC;
  }
  if (atomic_load_explicit(&hpl_small_heap_on, memory_order_acquire) && hpl_sh.owns(ptr)) return FROM_SMALL_HEAP;
  return FROM_GLIBC;
}

void hpl_free_slow(void *ptr) {
  if (!ptr) return;
  /* hugepool's, freed in the same lookup (keeps errno), or glibc's; passive: origin_of() says glibc's */
  if (((uintptr_t)ptr & (HPL_2M - 1)) == 0 && HPL_LIKELY(hpl_serving())) {
    if (!hp_free_if_live(ptr)) hpl_other_free(ptr);
    return;
  }
  if (origin_of(ptr) == FROM_SMALL_HEAP)
    hpl_sh.free(ptr);
  else
    hpl_other_free(ptr);
}

size_t hpl_usable_size(void *ptr) {
  if (!ptr) return 0;
  switch (origin_of(ptr)) {
    case FROM_HUGEPOOL: return hugepool_usable_size(ptr);
    case FROM_SMALL_HEAP: return hpl_sh.usable_size(ptr);
    case FROM_GLIBC: break;
  }
  return hpl_other_usable_size(ptr);
}

/* A hugepool buffer that stays at or above the threshold: the core moves
 * page-table entries (growth) or gives pages back (shrink), no byte copied.
 * If the pool cannot supply the added pages, the default policy moves the
 * buffer to glibc, like an allocation the pool cannot cover. */
static void *realloc_huge(void *ptr, size_t size) {
  void *p = hugepool_realloc(ptr, size);
  if (HPL_LIKELY(p != NULL) || errno != ENOMEM) return p;
  if (refused_strict()) return NULL; /* the old block stays valid */
  size_t old = hugepool_usable_size(ptr);
  void *fresh = hpl_next.malloc(size);
  if (!fresh) return NULL;
  count_fallback(size);
  memcpy(fresh, ptr, old < size ? old : size);
  hugepool_free(ptr);
  return fresh;
}

/* A glibc block growing past the threshold moves onto hugetlb pages (one
 * copy in its life); beyond the pool share or if the pool is short it
 * stays with glibc, whose
 * realloc grows large blocks with mremap: no copy there either. */
static void *realloc_glibc_to_huge(void *ptr, size_t size) {
  int saved = errno;
  if (hpl_beyond_share(size, false)) return hpl_other_realloc(ptr, size); /* not counted: each step would */
  void *fresh = hugepool_alloc(size);
  if (fresh) {
    size_t old = hpl_other_usable_size(ptr);
    memcpy(fresh, ptr, old < size ? old : size);
    hpl_other_free(ptr);
    count_huge();
    errno = saved;
    return fresh;
  }
  if (refused_strict()) return NULL;
  count_fallback(size);
  errno = saved;
  return hpl_other_realloc(ptr, size);
}

void *hpl_realloc(void *ptr, size_t size) {
  if (!ptr) return route(size, false);
  if (size == 0) { /* glibc frees and returns NULL */
    hpl_free_slow(ptr);
    return NULL;
  }
  bool want_huge = ready() && size >= atomic_load_explicit(&hpl_threshold, memory_order_relaxed);
  /* A hugepool buffer grown (or shrunk) within its pages, the step a string
   * appended to a few bytes at a time takes a million times: one registry
   * visit, where finding its origin and then resizing it made three. */
  if (want_huge && ((uintptr_t)ptr & (HPL_2M - 1)) == 0 && hp_realloc_same_pages(ptr, size)) return ptr;
  origin from = origin_of(ptr);
  size_t old;
  switch (from) {
    case FROM_GLIBC:
      if (!want_huge) return hpl_other_realloc(ptr, size); /* its heap keeps its own */
      return realloc_glibc_to_huge(ptr, size);
    case FROM_HUGEPOOL:
      if (want_huge) return realloc_huge(ptr, size);
      old = hugepool_usable_size(ptr); /* below the threshold: off hugetlb pages */
      break;
    case FROM_SMALL_HEAP:
    default:
      if (!want_huge && size <= HPL_SMALL_MAX) { /* jemalloc resizes in place where it can */
        void *p = hpl_sh.realloc(ptr, size);
        if (p) return p;
      }
      old = hpl_sh.usable_size(ptr);
      break;
  }
  /* Across the threshold (or off the small heap): a new block and one copy
   * of at most the smaller side. */
  void *fresh = route(size, false);
  if (!fresh) return NULL; /* the old block stays valid, errno = ENOMEM */
  memcpy(fresh, ptr, old < size ? old : size);
  hpl_free_slow(ptr);
  return fresh;
}

void *hpl_memalign(size_t alignment, size_t size) {
  if (!ready()) return unready_alloc(size, false, alignment);
  if (size >= atomic_load_explicit(&hpl_threshold, memory_order_relaxed) && alignment <= HPL_2M) {
    return large_alloc(size, false, alignment); /* every hugepool buffer is 2 MB aligned */
  }
  if (alignment <= 16) return route(size, false);
  if (alignment <= HPL_SMALL_MAX_ALIGN && small_heap_takes(size)) {
    void *p = hpl_sh.memalign(alignment, size);
    if (HPL_LIKELY(p != NULL)) return p;
    count_small_fallback();
  }
  return hpl_next.memalign(alignment, size); /* free() tells the sources apart */
}

bool hpl_passive(void) {
  (void)ready();
  return atomic_load_explicit(&state, memory_order_acquire) == ST_PASSIVE;
}

/* The MPI entry points' option reader (lib/option-reader.h): the values
 * read at load, with the option table's rules. */
int hugepool_preload_option(const char *name, long long *value) {
  if (hpl_passive()) return -1; /* no option was read: the MPI entry points stay out too */
  hp_option_id id = name ? option_find(name, strlen(name)) : HP_OPT_COUNT;
  if (id == HP_OPT_COUNT || !value) return -1;
  *value = option_get(id); /* read at init, which hpl_passive() made sure of */
  return 0;
}
