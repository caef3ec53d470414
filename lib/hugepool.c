/* SPDX-License-Identifier: BSD-3-Clause */
/* The public C API around the allocation path (alloc.c): initialisation,
 * fork safety, run-time settings, trim, statistics, diagnostics. */
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

pthread_mutex_t hp_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t hp_once = PTHREAD_ONCE_INIT;
static atomic_bool hp_ready;
static _Atomic int hp_policy = HUGEPOOL_POLICY_STRICT;
static _Atomic size_t hp_page_size = HP_2M;
static atomic_uint hp_shortage_reports;
static atomic_bool hp_shortage_quiet;

/* ---- diagnostics -------------------------------------------------------- */

void hp_warn(const char *fmt, ...) {
  if (option_get(HP_OPT_WARN) == 0) return; /* HUGEPOOL_WARN is parsed before any other option */
  char line[1024];
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

static void atfork_prepare(void) {
  pthread_mutex_lock(&hp_lock);
  tcache_lock_all();
  registry_lock_all();
  fork_prepare();
}

static void atfork_parent(void) {
  registry_unlock_all();
  tcache_unlock_all();
  pthread_mutex_unlock(&hp_lock);
  fork_parent_wait(); /* until the child has its own copies of the live buffers */
}

static void drop_in_child(hp_block *batch, size_t n) {
  for (size_t i = 0; i < n; i++) {
    os_unmap(batch[i].addr, batch[i].size);
    stats_unmapped(batch[i].size);
    if (batch[i].kind == HUGEPOOL_KIND_HUGE_2M || batch[i].kind == HUGEPOOL_KIND_HUGE_1G)
      share_mapped(batch[i].kind == HUGEPOOL_KIND_HUGE_1G ? HP_1G : HP_2M, -(long long)batch[i].size);
  }
}

static void atfork_child(void) {
  /* The child's cached mappings are private copy-on-write views of the
   * parent's: pages the child has no reservation for.  Drop them (from the
   * shared cache and every thread's) so the child maps (and reserves) its
   * own buffers instead of reusing them. */
  hp_block batch[HP_BATCH];
  size_t n;
  tcache_unlock_all();   /* tcache_drain takes each lock itself, and the */
  registry_unlock_all(); /* registry's (this process has one thread now) */
  while ((n = cache_drain(batch, HP_BATCH)) > 0) drop_in_child(batch, n);
  while ((n = tcache_drain(HUGEPOOL_KIND_NONE, batch, HP_BATCH, NULL)) > 0) drop_in_child(batch, n);
  tcache_child_reset(); /* handed-out blocks become plain; other threads' caches lose their owners */
  /* Releases the parent's other threads had in flight do not happen here:
   * those mappings stay in the child, untracked, until it exits or execs. */
  release_forget_in_flight();
  fork_child_privatize();
  pthread_mutex_unlock(&hp_lock);
}

/* An exiting thread's cached blocks move to the shared cache. */
static void thread_exit(hp_tcache *tc) {
  hp_block victims[HP_BATCH];
  size_t n = 0;
  pthread_mutex_lock(&hp_lock);
  tcache_retire(tc, victims, HP_BATCH, &n);
  release_mark(victims, n);
  pthread_mutex_unlock(&hp_lock);
  release_now(victims, n);
}

static void init_once(void) {
  options_init();
  stats_init();
  os_nodes_init();
  share_init();
  tcache_init(thread_exit);
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

void hp_ensure_init(void) {
  if (__builtin_expect(!atomic_load_explicit(&hp_ready, memory_order_acquire), 0)) pthread_once(&hp_once, init_once);
}

__attribute__((constructor)) static void hp_constructor(void) { hp_ensure_init(); }

__attribute__((destructor)) static void hp_destructor(void) {
  if (atomic_load(&hp_ready)) stats_print_at_exit();
}

size_t hp_current_page_size(void) { return atomic_load_explicit(&hp_page_size, memory_order_relaxed); }

void hp_quiet_shortage(bool quiet) { atomic_store(&hp_shortage_quiet, quiet); }

const char *hp_shortage_advice;

/* One line per process and page size: the first shortage, with what to do
 * about it.  Later ones are counted (failures), not reported, so a rank that
 * is refused twice does not print the same advice twice. */
void hp_report_shortage(size_t size, size_t page, int node) {
  if (atomic_load_explicit(&hp_shortage_quiet, memory_order_relaxed)) return;
  unsigned bit = page == HP_1G ? 2U : 1U;
  if (atomic_fetch_or(&hp_shortage_reports, bit) & bit) return;
  char pool[400];
  hp_describe_shortage(pool, sizeof(pool), size, page, node);
  const char *advice = hp_shortage_advice ? hp_shortage_advice : "allow a fallback with HUGEPOOL_POLICY=thp|small";
  hp_warn(
      "cannot map %zu MiB on %s; or %s. A job: 'hugepool doctor --need SIZE --ranks N' (MPI: UCX takes 3 pages "
      "per rank too). Reported once; every refused request is counted in the statistics",
      size >> 20, pool, advice);
}

/* The pool gets what is missing on top of what it holds: the number to
 * write is its total now plus the pages short, for the whole node's pool or
 * the one NUMA node asked for. */
void hp_describe_shortage(char *buf, size_t len, size_t size, size_t page, int node) {
  long avail = os_pool_available(page, node);
  long total = os_pool_total(page, node);
  long need = (long)((size + page - 1) / page);
  char where[32] = "", knob[96];
  if (node >= 0) (void)snprintf(where, sizeof(where), " on node %d", node); /* cannot truncate */
  if (node >= 0)
    (void)snprintf(knob, sizeof(knob), "/sys/devices/system/node/node%d/hugepages/hugepages-%zukB/nr_hugepages", node,
                   page >> 10);
  else
    (void)snprintf(
        knob, sizeof(knob), "%s",
        page == HP_1G ? "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages" : "/proc/sys/vm/nr_hugepages");
  char reserve[48];
  int used = snprintf(reserve, sizeof(reserve), "hugepool-reserve %ld%s", need, page == HP_1G ? " --size 1G" : "");
  if (node >= 0 && used > 0 && (size_t)used < sizeof(reserve))
    (void)snprintf(reserve + used, sizeof(reserve) - (size_t)used, " --node %d", node);
  if (avail >= 0 && total >= 0 && avail >= need) { /* taken meanwhile, or a cgroup's hugetlb limit */
    (void)snprintf(buf, len,
                   "%s hugetlb pages%s: need %ld pages, %ld free of %ld in the pool (enough now: another process "
                   "took them meanwhile, or a cgroup hugetlb limit applies)",
                   page == HP_1G ? "1 GB" : "2 MB", where, need, avail, total);
    return;
  }
  long target = avail >= 0 && total >= 0 ? total + need - avail : need;
  (void)snprintf(buf, len, "%s hugetlb pages%s: need %ld pages, %ld free of %ld; as root: echo %ld > %s (or: %s)",
                 page == HP_1G ? "1 GB" : "2 MB", where, need, avail, total, target, knob,
                 reserve); /* truncation only shortens the message */
}

/* ---- the public API ----------------------------------------------------- */

void *hugepool_alloc(size_t bytes) {
  bool fresh;
  return hp_allocate(bytes, HUGEPOOL_ANY_NODE, &fresh);
}

void *hugepool_alloc_on_node(size_t bytes, int node) {
  bool fresh;
  return hp_allocate(bytes, node, &fresh);
}

void *hugepool_calloc(size_t count, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(count, size, &bytes)) {
    errno = ENOMEM;
    return NULL;
  }
  bool fresh = false;
  void *p = hp_allocate(bytes, HUGEPOOL_ANY_NODE, &fresh);
  if (p && !fresh) memset(p, 0, bytes);
  return p;
}

/* The live block at ptr: this thread's own handed-out blocks first (no
 * shared lock), then the registry, asking a thread cache about its entries. */
static const hp_block *find_live(const void *ptr, hp_block *copy) {
  hp_tcache *tc = tcache_self_if_any();
  if (tc && tcache_find_own(tc, ptr, copy)) return copy;
  for (;;) {
    if (!registry_find(ptr, copy)) return NULL;
    if (!copy->tc) return copy;
    hp_block marked = *copy;
    int rc = tcache_lookup(&marked, copy);
    if (rc >= 0) return rc ? copy : NULL;
  }
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

/* Every cached block, the shared cache's then the threads'. */
static size_t take_any(hp_block *out, size_t max, void *arg) {
  (void)arg;
  size_t n = cache_drain(out, max);
  return n + tcache_drain(HUGEPOOL_KIND_NONE, out + n, max - n, NULL);
}

size_t hugepool_trim(void) {
  hp_ensure_init();
  return release_batches(take_any, NULL, &hp_stats.trims);
}

int hugepool_set_policy(hugepool_policy policy) {
  hp_ensure_init();
  if (policy != HUGEPOOL_POLICY_STRICT && policy != HUGEPOOL_POLICY_THP && policy != HUGEPOOL_POLICY_SMALL) {
    errno = EINVAL;
    return -1;
  }
  atomic_store(&hp_policy, (int)policy);
  return 0;
}

hugepool_policy hugepool_get_policy(void) {
  hp_ensure_init();
  return (hugepool_policy)atomic_load(&hp_policy);
}

int hugepool_set_page_size(size_t page_bytes) {
  hp_ensure_init();
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
  hp_ensure_init();
  return atomic_load(&hp_page_size);
}

static size_t take_over_limits(hp_block *out, size_t max, void *arg) {
  (void)arg;
  return cache_shrink_to_limits(out, max);
}

int hugepool_set_cache_limits(size_t max_slots, size_t max_bytes) {
  hp_ensure_init();
  hp_block victims[HP_BATCH];
  size_t n = 0;
  pthread_mutex_lock(&hp_lock);
  int rc = cache_configure(max_slots, max_bytes);
  if (rc == 0) tcache_return_all(victims, HP_BATCH, &n); /* leases were sized for the old limits */
  hp_stats.cache_evictions += n;
  release_mark(victims, n);
  pthread_mutex_unlock(&hp_lock);
  release_now(victims, n);
  if (rc != 0) return -1;
  release_batches(take_over_limits, NULL, &hp_stats.cache_evictions);
  return 0;
}

void hugepool_get_stats(hugepool_stats *out) {
  if (!out) return;
  hp_ensure_init();
  pthread_mutex_lock(&hp_lock);
  *out = hp_stats;
  tcache_sum_stats(out);
  size_t count, bytes;
  tcache_totals(&count, &bytes);
  out->bytes_cached = cache_bytes() + bytes;
  out->cached_buffers = cache_count() + count;
  out->cache_max_slots = cache_max_slots();
  out->cache_max_bytes = cache_max_bytes();
  pthread_mutex_unlock(&hp_lock);
}

long hugepool_pool_free_pages(int node) {
  hp_ensure_init();
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
