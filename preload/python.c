/* SPDX-License-Identifier: BSD-3-Clause */
/* CPython's object arenas on hugetlb pages (--small-heap).
 *
 * CPython's own allocator, pymalloc, serves every object of up to 512 bytes
 * from arenas (1 MiB on 64-bit builds) that it maps itself with mmap and
 * gives back with munmap: a malloc interposer never sees them, so under the
 * small heap alone 12% of a dict-heavy program's heap was on huge pages
 * (bench/RESULTS.md section 20), and PYTHONMALLOC=malloc, which sends every
 * object through malloc, cost 1.26-1.30x the time.  CPython lets its
 * embedder replace the arena allocator (PyObject_SetArenaAllocator, in the
 * C API since 3.4): the preload's constructor, when the program defines
 * that name (a python executable, or a program linked to libpython), hands
 * it an allocator of its own before the interpreter starts, and so before
 * its first arena.
 *
 * The arenas are slots of 2 MB hugepool buffers (one 2 MB page each, from
 * the core's cache when it has one): two 1 MiB arenas share a page, and a
 * page goes back to the core when both are free.  The small heap's blocks
 * would not do: each of its 2 MB chunks gives up a 4 KB page to its map, so
 * a 1 MiB arena took a chunk of its own and the heap held twice the
 * program's arenas (646 MiB of hugetlb pages for 309 MiB of arenas).  An
 * arena size that is not a power of two from 64 KiB to 1 MiB (no CPython
 * build uses one) stays with CPython's own allocator.
 *
 * An arena the pool cannot serve comes from CPython's own allocator (mmap),
 * and each free goes to whichever allocator made the arena, so arenas made
 * before the switch (a program that started its interpreter in an earlier
 * constructor) go back to munmap.
 *
 * pymalloc calls its arena allocator with the GIL held, so the lock below
 * is never held by another thread when a Python program forks. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "hooks.h"
#include "preload.h"

/* CPython's PyObjectArenaAllocator (Include/cpython/objimpl.h). */
typedef struct {
  void *ctx;
  void *(*alloc)(void *ctx, size_t size);
  void (*free)(void *ctx, void *ptr, size_t size);
} py_arena_allocator;

#define BLOCK ((uintptr_t)2 << 20)
#define SLOT_MIN ((size_t)64 << 10)
#define SLOT_MAX ((size_t)1 << 20)

static py_arena_allocator cpython_own; /* CPython's mmap allocator, as we found it */
static atomic_bool on;
static struct {
  _Alignas(64) _Atomic uint64_t served; /* arenas on hugetlb pages */
  _Atomic uint64_t fallback;            /* arenas CPython's mmap served: the pool was short */
} counts;

/* ---- blocks: 2 MB hugepool buffers cut into equal slots ---- */

/* A block's address and the slots in use (bit i: slot i), in an open-
 * addressing table keyed by the address (linear probing, deletion by
 * shifting back); and a stack of blocks that may have a free slot, checked
 * against the table when popped. */
typedef struct {
  char *base; /* NULL: empty */
  uint32_t used;
} block_entry;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static block_entry *table;
static size_t table_cap, table_n; /* capacity a power of two, kept at most half full */
static char **partial;
static size_t partial_n, partial_cap;
static size_t slot_size; /* the first arena size served; others stay CPython's */
/* A short pool is asked again at most once a millisecond (a refused block
 * costs the core a failed mmap); blocks that are not 2 MB hugetlb pages
 * (HUGEPOOL_PAGE_SIZE=1G: a 1 GB page per block; the thp and small
 * policies) are never used: CPython keeps its own arenas. */
#define RETRY_NS 1000000LL
static long long retry_at;
static bool blocks_off;

static size_t slot_of(const char *base) {
  return (size_t)(((uintptr_t)base / BLOCK) * 0x9E3779B97F4A7C15ULL) & (table_cap - 1);
}

static block_entry *table_find(const char *base) {
  if (table_cap == 0) return NULL;
  for (size_t i = slot_of(base);; i = (i + 1) & (table_cap - 1)) {
    if (table[i].base == base) return &table[i];
    if (table[i].base == NULL) return NULL;
  }
}

static void table_put(block_entry e) {
  size_t i = slot_of(e.base);
  while (table[i].base != NULL) i = (i + 1) & (table_cap - 1);
  table[i] = e;
  table_n++;
}

/* Room for one more entry, the table at most half full; false: no memory. */
static bool table_room(void) {
  if ((table_n + 1) * 2 <= table_cap) return true;
  size_t old_cap = table_cap, cap = old_cap ? old_cap * 2 : 64;
  block_entry *old = table, *fresh = __libc_calloc(cap, sizeof(*fresh));
  if (fresh == NULL) return false;
  table = fresh, table_cap = cap, table_n = 0;
  for (size_t i = 0; i < old_cap; i++)
    if (old[i].base != NULL) table_put(old[i]);
  __libc_free(old);
  return true;
}

/* Removes an entry, shifting back the ones its probe sequence passed. */
static void table_remove(block_entry *e) {
  size_t hole = (size_t)(e - table);
  for (size_t i = (hole + 1) & (table_cap - 1); table[i].base != NULL; i = (i + 1) & (table_cap - 1)) {
    size_t home = slot_of(table[i].base);
    /* Entry i may fill the hole unless its home lies cyclically in (hole, i]. */
    bool stays = hole <= i ? (hole < home && home <= i) : (hole < home || home <= i);
    if (!stays) {
      table[hole] = table[i];
      hole = i;
    }
  }
  table[hole].base = NULL;
  table_n--;
}

static bool partial_push(char *base) {
  if (partial_n == partial_cap) {
    size_t cap = partial_cap ? partial_cap * 2 : 64;
    char **fresh = __libc_realloc(partial, cap * sizeof(*fresh));
    if (fresh == NULL) return false;
    partial = fresh, partial_cap = cap;
  }
  partial[partial_n++] = base;
  return true;
}

static uint32_t all_slots(void) { return (uint32_t)((1ULL << (BLOCK / slot_size)) - 1); }

/* A free slot of a block already held, or of a new block; NULL: the pool
 * is short (or no memory for the table). */
static void *block_take(void) {
  while (partial_n > 0) {
    block_entry *e = table_find(partial[partial_n - 1]);
    if (e == NULL || e->used == all_slots()) { /* released or filled since: a stale entry */
      partial_n--;
      continue;
    }
    unsigned slot = (unsigned)__builtin_ctz(~e->used);
    e->used |= 1u << slot;
    if (e->used == all_slots()) partial_n--;
    return e->base + slot * slot_size;
  }
  if (blocks_off || !table_room()) return NULL;
  long long now = os_coarse_ns();
  if (now < retry_at) return NULL;
  void *p = hugepool_alloc(BLOCK);
  if (p == NULL) { /* the pool is short: CPython maps its arenas itself for a millisecond */
    retry_at = now + RETRY_NS;
    return NULL;
  }
  if (hugepool_kind_of(p) != HUGEPOOL_KIND_HUGE_2M) { /* 1 GB pages, or the thp / small policy: not for arenas */
    hugepool_free(p);
    blocks_off = true;
    return NULL;
  }
  char *base = p;
  table_put((block_entry){base, 1});
  /* No memory for the stack: the block's other slots stay unused until a
   * free of this one puts it back. */
  if (all_slots() != 1) (void)partial_push(base);
  return p;
}

/* True if ptr was a slot of a block (now free again). */
static bool block_give(void *ptr) {
  char *base = (char *)ptr - ((uintptr_t)ptr & (BLOCK - 1));
  block_entry *e = table_find(base);
  if (e == NULL) return false;
  uint32_t bit = 1u << ((size_t)((char *)ptr - base) / slot_size);
  bool was_full = e->used == all_slots();
  e->used &= ~bit;
  if (e->used == 0) {
    table_remove(e);
    hugepool_free(base); /* to the core's cache: the next block takes no system call */
  } else if (was_full) {
    (void)partial_push(base); /* no memory: the slot stays unused until its block is freed */
  }
  return true;
}

/* ---- the allocator CPython calls ---- */

static bool block_size_ok(size_t size) {
  return size >= SLOT_MIN && size <= SLOT_MAX && (size & (size - 1)) == 0 && (slot_size == 0 || size == slot_size);
}

static void *arena_alloc(void *ctx, size_t size) {
  (void)ctx;
  void *p = NULL;
  pthread_mutex_lock(&lock);
  bool blockable = block_size_ok(size);
  if (blockable) {
    slot_size = size;
    p = block_take();
  }
  pthread_mutex_unlock(&lock);
  if (!blockable) return cpython_own.alloc(cpython_own.ctx, size); /* a size no CPython build uses */
  if (HPL_LIKELY(p != NULL)) {
    atomic_fetch_add_explicit(&counts.served, 1, memory_order_relaxed);
    return p;
  }
  atomic_fetch_add_explicit(&counts.fallback, 1, memory_order_relaxed);
  hpl_say_small_shortage();
  if (hp_trace_on())
    hp_trace(HP_TRACE_FALLBACK,
             "a %zu-byte CPython arena to CPython's own mmap: the pool is short (%ld free 2 MB pages)", size,
             hugepool_pool_free_pages(-1));
  return cpython_own.alloc(cpython_own.ctx, size);
}

static void arena_free(void *ctx, void *ptr, size_t size) {
  (void)ctx;
  pthread_mutex_lock(&lock);
  bool ours = block_give(ptr);
  pthread_mutex_unlock(&lock);
  if (!ours) cpython_own.free(cpython_own.ctx, ptr, size);
}

typedef void (*arena_call)(py_arena_allocator *);

/* CPython's function of that name in the program, or NULL. */
static arena_call cpython_function(const char *name) {
  void *sym = hp_dlsym(RTLD_DEFAULT, name);
  arena_call f = NULL;
  if (sym != NULL) memcpy(&f, &sym, sizeof(f)); /* dlsym's object pointer as the function it is */
  return f;
}

void hpl_python_arenas(void) {
  arena_call get = cpython_function("PyObject_GetArenaAllocator");
  arena_call set = cpython_function("PyObject_SetArenaAllocator");
  if (get == NULL || set == NULL) return; /* not a CPython process */
  get(&cpython_own);
  if (cpython_own.alloc == NULL || cpython_own.free == NULL) return;
  py_arena_allocator ours = {NULL, arena_alloc, arena_free};
  set(&ours);
  atomic_store(&on, true);
  if (hp_trace_on()) hp_trace(HP_TRACE_MAP, "CPython's object arenas (pymalloc) go on 2 MB hugetlb pages");
}

bool hpl_python_counts(uint64_t *served, uint64_t *fallback) {
  *served = atomic_load_explicit(&counts.served, memory_order_relaxed);
  *fallback = atomic_load_explicit(&counts.fallback, memory_order_relaxed);
  return atomic_load_explicit(&on, memory_order_relaxed);
}
