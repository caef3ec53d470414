/* SPDX-License-Identifier: BSD-3-Clause */
/* The public C API (include/hugepool/hugepool.h), every hugepool_* function
 * of the core in one file: allocation and free, resize (realloc.c),
 * ownership, run-time settings, trim, statistics (stats.c), node-shared
 * segments (segment.c).  The top of the core with init.c: every function
 * starts the core first (hp_ensure_init), so nothing below has to, and
 * nothing below calls a public function.  The preload's free hooks
 * (hooks.h) are here too: they start the core as hugepool_free does. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "alloc.h"
#include "cache.h"
#include "hooks.h"
#include "init.h"
#include "launcher.h"
#include "live.h"
#include "realloc.h"
#include "registrar.h"
#include "registry.h"
#include "release.h"
#include "segment.h"
#include "stats.h"
#include "tcache.h"

void *hugepool_alloc(size_t bytes) {
  hp_ensure_init();
  bool fresh;
  return hp_allocate(bytes, HUGEPOOL_ANY_NODE, &fresh);
}

void *hugepool_alloc_on_node(size_t bytes, int node) {
  hp_ensure_init();
  bool fresh;
  return hp_allocate(bytes, node, &fresh);
}

void *hugepool_calloc(size_t count, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(count, size, &bytes)) {
    errno = ENOMEM;
    return NULL;
  }
  hp_ensure_init();
  bool fresh = false;
  void *p = hp_allocate(bytes, HUGEPOOL_ANY_NODE, &fresh);
  if (p && !fresh) memset(p, 0, bytes);
  return p;
}

/* A free starts the core too: it may come before any allocation (the
 * preload's free of a 2 MB-aligned pointer from glibc).  errno is kept, as
 * free keeps it. */
static bool free_started(void *ptr, bool keep, bool quiet) {
  if (!ptr) return false;
  int saved = errno;
  hp_ensure_init();
  errno = saved;
  return alloc_free(ptr, keep, quiet);
}

void hugepool_free(void *ptr) { (void)free_started(ptr, true, false); }

void hp_free_to_pool(void *ptr) { (void)free_started(ptr, false, false); }

bool hp_free_if_live(void *ptr) { return free_started(ptr, true, true); }

long hp_pool_pages(void) {
  hp_ensure_init();
  int saved = errno;
  size_t page = hp_current_page_size();
  long total = os_pool_total(page, -1), over = os_pool_overcommit(page);
  errno = saved;
  return total < 0 ? -1 : total + (over > 0 ? over : 0);
}

bool hp_mpi_rank(void) { return launcher_mpi_rank(); }

void *hugepool_realloc(void *ptr, size_t bytes) {
  hp_ensure_init();
  return realloc_resize(ptr, bytes);
}

bool hp_realloc_same_pages(void *ptr, size_t bytes) {
  hp_ensure_init();
  return bytes && realloc_same_pages(ptr, bytes);
}

size_t hugepool_usable_size(const void *ptr) {
  hp_block b;
  return live_find(ptr, &b) ? b.size : 0;
}

int hugepool_owns(const void *ptr) {
  hp_block b;
  return live_find(ptr, &b);
}

hugepool_kind hugepool_kind_of(const void *ptr) {
  hp_block b;
  return live_find(ptr, &b) ? (hugepool_kind)b.kind : HUGEPOOL_KIND_NONE;
}

size_t hugepool_trim(void) {
  hp_ensure_init();
  return release_cached();
}

int hugepool_set_policy(hugepool_policy policy) {
  hp_ensure_init();
  if (policy != HUGEPOOL_POLICY_STRICT && policy != HUGEPOOL_POLICY_THP && policy != HUGEPOOL_POLICY_SMALL) {
    errno = EINVAL;
    return -1;
  }
  hp_set_policy(policy);
  return 0;
}

hugepool_policy hugepool_get_policy(void) {
  hp_ensure_init();
  return hp_current_policy();
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
  hp_set_page_size(page_bytes);
  return 0;
}

size_t hugepool_get_page_size(void) {
  hp_ensure_init();
  return hp_current_page_size();
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
  stats_snapshot(out);
}

int hugepool_stats_snprint(char *buf, size_t len, hugepool_stats_format format) {
  hp_ensure_init();
  return stats_snprint(buf, len, format);
}

int hugepool_stats_print(FILE *stream, hugepool_stats_format format) {
  hp_ensure_init();
  return stats_print(stream, format);
}

long hugepool_pool_free_pages(int node) {
  hp_ensure_init();
  return os_pool_available(hp_current_page_size(), node);
}

const char *hugepool_policy_name(hugepool_policy policy) { return hp_policy_name(policy); }

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

/* ---- registered buffers (registrar.c) ------------------------------------ */

int hugepool_registrar_add(const hugepool_registrar *registrar) {
  hp_ensure_init();
  return registrar_add(registrar);
}

int hugepool_registrar_remove(int id) { return registrar_remove(id); }

int hugepool_registrar_cuda(void) {
  hp_ensure_init();
  return registrar_cuda();
}

int hugepool_registrar_hip(void) {
  hp_ensure_init();
  return registrar_hip();
}

/* Registers the whole mapping of the live block starting at ptr. */
static int register_live(void *ptr, int id) {
  hp_block b;
  if (!live_find(ptr, &b)) return EINVAL;
  return registrar_ensure(b.addr, b.size, id);
}

void *hugepool_alloc_registered(size_t bytes, int id) {
  hp_ensure_init();
  if (!registrar_known(id)) {
    errno = EINVAL;
    return NULL;
  }
  bool fresh;
  void *p = hp_allocate(bytes, HUGEPOOL_ANY_NODE, &fresh);
  int err = p ? register_live(p, id) : 0;
  if (err) {
    hugepool_free(p); /* back to the cache, unregistered */
    errno = err;
    return NULL;
  }
  return p;
}

int hugepool_register(void *ptr, int id) {
  hp_ensure_init();
  int err = register_live(ptr, id);
  if (err) errno = err;
  return err ? -1 : 0;
}

void *hugepool_registration(const void *ptr, int id, void **base, size_t *len) {
  void *handle = NULL;
  return registrar_lookup(ptr, id, base, len, &handle) ? handle : NULL;
}

int hugepool_is_registered(const void *ptr, int id) { return registrar_lookup(ptr, id, NULL, NULL, NULL); }

int hugepool_registrar_get_stats(int id, hugepool_registrar_stats *out) {
  if (!out) {
    errno = EINVAL;
    return -1;
  }
  return registrar_stats(id, out);
}

int hp_cuda_registrar(void) {
  hp_ensure_init();
  return registrar_cuda();
}

bool hp_cuda_context(void) { return registrar_cuda_context(); }

int hp_cuda_synchronize(void) { return registrar_cuda_synchronize(); }

/* The live block holding p: its start (a 2 MB boundary) is looked for one
 * 2 MB step back at a time, no further than the bytes hugepool maps (as
 * split.c's block_at).  A pointer hugepool does not own costs one registry
 * probe per 2 MB mapped (about 10 us a GB). */
int hp_register_range(const void *p, size_t len, int id, void **base) {
  hp_block b;
  void *start;
  size_t size;
  if (registrar_lookup(p, id, &start, &size, NULL)) {
    b.addr = start;
    b.size = size;
  } else if (!registry_find_holding(p, live_find, &b)) {
    return -1; /* not inside a live hugepool buffer */
  }
  if ((uintptr_t)p + len < (uintptr_t)p || (uintptr_t)p + len > (uintptr_t)b.addr + b.size) return -1;
  *base = b.addr;
  return registrar_ensure(b.addr, b.size, id);
}

bool hp_registered_range(const void *p, int id, void **base, size_t *size) {
  return registrar_lookup(p, id, base, size, NULL);
}

int hugepool_segment_create(size_t bytes, const hugepool_segment_options *opts, hugepool_segment *out) {
  hp_ensure_init();
  return segment_create(bytes, opts, out);
}

int hugepool_segment_map(const hugepool_segment_handle *h, hugepool_segment *out) {
  hp_ensure_init(); /* options, diagnostics */
  return segment_map(h, out);
}

int hugepool_segment_unmap(hugepool_segment *seg) { return segment_unmap(seg); }
