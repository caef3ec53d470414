/* The cache of freed mappings.  A fixed table of slots, each holding one
 * whole mapping with its size class (a multiple of the page size), its kind
 * and its NUMA node.  A hit hands the very same mapping back: no system call,
 * no page fault.  When the slot count or the byte cap would be exceeded, a
 * round-robin victim is evicted; the victims are returned to the caller,
 * which unmaps them after dropping the lock (lazy release).  The caller
 * holds the hugepool lock for every function here. */
#include <errno.h>
#include <string.h>

#include "internal.h"

static hp_block slots[HP_CACHE_SLOTS_MAX]; /* addr == NULL: empty */
static size_t max_slots;                   /* slots in use: [0, max_slots) */
static size_t max_bytes;
static size_t count, bytes;
static size_t victim; /* round-robin eviction cursor */
static size_t extent; /* no slot at or past this index is occupied */

int cache_configure(size_t new_max_slots, size_t new_max_bytes) {
  if (new_max_slots > HP_CACHE_SLOTS_MAX) {
    errno = EINVAL;
    return -1;
  }
  max_slots = new_max_slots;
  max_bytes = new_max_bytes;
  if (extent < max_slots) extent = max_slots; /* shrinking: see cache_shrink_to_limits */
  if (victim >= max_slots) victim = 0;
  return 0;
}

size_t cache_count(void) { return count; }
size_t cache_bytes(void) { return bytes; }
size_t cache_max_slots(void) { return max_slots; }
size_t cache_max_bytes(void) { return max_bytes; }

size_t cache_bytes_of_kind(uint32_t kind) {
  size_t total = 0;
  for (size_t i = 0; i < extent; i++) {
    if (slots[i].addr && slots[i].kind == kind) total += slots[i].size;
  }
  return total;
}

/* Would evicting at most `budget` blocks, round-robin from the cursor, make
 * room for `size` more bytes in one more slot? */
static bool room_within(size_t size, size_t budget) {
  size_t n = count, b = bytes, used = 0;
  for (size_t k = 0; k < max_slots && (n >= max_slots || b + size > max_bytes); k++) {
    const hp_block *s = &slots[(victim + k) % max_slots];
    if (!s->addr) continue;
    if (used == budget) return false;
    used++;
    n--;
    b -= s->size;
  }
  return n < max_slots && b + size <= max_bytes;
}

static void remove_slot(size_t i, hp_block *out) {
  *out = slots[i];
  memset(&slots[i], 0, sizeof(slots[i]));
  count--;
  bytes -= out->size;
}

bool cache_take(size_t size, int node, uint32_t kind, hp_block *out) {
  if (count == 0) return false;
  for (size_t i = 0; i < extent; i++) {
    const hp_block *s = &slots[i];
    if (s->addr && s->size == size && s->kind == kind && (node == HUGEPOOL_ANY_NODE || s->node == node)) {
      remove_slot(i, out);
      return true;
    }
  }
  return false;
}

/* Evicts the next occupied slot at or after the cursor. */
static bool evict_one(hp_block *out) {
  for (size_t k = 0; k < max_slots; k++) {
    size_t i = (victim + k) % max_slots;
    if (slots[i].addr) {
      remove_slot(i, out);
      victim = (i + 1) % max_slots;
      return true;
    }
  }
  return false;
}

bool cache_evict_kind(uint32_t kind, hp_block *out) {
  for (size_t k = 0; k < max_slots; k++) {
    size_t i = (victim + k) % max_slots;
    if (slots[i].addr && slots[i].kind == kind) {
      remove_slot(i, out);
      victim = (i + 1) % max_slots;
      return true;
    }
  }
  return false;
}

bool cache_put(const hp_block *b, hp_block *victims, size_t max_victims, size_t *n_victims) {
  *n_victims = 0;
  if (max_slots == 0 || b->size > max_bytes || max_victims == 0 || !room_within(b->size, max_victims - 1)) {
    /* Caching b would cost more evictions than one call may make: release
     * b itself rather than evicting blocks for nothing. */
    if (max_victims) victims[(*n_victims)++] = *b;
    return false;
  }
  while (count >= max_slots || bytes + b->size > max_bytes) {
    if (*n_victims + 1 >= max_victims || !evict_one(&victims[*n_victims])) {
      victims[(*n_victims)++] = *b; /* too much to evict at once: release b instead */
      return false;
    }
    (*n_victims)++;
  }
  for (size_t i = 0; i < max_slots; i++) {
    if (!slots[i].addr) {
      slots[i] = *b;
      slots[i].requested = 0;
      count++;
      bytes += b->size;
      return true;
    }
  }
  victims[(*n_victims)++] = *b; /* unreachable: count < max_slots means a free slot */
  return false;
}

size_t cache_drain(hp_block *out, size_t max_out) {
  size_t n = 0;
  for (size_t i = 0; i < extent && n < max_out && count; i++) {
    if (slots[i].addr) remove_slot(i, &out[n++]);
  }
  return n;
}

size_t cache_shrink_to_limits(hp_block *out, size_t max_out) {
  size_t n = 0;
  size_t i = max_slots;
  for (; i < extent && n < max_out; i++) {
    if (slots[i].addr) remove_slot(i, &out[n++]);
  }
  if (i >= extent) extent = max_slots;
  while (n < max_out && (count > max_slots || bytes > max_bytes) && evict_one(&out[n])) n++;
  return n;
}
