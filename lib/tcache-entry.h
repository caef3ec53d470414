/* SPDX-License-Identifier: BSD-3-Clause */
/* A thread cache's insides, shared by tcache.c (one thread's cache) and
 * tcache-all.c (every cache at once) alone.  Not installed.  Lock order:
 * tcache.h's; each entry is guarded by its cache's lock, the list of caches
 * and their owners by hp_lock. */
#ifndef HUGEPOOL_TCACHE_ENTRY_H
#define HUGEPOOL_TCACHE_ENTRY_H

#include <stdbool.h>
#include <stdint.h>

#include "base.h"
#include "spin.h"

#define ENTRIES 4

enum { EMPTY, CACHED, OUT }; /* OUT: handed out, live, still marked in the registry */

typedef struct tc_entry {
  hp_block b;     /* CACHED, OUT: the block (OUT: with the caller's requested size) */
  size_t lease;   /* bytes of room held in the cache's limits, 0: none */
  uint64_t age;   /* when b was put here: the oldest is the victim, the newest of equal blocks goes out first */
  long long since_ms; /* CACHED: when b was freed into it (coarse clock, for HUGEPOOL_CACHE_DECAY) */
  uint32_t state; /* EMPTY, CACHED or OUT */
} tc_entry;

struct hp_tcache {
  hp_spin lock;
  bool owned; /* a live thread uses it (hp_lock) */
  hp_tcache *next;
  uint64_t clock;
  tc_entry e[ENTRIES];
  hugepool_stats delta; /* the fast paths' counters, summed into the totals */
} __attribute__((aligned(64)));

/* Every thread cache ever made (hp_lock), newest first. */
extern HP_INTERNAL hp_tcache *tcache_list;

/* The block of e leaves this cache: its registry entry goes, or (keep)
 * becomes a plain live entry equal to *plain.  The lease stays with e. */
HP_INTERNAL void tcache_unmark(hp_tcache *tc, tc_entry *e, bool keep, const hp_block *plain);
/* Gives e's lease back to the shared cache's limits. */
HP_INTERNAL void tcache_drop_lease(tc_entry *e);

#endif /* HUGEPOOL_TCACHE_ENTRY_H */
