/* SPDX-License-Identifier: BSD-3-Clause */
/* The registry of live buffers: start address -> block.  Open-addressing
 * hash tables with linear probing and backward-shift deletion, stored in
 * memory from the OS layer (never malloc: the preload calls us from inside
 * malloc).
 *
 * Striped: the address picks one of STRIPES tables, each with its own lock
 * on its own cache line, so threads working on different buffers do not
 * queue on one lock nor pass a cache line back and forth.  Every function
 * takes the stripe's lock itself, except registry_walk (see there). */
#include "registry.h"

#include <errno.h>
#include <string.h>

#include "spin.h"

#define STRIPES 64

typedef struct stripe {
  hp_spin lock;
  hp_block *table; /* addr == NULL marks an empty slot */
  size_t capacity; /* a power of two, or 0 */
  size_t used;
} __attribute__((aligned(64))) stripe;

static stripe stripes[STRIPES];

static stripe *stripe_of(const void *addr) {
  uint64_t key = (uint64_t)(uintptr_t)addr >> 21; /* buffers are at least 2 MB aligned */
  return &stripes[(key ^ (key >> 6) ^ (key >> 12)) % STRIPES];
}

static size_t slot_of(const void *addr, size_t cap) {
  /* Buffers are at least 4 KB aligned; mix the page number (Fibonacci hash). */
  uint64_t key = (uint64_t)(uintptr_t)addr >> 12;
  return (size_t)((key * 0x9E3779B97F4A7C15ULL) >> 32) & (cap - 1);
}

static void place(hp_block *tab, size_t cap, const hp_block *b) {
  size_t i = slot_of(b->addr, cap);
  while (tab[i].addr) i = (i + 1) & (cap - 1);
  tab[i] = *b;
}

static int grow(stripe *st) {
  size_t capacity = st->capacity;
  hp_block *table = st->table;
  size_t new_cap = capacity ? capacity * 2 : 64;
  hp_block *new_tab = os_map_meta(new_cap * sizeof(hp_block));
  if (!new_tab) return -1;
  for (size_t i = 0; i < capacity; i++) {
    if (table[i].addr) place(new_tab, new_cap, &table[i]);
  }
  if (table) os_unmap_meta(table, capacity * sizeof(hp_block));
  st->table = new_tab;
  st->capacity = new_cap;
  return 0;
}

int registry_insert(const hp_block *b) {
  stripe *st = stripe_of(b->addr);
  hp_spin_lock(&st->lock);
  if ((st->used + 1) * 4 > st->capacity * 3 && grow(st) != 0) { /* load factor <= 3/4 */
    hp_spin_unlock(&st->lock);
    errno = ENOMEM;
    return -1;
  }
  place(st->table, st->capacity, b);
  st->used++;
  hp_spin_unlock(&st->lock);
  return 0;
}

/* The block at addr.  One address can have two entries for a moment: a
 * resize that moved its buffer away has released the old range before it
 * records the new address, and the kernel may give that range to another
 * buffer in between.  So the entry with `resizing` as asked comes first,
 * else the other. */
static hp_block *lookup_as(stripe *st, const void *addr, uint32_t resizing) {
  if (!st->capacity || !addr) return NULL;
  hp_block *other = NULL;
  for (size_t i = slot_of(addr, st->capacity);; i = (i + 1) & (st->capacity - 1)) {
    hp_block *b = &st->table[i];
    if (!b->addr) return other;
    if (b->addr != addr) continue;
    if (!b->resizing == !resizing) return b;
    other = b;
  }
}

static hp_block *lookup(stripe *st, const void *addr) { return lookup_as(st, addr, 0); }

bool registry_find(const void *addr, hp_block *out) {
  stripe *st = stripe_of(addr);
  hp_spin_lock(&st->lock);
  hp_block *hit = lookup(st, addr);
  if (hit) *out = *hit;
  hp_spin_unlock(&st->lock);
  return hit != NULL;
}

int registry_update(const void *addr, int (*fn)(hp_block *b, void *arg), void *arg, hp_block *copy) {
  stripe *st = stripe_of(addr);
  hp_spin_lock(&st->lock);
  hp_block *hit = lookup(st, addr);
  int rc = -1, err = EINVAL;
  if (hit && hit->tc) {
    *copy = *hit;
    err = EAGAIN;
  } else if (hit) {
    rc = fn(hit, arg);
    err = 0;
  }
  hp_spin_unlock(&st->lock);
  if (err) errno = err;
  return rc;
}

static void remove_hit(stripe *st, hp_block *hit);

bool registry_remove_resized(const void *addr, hp_block *out) {
  stripe *st = stripe_of(addr);
  hp_spin_lock(&st->lock);
  hp_block *hit = lookup_as(st, addr, 1);
  if (hit) {
    *out = *hit;
    remove_hit(st, hit);
  }
  hp_spin_unlock(&st->lock);
  return hit != NULL;
}

int registry_remove_idle(const void *addr, hp_block *out) {
  stripe *st = stripe_of(addr);
  hp_spin_lock(&st->lock);
  hp_block *hit = lookup(st, addr);
  int err = !hit ? EINVAL : hit->resizing ? EBUSY : hit->tc ? EAGAIN : 0;
  if (hit && (!err || err == EAGAIN)) *out = *hit;
  if (!err) remove_hit(st, hit);
  hp_spin_unlock(&st->lock);
  return err;
}

bool registry_detach(const hp_block *b, bool keep) {
  stripe *st = stripe_of(b->addr);
  hp_spin_lock(&st->lock);
  hp_block *hit = NULL;
  for (size_t i = st->capacity ? slot_of(b->addr, st->capacity) : 0; st->capacity && st->table[i].addr;
       i = (i + 1) & (st->capacity - 1)) {
    hp_block *e = &st->table[i];
    if (e->addr == b->addr && e->tc == b->tc && e->tc_slot == b->tc_slot) {
      hit = e;
      break;
    }
  }
  if (hit && keep) {
    *hit = *b;
    hit->tc = NULL;
    hit->tc_slot = 0;
  } else if (hit) {
    remove_hit(st, hit);
  }
  hp_spin_unlock(&st->lock);
  return hit != NULL;
}

static void remove_hit(stripe *st, hp_block *hit) {
  hp_block *table = st->table;
  size_t capacity = st->capacity;
  /* Backward-shift deletion keeps every probe chain unbroken without tombstones. */
  size_t hole = (size_t)(hit - table);
  for (size_t i = (hole + 1) & (capacity - 1); table[i].addr; i = (i + 1) & (capacity - 1)) {
    size_t home = slot_of(table[i].addr, capacity);
    /* Move entry i into the hole unless its home lies cyclically in (hole, i]. */
    bool home_after_hole = hole <= i ? (home > hole && home <= i) : (home > hole || home <= i);
    if (!home_after_hole) {
      table[hole] = table[i];
      hole = i;
    }
  }
  memset(&table[hole], 0, sizeof(table[hole]));
  st->used--;
}

void registry_lock_all(void) {
  for (size_t s = 0; s < STRIPES; s++) hp_spin_lock(&stripes[s].lock);
}

void registry_unlock_all(void) {
  for (size_t s = 0; s < STRIPES; s++) hp_spin_unlock(&stripes[s].lock);
}

void registry_walk(void (*fn)(hp_block *b, void *arg), void *arg) {
  for (size_t s = 0; s < STRIPES; s++) {
    for (size_t i = 0; i < stripes[s].capacity; i++) {
      if (stripes[s].table[i].addr) fn(&stripes[s].table[i], arg);
    }
  }
}

bool registry_find_holding(const void *addr, bool (*find)(const void *, hp_block *), hp_block *out) {
  uint64_t mapped = __atomic_load_n(&hp_stats.bytes_mapped, __ATOMIC_RELAXED);
  if (mapped == 0) return false;
  uintptr_t a = (uintptr_t)addr;
  const char *c = (const char *)addr - (a & (HP_2M - 1));
  for (uint64_t steps = mapped / HP_2M + 1; steps > 0; steps--) {
    if (find(c, out)) return a - (uintptr_t)out->addr < out->size;
    if ((uintptr_t)c < HP_2M) break;
    c -= HP_2M;
  }
  return false;
}
