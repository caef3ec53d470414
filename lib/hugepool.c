/* The public C API: allocation policy, the lock, fork safety, diagnostics. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

static pthread_mutex_t hp_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t hp_once = PTHREAD_ONCE_INIT;
static atomic_bool hp_ready;
static _Atomic int hp_policy = HUGEPOOL_POLICY_STRICT;
static _Atomic size_t hp_page_size = HP_2M;
static atomic_uint hp_shortage_reports;
/* Bytes chosen for release but not yet unmapped (lazy release runs outside
 * the lock): an ENOMEM retry waits for them to reach the pool. */
static atomic_size_t hp_releasing;
static atomic_bool hp_shortage_quiet;

/* Releases happen in batches outside the lock; this is one batch. */
#define HP_BATCH 64

/* ---- diagnostics -------------------------------------------------------- */

void hp_warn(const char *fmt, ...) {
  if (option_get(HP_OPT_WARN) == 0) return; /* HUGEPOOL_WARN is parsed before any other option */
  char line[512];
  int n = snprintf(line, sizeof(line), "hugepool[%ld]: ", (long)getpid());
  if (n < 0) return;
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
  va_end(ap);
  if (m < 0) return;
  size_t len = strlen(line);
  line[len++] = '\n';
  os_write_stderr(line, len);
}

/* ---- initialisation and fork -------------------------------------------- */

static void release_blocks(hp_block *blocks, size_t n);

static void atfork_prepare(void) {
  pthread_mutex_lock(&hp_lock);
  fork_prepare();
}

static void atfork_parent(void) {
  pthread_mutex_unlock(&hp_lock);
  fork_parent_wait(); /* until the child has its own copies of the live buffers */
}

static void atfork_child(void) {
  /* The child's cached mappings are private copy-on-write views of the
   * parent's: pages the child has no reservation for.  Drop them so the
   * child maps (and reserves) its own buffers instead of reusing them. */
  hp_block batch[HP_BATCH];
  size_t n;
  while ((n = cache_drain(batch, HP_BATCH)) > 0) {
    for (size_t i = 0; i < n; i++) {
      os_unmap(batch[i].addr, batch[i].size);
      stats_unmapped(batch[i].size);
    }
  }
  /* Releases the parent's other threads had in flight do not happen here:
   * those mappings stay in the child, untracked, until it exits or execs. */
  atomic_store(&hp_releasing, 0);
  fork_child_privatize();
  pthread_mutex_unlock(&hp_lock);
}

static void init_once(void) {
  options_init();
  os_nodes_init();
  long long policy = option_get(HP_OPT_POLICY);
  /* fallback (the preload's): the core refuses, the preload serves from glibc */
  atomic_store(&hp_policy, policy == HP_POLICY_FALLBACK ? HUGEPOOL_POLICY_STRICT : (int)policy);
  size_t page = (size_t)option_get(HP_OPT_PAGE_SIZE);
  if (!os_page_size_supported(page)) {
    hp_warn("HUGEPOOL_PAGE_SIZE=%zuM: this kernel has no such huge page size; using 2M", page >> 20);
    page = HP_2M;
  }
  atomic_store(&hp_page_size, page);
  cache_configure((size_t)option_get(HP_OPT_CACHE_SLOTS), (size_t)option_get(HP_OPT_CACHE_BYTES));
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
  atomic_store_explicit(&hp_ready, true, memory_order_release);
}

static inline void ensure_init(void) {
  if (__builtin_expect(!atomic_load_explicit(&hp_ready, memory_order_acquire), 0)) pthread_once(&hp_once, init_once);
}

__attribute__((constructor)) static void hp_constructor(void) { ensure_init(); }

__attribute__((destructor)) static void hp_destructor(void) {
  if (atomic_load(&hp_ready)) stats_print_at_exit();
}

/* ---- helpers ------------------------------------------------------------ */

/* Counts blocks as being released; the caller holds the lock. */
static void mark_releasing(const hp_block *blocks, size_t n) {
  size_t bytes = 0;
  for (size_t i = 0; i < n; i++) bytes += blocks[i].size;
  atomic_fetch_add(&hp_releasing, bytes);
}

/* Unmaps blocks that mark_releasing() counted, outside the lock. */
static void release_blocks(hp_block *blocks, size_t n) {
  if (n == 0) return;
  size_t bytes = 0;
  for (size_t i = 0; i < n; i++) {
    os_unmap(blocks[i].addr, blocks[i].size);
    bytes += blocks[i].size;
  }
  atomic_fetch_sub(&hp_releasing, bytes);
  pthread_mutex_lock(&hp_lock);
  for (size_t i = 0; i < n; i++) stats_unmapped(blocks[i].size);
  pthread_mutex_unlock(&hp_lock);
}

static size_t round_up(size_t bytes, size_t unit) {
  size_t r = (bytes + unit - 1) & ~(unit - 1);
  return r < bytes ? 0 : r;
}

void hp_quiet_shortage(bool quiet) { atomic_store(&hp_shortage_quiet, quiet); }

static void report_shortage(size_t size, size_t page, int node) {
  if (atomic_load_explicit(&hp_shortage_quiet, memory_order_relaxed)) return;
  unsigned nth = atomic_fetch_add(&hp_shortage_reports, 1);
  if (nth > 8) return;
  if (nth == 8) {
    hp_warn("further pool-shortage messages suppressed (see HUGEPOOL_STATS for the failure count)");
    return;
  }
  long avail = os_pool_available(page, node);
  long total = os_pool_total(page, node);
  char where[32] = "";
  if (node >= 0) (void)snprintf(where, sizeof(where), " on node %d", node); /* cannot truncate */
  const char *knob = page == HP_1G ? "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages"
                                   : "/proc/sys/vm/nr_hugepages";
  hp_warn("cannot map %zu MiB on %s hugetlb pages%s: need %zu pages, %ld free of %ld in the pool; reserve more "
          "with 'echo N > %s' (as root) or 'hugepool-reserve N%s', or allow a fallback with "
          "HUGEPOOL_POLICY=thp|small",
          size >> 20, page == HP_1G ? "1 GB" : "2 MB", where, size / page, avail, total, knob,
          page == HP_1G ? " --size 1G" : "");
}

/* Maps fresh hugetlb memory; with a node, binds and populates it there so a
 * shortage on that node is an error now, not a SIGBUS later. */
static void *map_huge(size_t size, size_t page, int node) {
  void *p = os_map_huge(size, page);
  if (!p || node == HUGEPOOL_ANY_NODE) return p;
  if (os_bind_node(p, size, node) != 0 || os_populate(p, size) != 0) {
    int err = errno;
    os_unmap(p, size);
    errno = (err == EFAULT || err == ENOMEM) ? ENOMEM : err;
    return NULL;
  }
  return p;
}

static void *map_fallback(size_t size, int node, bool thp) {
  void *p = os_map_anon(size, HP_2M, thp);
  if (p && node != HUGEPOOL_ANY_NODE && os_bind_node(p, size, node) != 0) {
    int err = errno;
    os_unmap(p, size);
    errno = err;
    return NULL;
  }
  return p;
}

/* Registers a block as live and counts it; the caller holds the lock. */
static int make_live(hp_block *b, size_t requested, bool hit) {
  b->requested = requested;
  if (registry_insert(b) != 0) return -1;
  hp_stats.allocs++;
  if (hit) hp_stats.cache_hits++;
  else hp_stats.cache_misses++;
  hp_stats.live_buffers++;
  hp_stats.bytes_live += b->size;
  hp_stats.bytes_requested += requested;
  hp_stats.bytes_slack += b->size - requested;
  if (b->kind == HUGEPOOL_KIND_THP) hp_stats.fallbacks_thp++;
  if (b->kind == HUGEPOOL_KIND_SMALL) hp_stats.fallbacks_small++;
  return 0;
}

/* Takes a cached block of this shape; NULL on a miss. */
static void *take_cached(size_t requested, size_t size, int node, uint32_t kind) {
  hp_block b;
  pthread_mutex_lock(&hp_lock);
  if (!cache_take(size, node, kind, &b)) {
    pthread_mutex_unlock(&hp_lock);
    return NULL;
  }
  if (make_live(&b, requested, true) == 0) {
    pthread_mutex_unlock(&hp_lock);
    return b.addr;
  }
  mark_releasing(&b, 1);
  pthread_mutex_unlock(&hp_lock);
  release_blocks(&b, 1);
  errno = ENOMEM;
  return NULL;
}

/* Evicts round-robin victims of `kind` until `need` bytes are on their way
 * back to the pool (or the cache has none left); returns the bytes. */
static size_t release_for(uint32_t kind, size_t need) {
  size_t freed = 0;
  hp_block batch[HP_BATCH];
  while (freed < need) {
    size_t n = 0;
    pthread_mutex_lock(&hp_lock);
    while (n < HP_BATCH && freed < need && cache_evict_kind(kind, &batch[n])) freed += batch[n++].size;
    hp_stats.cache_evictions += n;
    mark_releasing(batch, n);
    pthread_mutex_unlock(&hp_lock);
    if (n == 0) break;
    release_blocks(batch, n);
  }
  return freed;
}

/* Maps a new hugetlb block.  On ENOMEM, if the pages the cache holds (and
 * releases in flight) could make up the shortfall, evicts just enough of
 * them, waits for other threads' lazy releases, and tries once more. */
static void *map_huge_reclaiming(size_t size, size_t page, int node, uint32_t kind) {
  void *p = map_huge(size, page, node);
  if (p || errno != ENOMEM) return p;
  pthread_mutex_lock(&hp_lock);
  size_t cached = cache_bytes_of_kind(kind);
  pthread_mutex_unlock(&hp_lock);
  size_t in_flight = atomic_load(&hp_releasing);
  long avail = os_pool_available(page, node);
  size_t have = avail > 0 ? (size_t)avail * page : 0;
  if (cached + in_flight + have < size) {
    errno = ENOMEM; /* hopeless: keep the cache */
    return NULL;
  }
  size_t shortfall = size > have + in_flight ? size - have - in_flight : 0;
  release_for(kind, shortfall);
  while (atomic_load(&hp_releasing) > 0) sched_yield(); /* other threads' lazy releases */
  p = map_huge(size, page, node);
  if (!p) errno = ENOMEM;
  return p;
}

/* Maps a new block of `kind` and registers it. */
static void *map_new(size_t requested, size_t size, int node, uint32_t kind, bool *fresh) {
  void *p;
  if (kind == HUGEPOOL_KIND_HUGE_2M || kind == HUGEPOOL_KIND_HUGE_1G) {
    p = map_huge_reclaiming(size, kind == HUGEPOOL_KIND_HUGE_1G ? HP_1G : HP_2M, node, kind);
  } else {
    p = map_fallback(size, node, kind == HUGEPOOL_KIND_THP);
  }
  if (!p) return NULL;
  hp_block b = {.addr = p, .size = size, .node = node, .kind = kind};
  pthread_mutex_lock(&hp_lock);
  stats_mapped(size);
  int rc = make_live(&b, requested, false);
  if (rc != 0) mark_releasing(&b, 1);
  pthread_mutex_unlock(&hp_lock);
  if (rc != 0) {
    release_blocks(&b, 1);
    errno = ENOMEM;
    return NULL;
  }
  *fresh = true;
  return p;
}

static void count_failure(void) {
  pthread_mutex_lock(&hp_lock);
  hp_stats.failures++;
  pthread_mutex_unlock(&hp_lock);
  errno = ENOMEM;
}

static void *allocate(size_t bytes, int node, bool *fresh) {
  ensure_init();
  *fresh = false;
  if (bytes == 0 || node < HUGEPOOL_ANY_NODE) {
    errno = EINVAL;
    return NULL;
  }
  if (node != HUGEPOOL_ANY_NODE && !os_node_has_memory(node)) {
    hp_warn("NUMA node %d does not exist or has no memory (see /sys/devices/system/node/has_memory)", node);
    errno = EINVAL;
    return NULL;
  }
  size_t page = atomic_load_explicit(&hp_page_size, memory_order_relaxed);
  size_t size = round_up(bytes, page);
  if (size == 0) {
    errno = ENOMEM;
    return NULL;
  }
  uint32_t kind = page == HP_1G ? HUGEPOOL_KIND_HUGE_1G : HUGEPOOL_KIND_HUGE_2M;
  void *p = take_cached(bytes, size, node, kind);
  if (p) return p;
  p = map_new(bytes, size, node, kind, fresh);
  if (p || errno != ENOMEM) return p;

  int policy = atomic_load_explicit(&hp_policy, memory_order_relaxed);
  if (policy == HUGEPOOL_POLICY_STRICT) {
    report_shortage(size, page, node);
    count_failure();
    return NULL;
  }
  uint32_t fallback = policy == HUGEPOOL_POLICY_THP ? HUGEPOOL_KIND_THP : HUGEPOOL_KIND_SMALL;
  size_t fallback_size = round_up(bytes, HP_2M);
  p = take_cached(bytes, fallback_size, node, fallback);
  if (!p) p = map_new(bytes, fallback_size, node, fallback, fresh);
  if (!p) count_failure();
  return p;
}

/* ---- the public API ----------------------------------------------------- */

void *hugepool_alloc(size_t bytes) {
  bool fresh;
  return allocate(bytes, HUGEPOOL_ANY_NODE, &fresh);
}

void *hugepool_alloc_on_node(size_t bytes, int node) {
  bool fresh;
  return allocate(bytes, node, &fresh);
}

void *hugepool_calloc(size_t count, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(count, size, &bytes)) {
    errno = ENOMEM;
    return NULL;
  }
  bool fresh = false;
  void *p = allocate(bytes, HUGEPOOL_ANY_NODE, &fresh);
  if (p && !fresh) memset(p, 0, bytes);
  return p;
}

void hugepool_free(void *ptr) {
  if (!ptr) return;
  int saved = errno;
  ensure_init();
  hp_block b, victims[HP_BATCH];
  size_t n_victims = 0;
  pthread_mutex_lock(&hp_lock);
  if (!registry_remove(ptr, &b)) {
    pthread_mutex_unlock(&hp_lock);
    hp_warn("hugepool_free(%p): not a live hugepool buffer; ignored", ptr);
    errno = saved;
    return;
  }
  hp_stats.frees++;
  hp_stats.live_buffers--;
  hp_stats.bytes_live -= b.size;
  hp_stats.bytes_requested -= b.requested;
  hp_stats.bytes_slack -= b.size - b.requested;
  bool cached = cache_put(&b, victims, HP_BATCH, &n_victims);
  hp_stats.cache_evictions += cached ? n_victims : n_victims - 1;
  mark_releasing(victims, n_victims);
  pthread_mutex_unlock(&hp_lock);
  release_blocks(victims, n_victims); /* lazy release: outside the lock */
  errno = saved;
}

static const hp_block *find_live(const void *ptr, hp_block *copy) {
  pthread_mutex_lock(&hp_lock);
  const hp_block *b = registry_find(ptr);
  if (b) *copy = *b;
  pthread_mutex_unlock(&hp_lock);
  return b ? copy : NULL;
}

size_t hugepool_usable_size(const void *ptr) {
  hp_block b;
  return find_live(ptr, &b) ? b.size : 0;
}

int hugepool_owns(const void *ptr) {
  hp_block b;
  return find_live(ptr, &b) != NULL;
}

hugepool_kind hugepool_kind_of(const void *ptr) {
  hp_block b;
  return find_live(ptr, &b) ? (hugepool_kind)b.kind : HUGEPOOL_KIND_NONE;
}

size_t hugepool_trim(void) {
  ensure_init();
  size_t total = 0;
  hp_block batch[HP_BATCH];
  for (;;) {
    pthread_mutex_lock(&hp_lock);
    size_t n = cache_drain(batch, HP_BATCH);
    hp_stats.trims += n;
    mark_releasing(batch, n);
    pthread_mutex_unlock(&hp_lock);
    if (n == 0) return total;
    for (size_t i = 0; i < n; i++) total += batch[i].size;
    release_blocks(batch, n);
  }
}

int hugepool_set_policy(hugepool_policy policy) {
  ensure_init();
  if (policy != HUGEPOOL_POLICY_STRICT && policy != HUGEPOOL_POLICY_THP && policy != HUGEPOOL_POLICY_SMALL) {
    errno = EINVAL;
    return -1;
  }
  atomic_store(&hp_policy, (int)policy);
  return 0;
}

hugepool_policy hugepool_get_policy(void) {
  ensure_init();
  return (hugepool_policy)atomic_load(&hp_policy);
}

int hugepool_set_page_size(size_t page_bytes) {
  ensure_init();
  if (page_bytes != HP_2M && page_bytes != HP_1G) {
    errno = EINVAL;
    return -1;
  }
  if (!os_page_size_supported(page_bytes)) {
    errno = ENOTSUP;
    return -1;
  }
  atomic_store(&hp_page_size, page_bytes);
  return 0;
}

size_t hugepool_get_page_size(void) {
  ensure_init();
  return atomic_load(&hp_page_size);
}

int hugepool_set_cache_limits(size_t max_slots, size_t max_bytes) {
  ensure_init();
  hp_block batch[HP_BATCH];
  pthread_mutex_lock(&hp_lock);
  int rc = cache_configure(max_slots, max_bytes);
  pthread_mutex_unlock(&hp_lock);
  if (rc != 0) return -1;
  for (;;) {
    pthread_mutex_lock(&hp_lock);
    size_t n = cache_shrink_to_limits(batch, HP_BATCH);
    hp_stats.cache_evictions += n;
    mark_releasing(batch, n);
    pthread_mutex_unlock(&hp_lock);
    if (n == 0) return 0;
    release_blocks(batch, n);
  }
}

void hugepool_get_stats(hugepool_stats *out) {
  if (!out) return;
  ensure_init();
  pthread_mutex_lock(&hp_lock);
  *out = hp_stats;
  out->bytes_cached = cache_bytes();
  out->cached_buffers = cache_count();
  out->cache_max_slots = cache_max_slots();
  out->cache_max_bytes = cache_max_bytes();
  pthread_mutex_unlock(&hp_lock);
}

long hugepool_pool_free_pages(int node) {
  ensure_init();
  return os_pool_available(atomic_load(&hp_page_size), node);
}

const char *hugepool_policy_name(hugepool_policy policy) {
  switch (policy) {
    case HUGEPOOL_POLICY_STRICT: return "strict";
    case HUGEPOOL_POLICY_THP: return "thp";
    case HUGEPOOL_POLICY_SMALL: return "small";
  }
  return "unknown";
}

const char *hugepool_kind_name(hugepool_kind kind) {
  switch (kind) {
    case HUGEPOOL_KIND_NONE: return "none";
    case HUGEPOOL_KIND_HUGE_2M: return "hugetlb-2M";
    case HUGEPOOL_KIND_HUGE_1G: return "hugetlb-1G";
    case HUGEPOOL_KIND_THP: return "thp";
    case HUGEPOOL_KIND_SMALL: return "small";
  }
  return "unknown";
}
