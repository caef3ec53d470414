/* SPDX-License-Identifier: BSD-3-Clause */
/* The shared cache of freed mappings.  Each entry holds one mapping, or
 * a part of one that a miss split (alloc.c's take_last_freed), with its size
 * class (a multiple of the page size), its kind and its NUMA node.  A hit
 * hands the very same pages back: no system call, no page fault.
 *
 * Constant time whatever the number of entries: entries hang in hash buckets
 * by (size, kind), so a take looks at the entries of its own class only (the
 * bucket array grows with the entries); and on two age lists, one for all
 * entries and one per kind, so the victim - the oldest entry, which is what
 * the round-robin cursor of a fixed slot table used to pick - is the head of
 * a list.  Entries live in an array from the OS layer, linked by index, that
 * doubles when full.
 *
 * The limits (slots, bytes) cover this cache and the leases held by the
 * threads' own caches (tcache.c): a lease is room reserved for one block,
 * used or not, so a thread refills its cache without coming here.
 *
 * Victims are returned to the caller, which unmaps them after dropping the
 * lock (lazy release).  The caller holds the hugepool lock throughout. */
#include "cache.h"

#include <errno.h>
#include <string.h>

#include "options.h"

typedef uint32_t ref; /* index into entries[]; 0 is "none" */

typedef struct entry {
  hp_block b;
  long long since_ms;       /* when it was cached (coarse clock): entries are in this order on `all` */
  ref bucket_next;          /* next entry of the same bucket */
  ref age_prev, age_next;   /* all entries, oldest first */
  ref kind_prev, kind_next; /* entries of this kind, oldest first */
} entry;

typedef struct age_list {
  ref head, tail;
} age_list;

#define KINDS 5 /* hugepool_kind values, HUGEPOOL_KIND_NONE unused */

static entry *entries;   /* entries[0] unused */
static size_t n_entries; /* capacity of entries[], 0 before the first put */
static ref free_list;    /* unused entries, through bucket_next */
static ref *buckets;     /* heads of the hash chains */
static size_t n_buckets; /* a power of two, or 0 */
static age_list all, of_kind[KINDS];
static size_t max_slots, max_bytes;
static size_t count, bytes, kind_bytes[KINDS];
static size_t leased_slots, leased_bytes;

int cache_configure(size_t new_max_slots, size_t new_max_bytes) {
  if (new_max_slots > HP_CACHE_SLOTS_MAX) {
    errno = EINVAL;
    return -1;
  }
  max_slots = new_max_slots;
  max_bytes = new_max_bytes;
  return 0; /* shrinking: see cache_shrink_to_limits */
}

size_t cache_count(void) { return count; }
size_t cache_bytes(void) { return bytes; }
size_t cache_max_slots(void) { return max_slots; }
size_t cache_max_bytes(void) { return max_bytes; }
size_t cache_bytes_of_kind(hugepool_kind kind) { return kind < KINDS ? kind_bytes[kind] : 0; }

static size_t bucket_of(size_t size, uint32_t kind, size_t n) {
  uint64_t key = ((uint64_t)size >> 21) * 8 + kind; /* sizes are 2 MB multiples or more */
  return (size_t)((key * 0x9E3779B97F4A7C15ULL) >> 32) & (n - 1);
}

/* Doubles entries[] and the bucket array (the metadata grows with the
 * entries in use, never with the limit). */
static int grow(void) {
  size_t cap = n_entries ? n_entries * 2 : 64;
  if (cap > (size_t)UINT32_MAX) return -1;
  entry *e = os_map_meta(cap * sizeof(entry));
  ref *bk = os_map_meta(cap * sizeof(ref));
  if (!e || !bk) {
    if (e) os_unmap_meta(e, cap * sizeof(entry));
    if (bk) os_unmap_meta(bk, cap * sizeof(ref));
    return -1;
  }
  if (entries) {
    memcpy(e, entries, n_entries * sizeof(entry));
    os_unmap_meta(entries, n_entries * sizeof(entry));
  }
  /* Rehash every used entry into the new buckets. */
  for (size_t i = 1; i < n_entries; i++) {
    if (!e[i].b.addr) continue;
    size_t k = bucket_of(e[i].b.size, e[i].b.kind, cap);
    e[i].bucket_next = bk[k];
    bk[k] = (ref)i;
  }
  if (buckets) os_unmap_meta(buckets, n_buckets * sizeof(ref));
  /* New entries join the free list (index 0 stays unused). */
  for (size_t i = n_entries ? n_entries : 1; i < cap; i++) {
    e[i].bucket_next = free_list;
    e[i].b.addr = NULL;
    free_list = (ref)i;
  }
  entries = e;
  n_entries = cap;
  buckets = bk;
  n_buckets = cap;
  return 0;
}

static void list_push(age_list *l, ref r, bool by_kind) {
  entry *e = &entries[r];
  ref *prev = by_kind ? &e->kind_prev : &e->age_prev, *next = by_kind ? &e->kind_next : &e->age_next;
  *prev = l->tail;
  *next = 0;
  if (l->tail)
    *(by_kind ? &entries[l->tail].kind_next : &entries[l->tail].age_next) = r;
  else
    l->head = r;
  l->tail = r;
}

static void list_unlink(age_list *l, ref r, bool by_kind) {
  entry *e = &entries[r];
  ref prev = by_kind ? e->kind_prev : e->age_prev, next = by_kind ? e->kind_next : e->age_next;
  if (prev)
    *(by_kind ? &entries[prev].kind_next : &entries[prev].age_next) = next;
  else
    l->head = next;
  if (next)
    *(by_kind ? &entries[next].kind_prev : &entries[next].age_prev) = prev;
  else
    l->tail = prev;
}

/* Adds b; the caller checked the limits.  -1 when the metadata cannot grow. */
static int insert(const hp_block *b) {
  if (!free_list && grow() != 0) return -1;
  ref r = free_list;
  free_list = entries[r].bucket_next;
  entry *e = &entries[r];
  e->b = *b;
  e->b.requested = 0;
  e->since_ms = os_coarse_ms(); /* now, always: `all` stays in since_ms order */
  size_t k = bucket_of(b->size, b->kind, n_buckets);
  e->bucket_next = buckets[k];
  buckets[k] = r;
  list_push(&all, r, false);
  list_push(&of_kind[b->kind % KINDS], r, true);
  count++;
  bytes += b->size;
  kind_bytes[b->kind % KINDS] += b->size;
  return 0;
}

/* Removes entry r (found through its bucket chain: *link points at r). */
static void remove_at(ref *link, hp_block *out) {
  ref r = *link;
  entry *e = &entries[r];
  *out = e->b;
  *link = e->bucket_next;
  list_unlink(&all, r, false);
  list_unlink(&of_kind[e->b.kind % KINDS], r, true);
  count--;
  bytes -= e->b.size;
  kind_bytes[e->b.kind % KINDS] -= e->b.size;
  e->b.addr = NULL;
  e->bucket_next = free_list;
  free_list = r;
}

static void remove_entry(ref r, hp_block *out) {
  const hp_block *b = &entries[r].b;
  ref *link = &buckets[bucket_of(b->size, b->kind, n_buckets)];
  while (*link != r) link = &entries[*link].bucket_next;
  remove_at(link, out);
}

static bool take_exact(size_t size, int node, hugepool_kind kind, hp_block *out) {
  for (ref *link = &buckets[bucket_of(size, kind, n_buckets)]; *link; link = &entries[*link].bucket_next) {
    const hp_block *s = &entries[*link].b;
    if (s->size == size && s->kind == kind && (node == HUGEPOOL_ANY_NODE || s->node == node)) {
      remove_at(link, out);
      return true;
    }
  }
  return false;
}

/* Larger classes are looked up one by one, at most FIT_PROBES of them: the
 * cost stays constant, and a miss that maps costs far more anyway. */
#define FIT_PROBES 16

bool cache_take(size_t size, size_t max_size, int node, hugepool_kind kind, hp_block *out) {
  if (count == 0) return false;
  if (take_exact(size, node, kind, out)) return true;
  size_t unit = hp_unit_of(kind);
  for (size_t s = size + unit, n = 0; s <= max_size && s > size && n < FIT_PROBES; s += unit, n++) {
    if (take_exact(s, node, kind, out)) return true;
  }
  return false;
}

bool cache_newest(hp_block *out, long long *since_ms) {
  if (!all.tail) return false;
  *out = entries[all.tail].b;
  *since_ms = entries[all.tail].since_ms;
  return true;
}

void cache_take_newest(void) {
  hp_block gone;
  if (all.tail) remove_entry(all.tail, &gone);
}

bool cache_evict_kind(hugepool_kind kind, hp_block *out) {
  ref r = of_kind[kind % KINDS].head;
  if (!r) return false;
  remove_entry(r, out);
  return true;
}

bool cache_evict_idle(long long cached_by_ms, hp_block *out) {
  ref r = all.head; /* the oldest: the rest were cached later */
  if (!r || entries[r].since_ms > cached_by_ms) return false;
  remove_entry(r, out);
  return true;
}

static bool evict_oldest(hp_block *out) {
  if (!all.head) return false;
  remove_entry(all.head, out);
  return true;
}

static bool over(size_t n, size_t b, size_t size) {
  return n + leased_slots >= max_slots || b + leased_bytes + size > max_bytes;
}

/* Makes room for one more block of `size` (in the cache or as a lease) by
 * evicting at most max_victims - 1 of the oldest entries into victims[];
 * false (nothing evicted) if that is not enough. */
static bool make_room(size_t size, hp_block *victims, size_t max_victims, size_t *n_victims) {
  *n_victims = 0;
  if (max_slots == 0 || size > max_bytes || max_victims == 0) return false;
  size_t n = count, b = bytes, used = 0;
  for (ref r = all.head; r && over(n, b, size); r = entries[r].age_next) {
    if (++used >= max_victims) return false; /* more evictions than one call may make */
    n--;
    b -= entries[r].b.size;
  }
  if (over(n, b, size)) return false; /* the leases hold the room */
  while (over(count, bytes, size)) evict_oldest(&victims[(*n_victims)++]);
  return true;
}

bool cache_put(const hp_block *b, hp_block *victims, size_t max_victims, size_t *n_victims) {
  if (!make_room(b->size, victims, max_victims, n_victims) || insert(b) != 0) {
    /* Caching b would cost more evictions than one call may make (or the
     * metadata cannot grow): release b itself rather than evicting blocks
     * for nothing. */
    if (max_victims) victims[(*n_victims)++] = *b;
    return false;
  }
  return true;
}

bool cache_lease(size_t size, hp_block *victims, size_t max_victims, size_t *n_victims) {
  if (!make_room(size, victims, max_victims, n_victims)) return false;
  leased_slots++;
  leased_bytes += size;
  return true;
}

bool cache_lease_fits(size_t size, size_t give_slots, size_t give_bytes) {
  return max_slots > 0 && size <= max_bytes && count + leased_slots - give_slots < max_slots &&
         bytes + leased_bytes - give_bytes + size <= max_bytes;
}

void cache_unlease(size_t size) {
  leased_slots--;
  leased_bytes -= size;
}

void cache_add_unchecked(const hp_block *b, hp_block *victims, size_t max_victims, size_t *n_victims) {
  if (insert(b) != 0 && *n_victims < max_victims) victims[(*n_victims)++] = *b;
}

size_t cache_drain(hp_block *out, size_t max_out) {
  size_t n = 0;
  while (n < max_out && evict_oldest(&out[n])) n++;
  return n;
}

size_t cache_shrink_to_limits(hp_block *out, size_t max_out) {
  size_t n = 0;
  while (n < max_out && (count + leased_slots > max_slots || bytes + leased_bytes > max_bytes) && evict_oldest(&out[n]))
    n++;
  return n;
}
