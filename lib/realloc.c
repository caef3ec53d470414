/* SPDX-License-Identifier: BSD-3-Clause */
/* Resizing a live buffer (hugepool_realloc, api.c): growth without copying.
 *
 * The rules this file keeps, and why:
 *  1. Growth maps only the pages added, as a mapping of their own, reserved
 *     (no MAP_NORESERVE): the kernel promises exactly (new - old) pages, so
 *     a shortage is ENOMEM before anything has changed, and a pool with
 *     exactly that many free pages is enough.  (Mapping the whole new size
 *     and moving the old pages into its front reserves all `new` pages
 *     while the old ones are still held: measured on Linux 6.18, that mmap
 *     fails with ENOMEM when exactly (new - old) pages are free.)
 *  2. The added pages then move into place with mremap(MREMAP_FIXED): page-
 *     table entries move, bytes never do (hugetlb mremap: Linux 5.16).  The
 *     place is address space kept right after the buffer (its headroom:
 *     PROT_NONE, no memory, no pool page).  When the headroom is too short,
 *     the buffer moves, mapping by mapping, to the front of a new range of
 *     max(3 x new, new + 64 MiB): a buffer grown in small steps moves
 *     O(log n) times, and its bytes never.  The move cannot be left half
 *     done: os_move() brings it back or completes it, whatever the kernel
 *     answers (lib/os.c), so a failed growth leaves the buffer as it was.
 *  3. Shrinking turns the pages past the new end into headroom: they go back
 *     to the pool at once, and the range stays ours for the next growth.
 *  4. The block is marked as being resized for the whole operation, so a
 *     concurrent free or resize of the same pointer (a program error) is
 *     refused instead of acting on a half-moved mapping; fork() waits for
 *     resizes in flight, so no child inherits a half-moved buffer.
 *  5. A resize that keeps the block's pages (the common step of a buffer
 *     grown a few bytes at a time) changes no mapping: it records the new
 *     requested size in one visit to the block's registry entry (its
 *     statistics: base_stats_requested_moved(), under the same stripe lock, which
 *     fork() holds too), and nothing more: no hp_lock, no resize mark, no
 *     resize gate, no second visit.
 *  6. A shortage the cache's pages could cover evicts them and tries once
 *     more.  Then, with policy strict, the answer is NULL / ENOMEM and the old
 *     buffer is untouched; with policy thp or small the contents are copied
 *     into a new (fallback) buffer, as the policy allows for any allocation.
 *
 * The core is reached through live_begin_resize() and live_end_resize()
 * (live.h: the registry of live blocks), release.h (the caches' pages, when
 * the pool is short), split.h and share.h (what follows the block), the
 * statistics under hp_lock, hp_allocate() and alloc_free() (alloc.h), and
 * the OS layer for every system call.  The caller has started the core. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "realloc.h"

#include "alloc.h"
#include "embed.h"
#include "live.h"
#include "registrar.h"
#include "registry.h"
#include "release.h"
#include "share.h"
#include "split.h"

#define HP_HEADROOM_MIN ((size_t)64 << 20)

/* The resize gate: fork() waits for the resizes in flight and holds new
 * ones back until it is done, so a child never inherits a half-moved
 * mapping or a block marked `resizing`.
 *  - A resize enters (resize_enter) unless a fork() is waiting (writer
 *    preference: a fork() waiting does not starve behind new resizes), and
 *    leaves (resize_leave) when its mapping is whole again.
 *  - fork(): the core's prepare handler (atfork.c), before any other lock,
 *    takes the gate, waits until no resize is in flight, and keeps the gate
 *    through the fork; the parent's and the child's handlers let it go.  A
 *    resize in flight can still take the core's locks to finish meanwhile.
 *  - A plain mutex held across fork() and unlocked in the child, like
 *    hp_lock, not a rwlock: glibc knows a write lock's owner by thread id,
 *    which is new in the child.  The child's condition variables are made
 *    fresh: the parent's other threads, which may have waited on them, do
 *    not exist there.
 * Initialised statically and taken by handlers the core installs at its
 * init, before the first resize can start. */
static pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_drained = PTHREAD_COND_INITIALIZER; /* fork(): no resize in flight */
static pthread_cond_t gate_open = PTHREAD_COND_INITIALIZER;    /* resizes: no fork() waiting */
static unsigned long resizes_in_flight;
static bool fork_waiting;

static void resize_enter(void) {
  pthread_mutex_lock(&gate);
  while (fork_waiting) pthread_cond_wait(&gate_open, &gate);
  resizes_in_flight++;
  pthread_mutex_unlock(&gate);
}

static void resize_leave(void) {
  pthread_mutex_lock(&gate);
  if (--resizes_in_flight == 0 && fork_waiting) pthread_cond_signal(&gate_drained);
  pthread_mutex_unlock(&gate);
}

void realloc_fork_prepare(void) {
  pthread_mutex_lock(&gate);
  fork_waiting = true;
  while (resizes_in_flight > 0) pthread_cond_wait(&gate_drained, &gate);
}

void realloc_fork_parent(void) {
  fork_waiting = false;
  pthread_cond_broadcast(&gate_open);
  pthread_mutex_unlock(&gate);
}

void realloc_fork_child(void) {
  static const pthread_cond_t fresh = PTHREAD_COND_INITIALIZER;
  fork_waiting = false;
  memcpy(&gate_open, &fresh, sizeof fresh);
  memcpy(&gate_drained, &fresh, sizeof fresh);
  pthread_mutex_unlock(&gate);
}

/* ---- what a resize changes besides the mapping ---------------------------- */

typedef enum hp_resize_outcome {
  HP_RESIZE_KEPT,   /* the same pages (requested bytes may differ) */
  HP_RESIZE_GROWN,  /* pages added, none copied */
  HP_RESIZE_SHRUNK, /* pages given back */
  HP_RESIZE_FAILED  /* no change: counted as a failure */
} hp_resize_outcome;

/* Ends a resize begun on `was`: the block is now *now (its address may have
 * moved); its split pages, the process's share of the pool and the
 * statistics follow the change. */
static void end_resize(const hp_block *was, const hp_block *now, hp_resize_outcome outcome) {
  hp_block b = *now;
  live_end_resize(was, &b);
  split_resized(was->addr, was->size, b.addr, b.size); /* its 4 KB pages, if any, follow */
  size_t page = hp_page_of((hugepool_kind)b.kind);
  if (page && b.size != was->size) share_mapped(page, (long long)b.size - (long long)was->size);
  pthread_mutex_lock(&hp_lock);
  if (b.size > was->size) base_stats_mapped(b.size - was->size);
  if (b.size < was->size) base_stats_unmapped(was->size - b.size);
  /* Deltas: the thread caches hold part of these counters (tcache_sum_stats). */
  hp_stats.bytes_live += b.size - was->size;
  hp_stats.bytes_requested += b.requested - was->requested;
  hp_stats.bytes_slack += (b.size - b.requested) - (was->size - was->requested);
  if (outcome == HP_RESIZE_GROWN) hp_stats.realloc_grows++;
  if (outcome == HP_RESIZE_SHRUNK) hp_stats.realloc_shrinks++;
  if (outcome == HP_RESIZE_FAILED && !hp_embedding()->serves_refusals) hp_stats.failures++;
  pthread_mutex_unlock(&hp_lock);
}

/* Releases cached blocks of `kind` until `bytes` are back in the pool (or
 * the caches hold none), and waits for other threads' releases in flight. */
static void reclaim(uint32_t kind, size_t bytes) {
  release_for((hugepool_kind)kind, bytes); /* the shared cache, then the threads' */
  release_wait();                          /* other threads' lazy releases */
}

/* Counts a resize done by copying into a new buffer (the fallback). */
static void count_copy(void) {
  pthread_mutex_lock(&hp_lock);
  hp_stats.realloc_copies++;
  pthread_mutex_unlock(&hp_lock);
}

/* Maps `size` bytes like the block's own pages (kind, node), anywhere. */
static void *map_like(size_t size, const hp_block *b) {
  size_t page = hp_page_of((hugepool_kind)b->kind);
  bool huge = page != 0;
  void *p = huge ? os_map_huge(size, page) : os_map_anon(size, HP_2M, b->kind == HUGEPOOL_KIND_THP);
  if (!p || b->node == HUGEPOOL_ANY_NODE) return p;
  /* As at allocation: bound to the node and, for hugetlb, populated there,
   * so a shortage on the node is ENOMEM now and not SIGBUS later. */
  if (os_bind_node(p, size, b->node) != 0 || (huge && os_populate(p, size) != 0)) {
    int err = errno;
    os_unmap(p, size);
    errno = (err == EFAULT || err == ENOMEM) ? ENOMEM : err;
    return NULL;
  }
  return p;
}

/* Address space for a buffer of `size` bytes and room to grow. */
static void *reserve_for(size_t size, size_t unit, size_t *span) {
  size_t want = 0;
  if (size <= SIZE_MAX / 4)
    want = hp_round_up(size * 3 > size + HP_HEADROOM_MIN ? size * 3 : size + HP_HEADROOM_MIN, unit);
  void *region = want ? os_reserve(want, unit) : NULL;
  if (!region) { /* RLIMIT_AS, say: no headroom then */
    want = size;
    region = os_reserve(want, unit);
  }
  *span = want;
  return region;
}

/* Grows *b to new_size; on failure *b and its memory are as they were
 * (its headroom possibly given up). */
static int grow(hp_block *b, size_t new_size) {
  size_t added = new_size - b->size;
  alloc_give_back_idle(); /* a new mapping: idle cached pages go back first */
  void *fresh = map_like(added, b);
  if (!fresh && errno == ENOMEM && hp_page_of((hugepool_kind)b->kind)) {
    reclaim(b->kind, added); /* cached pages can make up the shortfall */
    fresh = map_like(added, b);
  }
  if (!fresh) {
    errno = ENOMEM;
    return -1;
  }
  if (b->headroom >= added) {
    char *end = (char *)b->addr + b->size;
    if (os_move_mapping(fresh, added, end) != 0) {
      int err = errno;
      os_unmap(fresh, added);
      b->headroom = 0; /* a kernel before 6.12 may have left a hole in it: give it up */
      errno = err;
      return -1;
    }
    b->size = new_size;
    b->headroom -= added;
    return 0;
  }
  /* Not enough room after the buffer: move it to a larger range.  The
   * added pages go to their place first, so if the buffer cannot follow,
   * dropping the new range undoes everything. */
  size_t span = 0;
  char *region = reserve_for(new_size, hp_unit_of((hugepool_kind)b->kind), &span);
  if (!region || os_move_mapping(fresh, added, region + b->size) != 0) {
    int err = errno;
    if (region) os_unmap(region, span);
    os_unmap(fresh, added);
    errno = err;
    return -1;
  }
  if (os_move(b->addr, b->size, region, hp_page_of((hugepool_kind)b->kind)) != 0) {
    /* The buffer is whole where it was; the front of the region is no
     * longer ours (os_move released it): drop the rest, added pages too. */
    int err = errno;
    os_unmap(region + b->size, span - b->size);
    errno = err;
    return -1;
  }
  if (b->headroom) os_unmap((char *)b->addr + b->size, b->headroom);
  b->addr = region;
  b->size = new_size;
  b->headroom = span - new_size;
  return 0;
}

/* Gives the pages past new_size back; the range becomes headroom.  If the
 * kernel refuses (no mapping left to split the buffer's with), the buffer
 * keeps its pages: still large enough, nothing lost. */
static bool shrink(hp_block *b, size_t new_size) {
  size_t cut = b->size - new_size;
  if (os_unmap_to_reserve((char *)b->addr + new_size, cut) != 0) return false;
  b->headroom += cut;
  b->size = new_size;
  return true;
}

/* The pool is short and the policy allows a fallback: copy into a new
 * buffer (which hp_allocate() puts on the fallback kind). */
static void *grow_by_copy(void *ptr, size_t old_size, size_t bytes) {
  bool fresh;
  void *to = hp_allocate(bytes, HUGEPOOL_ANY_NODE, &fresh);
  if (!to) return NULL;
  memcpy(to, ptr, old_size < bytes ? old_size : bytes);
  count_copy();
  (void)alloc_free(ptr, true, false);
  return to;
}

/* ---- the same pages: rule 5 ---------------------------------------------- */

/* Under the block's stripe lock: a block being resized is left to the
 * slow path (which refuses it), as is one whose page count would change. */
static int record_same_pages(hp_block *b, void *arg) {
  size_t bytes = *(const size_t *)arg;
  if (b->resizing || hp_round_up(bytes, hp_unit_of((hugepool_kind)b->kind)) != b->size) return -1;
  /* The same size: what the block asks for moves from slack to requested. */
  base_stats_requested_moved((uint64_t)bytes - b->requested);
  b->requested = bytes;
  return 0;
}

bool realloc_same_pages(void *ptr, size_t bytes) {
  int saved = errno;
  hp_block copy;
  bool done = registry_update(ptr, record_same_pages, &bytes, &copy) == 0;
  errno = saved; /* a pointer that is not a plain live block set it */
  return done;
}

void *realloc_resize(void *ptr, size_t bytes) {
  if (!ptr) {
    bool fresh;
    return hp_allocate(bytes, HUGEPOOL_ANY_NODE, &fresh);
  }
  if (bytes == 0) {
    (void)alloc_free(ptr, true, false);
    return NULL;
  }
  if (realloc_same_pages(ptr, bytes)) return ptr;
  int saved = errno;
  resize_enter();
  hp_block was;
  if (live_begin_resize(ptr, &was) != 0) {
    int err = errno;
    resize_leave();
    hp_warn("hugepool_realloc(%p): %s", ptr,
            err == EBUSY ? "another thread is resizing this buffer" : "not a live hugepool buffer");
    errno = err;
    return NULL;
  }
  hp_block now = was;
  size_t new_size = hp_round_up(bytes, hp_unit_of((hugepool_kind)was.kind));
  if (new_size != was.size) registrar_release(was.addr, was.size); /* its pages change */
  hp_resize_outcome outcome = HP_RESIZE_KEPT;
  int err = 0;
  if (new_size == 0) {
    err = ENOMEM;
    outcome = HP_RESIZE_FAILED;
  } else if (new_size > was.size) {
    if (grow(&now, new_size) == 0) {
      outcome = HP_RESIZE_GROWN;
    } else {
      err = errno ? errno : ENOMEM;
      outcome = HP_RESIZE_FAILED; /* `now` is `was`, less any headroom given up */
    }
  } else if (new_size < was.size && shrink(&now, new_size)) {
    outcome = HP_RESIZE_SHRUNK;
  }
  if (!err) now.requested = bytes;
  bool copy = err == ENOMEM && hp_page_of((hugepool_kind)was.kind) && hp_current_policy() != HUGEPOOL_POLICY_STRICT;
  end_resize(&was, &now, copy ? HP_RESIZE_KEPT : outcome);
  resize_leave();
  if (copy) return grow_by_copy(ptr, was.size, bytes);
  errno = err ? err : saved;
  return err ? NULL : now.addr;
}
