/* The registry of live buffers: start address -> block.  An open-addressing
 * hash table with linear probing and backward-shift deletion, stored in
 * memory from the OS layer (never malloc: the preload calls us from inside
 * malloc).  The caller holds the hugepool lock. */
#include <errno.h>
#include <string.h>

#include "internal.h"

static hp_block *table;   /* addr == NULL marks an empty slot */
static size_t capacity;   /* a power of two, or 0 */
static size_t used;

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

static int grow(void) {
  size_t new_cap = capacity ? capacity * 2 : 1024;
  hp_block *new_tab = os_map_meta(new_cap * sizeof(hp_block));
  if (!new_tab) return -1;
  for (size_t i = 0; i < capacity; i++) {
    if (table[i].addr) place(new_tab, new_cap, &table[i]);
  }
  if (table) os_unmap_meta(table, capacity * sizeof(hp_block));
  table = new_tab;
  capacity = new_cap;
  return 0;
}

int registry_insert(const hp_block *b) {
  if ((used + 1) * 4 > capacity * 3 && grow() != 0) { /* load factor <= 3/4 */
    errno = ENOMEM;
    return -1;
  }
  place(table, capacity, b);
  used++;
  return 0;
}

static hp_block *lookup(const void *addr) {
  if (!capacity || !addr) return NULL;
  for (size_t i = slot_of(addr, capacity);; i = (i + 1) & (capacity - 1)) {
    if (table[i].addr == addr) return &table[i];
    if (!table[i].addr) return NULL;
  }
}

const hp_block *registry_find(const void *addr) { return lookup(addr); }

bool registry_remove(const void *addr, hp_block *out) {
  hp_block *hit = lookup(addr);
  if (!hit) return false;
  *out = *hit;
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
  used--;
  return true;
}

void registry_walk(void (*fn)(hp_block *b, void *arg), void *arg) {
  for (size_t i = 0; i < capacity; i++) {
    if (table[i].addr) fn(&table[i], arg);
  }
}
