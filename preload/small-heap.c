/* The small heap (HUGEPOOL_SMALL_HEAP=1): small requests packed densely onto
 * hugetlb pages, so a whole heap can live on huge pages without rounding
 * each request up to 2 MB.
 *
 * Memory comes from hugepool in 2 MB chunks (hugetlb, 2 MB aligned).  A chunk
 * is 32 units of 64 KB; unit 0 holds the chunk's metadata, the others form
 * runs.  A run serves one size class (16 B .. 256 KB, four classes per
 * doubling above 128 B): one unit for classes up to 32 KB, enough units for
 * one object above that.  Freed objects go on their run's free list; an
 * empty run gives its units back to the chunk.  Chunks are kept for the
 * life of the process (they are few: the heap's peak, in 2 MB steps).
 *
 * Which pointers are ours: a bitmap with one bit per 2 MB of address space
 * (8 MB of virtual memory, touched only where chunks live), read without a
 * lock.  Each size class has its own mutex (its runs, their free lists);
 * one more guards the chunks' unit maps, taken only to start or retire a
 * run.  A run's class never changes while it holds a live object, so free()
 * can read it before locking.
 * Requests with an alignment above 16 bytes, larger than 256 KB, or made
 * when the pool is short go to glibc as usual. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "preload.h"

#define UNIT_SHIFT 16
#define UNIT ((size_t)1 << UNIT_SHIFT)
#define UNITS_PER_CHUNK 32
#define N_CLASSES 52
#define ADDR_BITS 47

typedef struct run {
  struct run *prev, *next; /* in the class's list of runs with free room */
  void *free_list;         /* freed objects, linked through their first word */
  uint32_t bump;           /* objects never handed out start here (offset) */
  uint16_t used, capacity; /* live objects, objects the run can hold */
  uint8_t cls, units, head;
} run;

typedef struct chunk {
  struct chunk *next;
  uint32_t free_units; /* bit i: unit i is free */
  run runs[UNITS_PER_CHUNK];
} chunk;

_Static_assert(sizeof(chunk) <= UNIT, "chunk metadata must fit in unit 0");

typedef struct {
  pthread_mutex_t lock;
  run *partial; /* runs with free room */
  uint64_t bytes, allocs;
  char pad[64];
} size_class;

static pthread_mutex_t chunk_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(uint64_t) *owner_bits; /* one bit per 2 MB of address space */
static chunk *chunks;                 /* chunk_lock */
static uint64_t n_chunks;             /* chunk_lock */
static size_class classes[N_CLASSES];

static size_t class_of(size_t n) {
  if (n <= 128) return (n + 15) / 16 - 1;
  unsigned b = 63u - (unsigned)__builtin_clzll((unsigned long long)(n - 1));
  return 8 + (b - 7) * 4 + ((n - 1) >> (b - 2)) - 4;
}

static size_t class_size(size_t cls) {
  if (cls < 8) return (cls + 1) * 16;
  size_t k = cls - 8, b = 7 + k / 4;
  return (4 + k % 4 + 1) << (b - 2);
}

static size_t units_for(size_t size) { return size <= UNIT / 2 ? 1 : (size + UNIT - 1) / UNIT; }

static void mark_owner(const void *base) {
  uintptr_t bit = (uintptr_t)base >> 21;
  atomic_fetch_or(&owner_bits[bit / 64], (uint64_t)1 << (bit % 64));
}

bool sh_owns(const void *ptr) {
  uintptr_t bit = (uintptr_t)ptr >> 21;
  if (!owner_bits || bit >= ((uintptr_t)1 << (ADDR_BITS - 21))) return false;
  return (atomic_load_explicit(&owner_bits[bit / 64], memory_order_acquire) >> (bit % 64)) & 1;
}

static void lock_prepare(void) {
  for (size_t i = 0; i < N_CLASSES; i++) pthread_mutex_lock(&classes[i].lock);
  pthread_mutex_lock(&chunk_lock);
}
static void unlock_after(void) {
  pthread_mutex_unlock(&chunk_lock);
  for (size_t i = N_CLASSES; i-- > 0;) pthread_mutex_unlock(&classes[i].lock);
}

int sh_init(void) {
  size_t bytes = ((size_t)1 << (ADDR_BITS - 21)) / 8;
  void *bits = os_map_sparse(bytes);
  if (!bits) return -1;
  owner_bits = bits;
  for (size_t i = 0; i < N_CLASSES; i++) pthread_mutex_init(&classes[i].lock, NULL);
  pthread_atfork(lock_prepare, unlock_after, unlock_after);
  return 0;
}

static chunk *chunk_of(const void *p) { return (chunk *)((char *)p - ((uintptr_t)p & (HPL_2M - 1))); }

static void list_push(run **head, run *r) {
  r->prev = NULL;
  r->next = *head;
  if (*head) (*head)->prev = r;
  *head = r;
}

static void list_remove(run **head, run *r) {
  if (r->prev) r->prev->next = r->next;
  else *head = r->next;
  if (r->next) r->next->prev = r->prev;
  r->prev = r->next = NULL;
}

/* First fit of `units` contiguous free units in c; -1 if none. */
static int find_units(const chunk *c, size_t units) {
  uint32_t want = units >= 32 ? ~0u : ((1u << units) - 1);
  for (int i = 1; i + (int)units <= UNITS_PER_CHUNK; i++) {
    if (((c->free_units >> i) & want) == want) return i;
  }
  return -1;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO: no system call */
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* After a shortage the pool is looked at again at most this often; small
 * requests go to glibc meanwhile.  Each look is one read of the pool's free
 * count, so a short pool costs small requests almost nothing, and pages
 * reserved later are used within a millisecond. */
#define SH_RETRY_NS 1000000u

/* The caller holds chunk_lock. */
static chunk *new_chunk(void) {
  static uint64_t retry_at; /* 0: no shortage seen */
  if (retry_at) {
    uint64_t now = now_ns();
    if (now < retry_at) return NULL;
    if (hugepool_pool_free_pages(HUGEPOOL_ANY_NODE) <= 0) {
      retry_at = now + SH_RETRY_NS;
      return NULL;
    }
  }
  chunk *c = hugepool_alloc(HPL_2M);
  if (!c || hugepool_kind_of(c) != HUGEPOOL_KIND_HUGE_2M) {
    if (c) hugepool_free(c); /* a THP / 4 KB fallback (HUGEPOOL_POLICY=thp|small): not for us */
    retry_at = now_ns() + SH_RETRY_NS;
    return NULL;
  }
  retry_at = 0;
  memset(c, 0, sizeof(*c));
  c->free_units = ~1u; /* unit 0 is this header */
  c->next = chunks;
  chunks = c;
  n_chunks++;
  mark_owner(c);
  return c;
}

/* The caller holds the class's lock. */
static run *new_run(size_t cls) {
  size_t size = class_size(cls), units = units_for(size);
  chunk *c;
  int at = -1;
  pthread_mutex_lock(&chunk_lock);
  for (c = chunks; c; c = c->next) {
    if ((at = find_units(c, units)) >= 0) break;
  }
  if (!c) {
    if (!(c = new_chunk())) {
      pthread_mutex_unlock(&chunk_lock);
      return NULL;
    }
    at = find_units(c, units);
  }
  if (at < 0) { /* cannot happen: a new chunk has room for any class */
    pthread_mutex_unlock(&chunk_lock);
    return NULL;
  }
  for (size_t i = 0; i < units; i++) {
    c->free_units &= ~(1u << (at + (int)i));
    c->runs[at + (int)i].head = (uint8_t)at;
  }
  pthread_mutex_unlock(&chunk_lock);
  run *r = &c->runs[at];
  r->free_list = NULL;
  r->bump = 0;
  r->used = 0;
  r->capacity = (uint16_t)(units * UNIT / size);
  r->cls = (uint8_t)cls;
  r->units = (uint8_t)units;
  list_push(&classes[cls].partial, r);
  return r;
}

static char *run_base(run *r) {
  chunk *c = chunk_of(r);
  return (char *)c + (size_t)(r - c->runs) * UNIT;
}

void *sh_malloc(size_t size) {
  if (size == 0 || size > HPL_SMALL_MAX) return NULL;
  size_t cls = class_of(size);
  size_class *k = &classes[cls];
  pthread_mutex_lock(&k->lock);
  run *r = k->partial;
  if (!r && !(r = new_run(cls))) {
    pthread_mutex_unlock(&k->lock);
    return NULL;
  }
  void *p;
  if (r->free_list) {
    p = r->free_list;
    r->free_list = *(void **)p;
  } else {
    p = run_base(r) + r->bump;
    r->bump += (uint32_t)class_size(cls);
  }
  if (++r->used == r->capacity) list_remove(&k->partial, r);
  k->bytes += class_size(cls);
  k->allocs++;
  pthread_mutex_unlock(&k->lock);
  return p;
}

static run *run_of(const void *p) {
  chunk *c = chunk_of(p);
  size_t unit = ((uintptr_t)p - (uintptr_t)c) >> UNIT_SHIFT;
  return &c->runs[c->runs[unit].head];
}

void sh_free(void *ptr) {
  run *r = run_of(ptr);
  size_t cls = r->cls; /* stable: the run holds this live object */
  size_class *k = &classes[cls];
  pthread_mutex_lock(&k->lock);
  bool was_full = r->used == r->capacity;
  *(void **)ptr = r->free_list;
  r->free_list = ptr;
  r->used--;
  k->bytes -= class_size(cls);
  if (r->used == 0) { /* give the units back to the chunk */
    if (!was_full) list_remove(&k->partial, r);
    chunk *c = chunk_of(ptr);
    size_t at = (size_t)(r - c->runs);
    pthread_mutex_lock(&chunk_lock);
    for (size_t i = 0; i < r->units; i++) c->free_units |= 1u << (at + i);
    pthread_mutex_unlock(&chunk_lock);
  } else if (was_full) {
    list_push(&k->partial, r);
  }
  pthread_mutex_unlock(&k->lock);
}

size_t sh_usable_size(const void *ptr) { return class_size(run_of(ptr)->cls); }

void sh_stats(uint64_t *n_chunks_out, uint64_t *bytes_out, uint64_t *allocs_out) {
  uint64_t bytes = 0, allocs = 0;
  for (size_t i = 0; i < N_CLASSES; i++) {
    pthread_mutex_lock(&classes[i].lock);
    bytes += classes[i].bytes;
    allocs += classes[i].allocs;
    pthread_mutex_unlock(&classes[i].lock);
  }
  pthread_mutex_lock(&chunk_lock);
  *n_chunks_out = n_chunks;
  pthread_mutex_unlock(&chunk_lock);
  *bytes_out = bytes;
  *allocs_out = allocs;
}
