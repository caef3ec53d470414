/* SPDX-License-Identifier: BSD-3-Clause */
/* The bottom of the core (base.c), above the OS layer only: the block every
 * module passes around, the lock and the counters it guards, the settings
 * the public API changes at run time, and the shortage lines.  Not
 * installed.
 *
 * Rules: base.c calls only the OS layer; every other file of lib/ may use
 * it.  Nothing here takes a lock other than hp_lock, and only its callers
 * take that.
 *
 * Lock order of the core, first taken first: realloc.c's resize gate,
 * hp_lock (base.h), the thread caches' locks (tcache.h), the registry's
 * stripe locks (registry.h); split.c's mutex is taken before any
 * thread-cache or registry lock, never after; the OS layer's own locks
 * (os.h) are taken last and held by nobody across a call. */
#ifndef HUGEPOOL_BASE_H
#define HUGEPOOL_BASE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hugepool/hugepool.h"
#include "os.h"
#include "warn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- one mapping, live or cached -------------------------------------- */
typedef struct hp_tcache hp_tcache;
typedef struct hp_block {
  void *addr;
  size_t size;       /* mapped bytes, a multiple of the page size of `kind` */
  size_t requested;  /* bytes the caller asked for (live blocks only) */
  size_t headroom;   /* live blocks: reserved address space right after the mapping,
                        kept by realloc.c for growth in place (0 in the cache) */
  int32_t node;      /* NUMA node the pages are bound to, or HUGEPOOL_ANY_NODE */
  uint32_t kind;     /* hugepool_kind */
  uint32_t resizing; /* live blocks: non-zero while realloc.c changes the mapping */
  uint32_t tc_slot;  /* registry entries with tc: the thread-cache entry */
  hp_tcache *tc;     /* registry entries: the thread cache that holds the block
                        (cached or handed out from it; tcache.c), or NULL */
} hp_block;

/* The page kind <-> page size mapping, written here alone. */
/* The page size of a block's kind: 0 for the fallbacks (THP, 4 KB). */
static inline size_t hp_page_of(hugepool_kind kind) {
  return kind == HUGEPOOL_KIND_HUGE_1G ? HP_1G : kind == HUGEPOOL_KIND_HUGE_2M ? HP_2M : 0;
}

/* The unit a block's size and address come in: its page size, 2 MB for the
 * fallbacks (they are mapped in 2 MB steps, for THP to back them). */
static inline size_t hp_unit_of(hugepool_kind kind) {
  size_t page = hp_page_of(kind);
  return page ? page : HP_2M;
}

/* The hugetlb kind of a page size (HP_2M or HP_1G). */
static inline hugepool_kind hp_kind_of_page(size_t page) {
  return page == HP_1G ? HUGEPOOL_KIND_HUGE_1G : HUGEPOOL_KIND_HUGE_2M;
}

/* `bytes` rounded up to a multiple of `unit` (a power of two); 0 when that
 * overflows, which no mapping can be. */
static inline size_t hp_round_up(size_t bytes, size_t unit) {
  size_t r = (bytes + unit - 1) & ~(unit - 1);
  return r < bytes ? 0 : r;
}

/* Releases happen in batches outside the lock; this is one batch. */
#define HP_BATCH 64

/* ---- the lock of the shared cache and the slow paths (base.c) ----
 * Guards the shared cache, the statistics in hp_stats and the list of
 * thread caches.  No system call is made under it except rare growth of
 * the internal tables. */
extern HP_INTERNAL pthread_mutex_t hp_lock;
/* The settings the public API reads and changes (hugepool_set_policy,
 * hugepool_set_page_size), set first by init.c from the options. */
HP_INTERNAL size_t hp_current_page_size(void);
HP_INTERNAL void hp_set_page_size(size_t page);
HP_INTERNAL hugepool_policy hp_current_policy(void);
HP_INTERNAL void hp_set_policy(hugepool_policy policy);
HP_INTERNAL const char *hp_policy_name(hugepool_policy policy); /* "strict", "thp", "small" */
HP_INTERNAL void hp_report_shortage(size_t size, size_t page, int node);
/* The pool part of a shortage line, "2 MB hugetlb pages: need N pages, ..."
 * (also in hooks.h: the preload's lines share it). */
HP_INTERNAL void hp_describe_shortage(char *buf, size_t len, size_t size, size_t page, int node);
/* The counters hp_lock guards (stats_snapshot() adds the caches'). */
extern HP_INTERNAL hugepool_stats hp_stats;
/* Bytes that resizes within a block's pages (realloc.c) moved from
 * bytes_slack to bytes_requested, modulo 2^64: counted under the block's
 * registry stripe lock instead of hp_lock (fork holds both), lock-free,
 * and added to the counters by stats_snapshot(). */
HP_INTERNAL void base_stats_requested_moved(uint64_t bytes);
HP_INTERNAL uint64_t base_stats_requested_moved_total(void);
HP_INTERNAL void base_stats_mapped(size_t bytes);
HP_INTERNAL void base_stats_unmapped(size_t bytes);
/* A buffer handed out (birth: allocs, live and requested bytes, slack, the
 * fallback kind) or freed (death), counted into st: hp_stats under hp_lock,
 * or a thread cache's own counters under its lock.  Cache hits and misses
 * are the caller's. */
HP_INTERNAL void base_stats_birth(hugepool_stats *st, const hp_block *b);
HP_INTERNAL void base_stats_death(hugepool_stats *st, const hp_block *b);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_BASE_H */
