/* SPDX-License-Identifier: BSD-3-Clause */
/* Registrations kept with the cache (registrar.h): the registrars, and a
 * table of registered mappings sorted by address, under one mutex.
 *
 * Like UCX's registration cache (ucs/memory/rcache) a registration lives
 * as long as the mapping and is dropped when the mapping goes, not when the
 * program frees the buffer; unlike it there is no page table of regions to
 * merge or split: hugepool's mappings never overlap and are registered
 * whole, so a sorted array and a binary search find them.  A mapping
 * being registered is marked busy in the table, so the (slow: 20 ms a GB
 * for CUDA) call runs with no lock held and a second thread asking for the
 * same mapping waits for the first instead of registering it twice. */
#define _GNU_SOURCE
#include "registrar.h"

#include "prefault.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

typedef struct reg_entry {
  char *addr;
  size_t size;
  uint32_t done; /* bit id - 1: registered with registrar id */
  uint32_t busy; /* bit id - 1: a thread is registering it with id */
  void *handle[HP_REGISTRARS];
} reg_entry;

typedef struct registrar_slot {
  bool used;
  bool removing;
  unsigned unregistering; /* calls of unreg in flight: a removal waits for them */
  hugepool_registrar r;
  hugepool_registrar_stats st;
} registrar_slot;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static registrar_slot slots[HP_REGISTRARS];
static reg_entry *table; /* sorted by addr; os_map_meta memory */
static size_t n_entries, cap_entries;
/* Entries in the table: registrar_release() reads it without the lock, so
 * a process that registers nothing pays one relaxed load per unmap. */
static atomic_size_t n_published;

static bool valid_id(int id) { return id >= 1 && id <= HP_REGISTRARS && slots[id - 1].used; }

/* The index of the first entry at or after addr. */
static size_t lower_bound(uintptr_t addr) {
  size_t lo = 0, hi = n_entries;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if ((uintptr_t)table[mid].addr < addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static reg_entry *find_exact(uintptr_t addr) {
  size_t i = lower_bound(addr);
  return i < n_entries && (uintptr_t)table[i].addr == addr ? &table[i] : NULL;
}

/* The entry whose mapping holds p. */
static reg_entry *find_holding(uintptr_t p) {
  size_t i = lower_bound(p + 1); /* first entry starting after p */
  if (i == 0) return NULL;
  reg_entry *e = &table[i - 1];
  return p - (uintptr_t)e->addr < e->size ? e : NULL;
}

/* Room for one more entry: the table moves to a mapping twice as large. */
static int grow_table(void) {
  if (n_entries < cap_entries) return 0;
  size_t cap = cap_entries ? cap_entries * 2 : 256;
  reg_entry *bigger = os_map_meta(cap * sizeof(reg_entry));
  if (!bigger) return ENOMEM;
  if (n_entries) memcpy(bigger, table, n_entries * sizeof(reg_entry));
  reg_entry *old = table;
  size_t old_cap = cap_entries;
  table = bigger; /* before the capacity: a forked child may read them between */
  cap_entries = cap;
  if (old) os_unmap_meta(old, old_cap * sizeof(reg_entry));
  return 0;
}

static reg_entry *insert(char *addr, size_t size) {
  if (grow_table() != 0) return NULL;
  size_t i = lower_bound((uintptr_t)addr);
  memmove(&table[i + 1], &table[i], (n_entries - i) * sizeof(reg_entry));
  memset(&table[i], 0, sizeof(reg_entry));
  table[i].addr = addr;
  table[i].size = size;
  n_entries++;
  atomic_store_explicit(&n_published, n_entries, memory_order_relaxed);
  return &table[i];
}

static void erase(reg_entry *e) {
  size_t i = (size_t)(e - table);
  memmove(&table[i], &table[i + 1], (n_entries - i - 1) * sizeof(reg_entry));
  n_entries--;
  atomic_store_explicit(&n_published, n_entries, memory_order_relaxed);
}

bool registrar_known(int id) {
  pthread_mutex_lock(&reg_lock);
  bool known = valid_id(id) && !slots[id - 1].removing;
  pthread_mutex_unlock(&reg_lock);
  return known;
}

int registrar_add(const hugepool_registrar *r) {
  if (!r || !r->reg || !r->unreg) {
    errno = EINVAL;
    return -1;
  }
  pthread_mutex_lock(&reg_lock);
  int id = -1;
  for (int i = 0; i < HP_REGISTRARS && id < 0; i++)
    if (!slots[i].used) id = i + 1;
  if (id > 0) slots[id - 1] = (registrar_slot){.used = true, .r = *r};
  pthread_mutex_unlock(&reg_lock);
  if (id < 0) errno = ENOSPC;
  return id;
}

/* Unlocks, lets the thread that marked an entry busy finish, locks again. */
static void wait_busy(void) {
  pthread_mutex_unlock(&reg_lock);
  sched_yield();
  pthread_mutex_lock(&reg_lock);
}

/* Calls unreg for the registrations of one mapping, taken off the table
 * (done: their ids' bits), with the lock dropped. */
static void unregister_all(const reg_entry *copy, uint32_t done) {
  for (int i = 0; i < HP_REGISTRARS; i++) {
    if (!(done & (1u << i))) continue;
    hugepool_registrar r = slots[i].r;
    slots[i].unregistering++; /* the slot stays until we are done */
    pthread_mutex_unlock(&reg_lock);
    int rc = r.unreg(r.context, copy->addr, copy->size, copy->handle[i]);
    if (rc != 0)
      hp_warn("%s: unregistering %zu MiB at %p failed (%s)", r.name ? r.name : "registrar", copy->size >> 20,
              (void *)copy->addr, strerror(rc));
    pthread_mutex_lock(&reg_lock);
    slots[i].unregistering--;
    slots[i].st.unregistrations++;
    slots[i].st.bytes_registered -= copy->size;
    slots[i].st.buffers_registered--;
  }
}

/* The registration of *e with id: the call runs with the lock dropped and
 * the entry marked busy.  Called and returns with the lock held. */
static int register_entry(reg_entry *e, int id) {
  uint32_t bit = 1u << (id - 1);
  char *addr = e->addr;
  size_t size = e->size;
  e->busy |= bit;
  hugepool_registrar r = slots[id - 1].r;
  void *handle = NULL;
  pthread_mutex_unlock(&reg_lock);
  hp_prefault_parallel(addr, size); /* pinning faults the pages one by one: fault them in parallel first */
  int rc = r.reg(r.context, addr, size, &handle);
  pthread_mutex_lock(&reg_lock);
  e = find_exact((uintptr_t)addr); /* the table may have moved meanwhile; our busy bit kept the entry */
  e->busy &= ~bit;
  registrar_slot *s = &slots[id - 1];
  if (rc != 0) {
    s->st.failures++;
    if (!e->done && !e->busy) erase(e);
    return rc;
  }
  e->done |= bit;
  e->handle[id - 1] = handle;
  s->st.registrations++;
  s->st.bytes_registered += size;
  s->st.buffers_registered++;
  return 0;
}

int registrar_ensure(void *buffer, size_t size, int id) {
  char *addr = buffer;
  pthread_mutex_lock(&reg_lock);
  int rc = 0;
  for (;;) {
    if (!valid_id(id) || slots[id - 1].removing) {
      rc = EINVAL;
      break;
    }
    uint32_t bit = 1u << (id - 1);
    reg_entry *e = find_exact((uintptr_t)addr);
    if (e && e->size != size) { /* never: entries go before their mappings change */
      rc = EINVAL;
      break;
    }
    if (e && (e->done & bit)) {
      slots[id - 1].st.registered_hits++;
      break;
    }
    if (e && (e->busy & bit)) {
      wait_busy();
      continue;
    }
    if (!e) e = insert(addr, size);
    rc = e ? register_entry(e, id) : ENOMEM;
    break;
  }
  pthread_mutex_unlock(&reg_lock);
  return rc;
}

void registrar_release(void *addr, size_t size) {
  if (atomic_load_explicit(&n_published, memory_order_relaxed) == 0) return;
  uintptr_t lo = (uintptr_t)addr, hi = lo + size;
  pthread_mutex_lock(&reg_lock);
  for (;;) {
    size_t i = lower_bound(lo);
    if (i >= n_entries || (uintptr_t)table[i].addr >= hi) break;
    if (table[i].busy) { /* registered by another thread while it is being freed: a program error */
      wait_busy();
      continue;
    }
    reg_entry copy = table[i];
    erase(&table[i]);
    unregister_all(&copy, copy.done);
  }
  pthread_mutex_unlock(&reg_lock);
}

bool registrar_holds(const void *addr, size_t size) {
  if (atomic_load_explicit(&n_published, memory_order_relaxed) == 0) return false;
  uintptr_t lo = (uintptr_t)addr, hi = lo + size;
  pthread_mutex_lock(&reg_lock);
  size_t i = lower_bound(lo);
  bool held = i < n_entries && (uintptr_t)table[i].addr < hi;
  pthread_mutex_unlock(&reg_lock);
  return held;
}

/* One mapping registered with id, taken off the table for its removal:
 * true and *copy; false if none is left (*pending: some are busy). */
static bool take_one_of(int id, reg_entry *copy, bool *pending) {
  uint32_t bit = 1u << (id - 1);
  *pending = false;
  for (size_t i = 0; i < n_entries; i++) {
    if (table[i].busy & bit) *pending = true;
    if (!(table[i].done & bit)) continue;
    *copy = table[i];
    table[i].done &= ~bit;
    if (!table[i].done && !table[i].busy) erase(&table[i]);
    return true;
  }
  return false;
}

int registrar_remove(int id) {
  pthread_mutex_lock(&reg_lock);
  if (!valid_id(id) || slots[id - 1].removing) {
    pthread_mutex_unlock(&reg_lock);
    errno = EINVAL;
    return -1;
  }
  slots[id - 1].removing = true; /* no new registration with it from now */
  reg_entry copy;
  bool pending = true;
  while (pending) {
    while (take_one_of(id, &copy, &pending)) unregister_all(&copy, 1u << (id - 1));
    pending = pending || slots[id - 1].unregistering > 0;
    if (pending) wait_busy();
  }
  slots[id - 1] = (registrar_slot){0};
  pthread_mutex_unlock(&reg_lock);
  return 0;
}

bool registrar_lookup(const void *p, int id, void **base, size_t *size, void **handle) {
  if (atomic_load_explicit(&n_published, memory_order_relaxed) == 0) return false;
  pthread_mutex_lock(&reg_lock);
  reg_entry *e = id >= 1 && id <= HP_REGISTRARS ? find_holding((uintptr_t)p) : NULL;
  bool found = e && (e->done & (1u << (id - 1)));
  if (found && base) *base = e->addr;
  if (found && size) *size = e->size;
  if (found && handle) *handle = e->handle[id - 1];
  pthread_mutex_unlock(&reg_lock);
  return found;
}

int registrar_stats(int id, hugepool_registrar_stats *out) {
  pthread_mutex_lock(&reg_lock);
  bool ok = valid_id(id);
  if (ok) *out = slots[id - 1].st;
  pthread_mutex_unlock(&reg_lock);
  if (!ok) errno = EINVAL;
  return ok ? 0 : -1;
}

void registrar_child_forget(void) {
  /* The only thread of the child: a lock held by a parent thread that is
   * gone would never be released, and the table it was changing is
   * dropped whole (its memory stays mapped, unused). */
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  memcpy(&reg_lock, &fresh, sizeof(fresh));
  memset(slots, 0, sizeof(slots));
  table = NULL;
  n_entries = cap_entries = 0;
  atomic_store_explicit(&n_published, 0, memory_order_relaxed);
}
