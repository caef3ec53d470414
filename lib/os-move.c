/* SPDX-License-Identifier: BSD-3-Clause */
/* The OS layer, continued: moving a buffer's pages to another address
 * (realloc's growth), one mapping or several, never leaving it in two
 * parts; moving a hugetlb buffer onto 4 KB pages at the same address
 * (fork's child); and the fault injection its tests use.  Same contract as os.c
 * (os.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "os-kernel.h"
#include "os.h"

/* ---- fault injection for the tests ------------------------------------------
 * Compiled in always, set only through os_inject_faults(), a hidden symbol:
 * the tests link libhugepool.a and reach it; neither libhugepool.so nor the
 * preload exports it, and no environment variable turns it on.  Off (the
 * usual case), it costs one relaxed atomic load per mremap. */
static struct {
  _Atomic unsigned ops;
  _Atomic long seen, first;
  _Atomic uint64_t mask;
  _Atomic int err;
} inject;

void os_inject_faults(unsigned ops, long first, uint64_t mask, int err) {
  atomic_store(&inject.ops, 0u);
  atomic_store(&inject.seen, 0L);
  atomic_store(&inject.first, first);
  atomic_store(&inject.mask, mask);
  atomic_store(&inject.err, err);
  atomic_store(&inject.ops, ops);
}

long os_inject_seen(void) { return atomic_load(&inject.seen); }

/* Whether this call of kind `op` is one the test asked to fail (errno set). */
static bool injected(unsigned op) {
  if (!(atomic_load_explicit(&inject.ops, memory_order_relaxed) & op)) return false;
  long n = atomic_fetch_add(&inject.seen, 1) + 1, first = atomic_load(&inject.first);
  if (first <= 0 || n < first || n - first >= 64 || !((atomic_load(&inject.mask) >> (n - first)) & 1)) return false;
  errno = atomic_load(&inject.err);
  return true;
}

static bool move_range(void *from, size_t size, void *to) {
  if (injected(HP_OS_FAULT_MREMAP)) return false;
  /* libc: seen by registration hooks (a buffer's pages move away). */
  return mremap(from, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, to) != MAP_FAILED;
}

int os_move_mapping(void *from, size_t size, void *to) { return move_range(from, size, to) ? 0 : -1; }

/* ---- moving a buffer made of several mappings -------------------------------
 * A grown hugetlb buffer is several mappings (the kernel never merges two
 * hugetlb mappings), and kernels before 6.17 move one mapping per mremap;
 * worse, they unmap the destination before refusing a range of several.  So
 * the pieces are listed first, from /proc/self/maps, and each mremap moves
 * exactly one.  Such a move is not atomic, and the rules below make it safe:
 *  1. Pieces move in address order, forward (to `to`) or back (to `from`);
 *     so at any time pieces [0, at) are at `to` and [at, n) at `from`.
 *  2. The slot a piece leaves is taken back at once as reserved address
 *     space (PROT_NONE, MAP_FIXED_NOREPLACE): the way back stays ours, and
 *     another thread's mapping is never moved over.  If another thread's
 *     mmap got there first (the window between the two calls), that side is
 *     lost and the move only goes the other way from then on.
 *  3. When a piece cannot move forward, the pieces already moved go back.
 *     When neither way works, the piece is copied into new pages mapped at
 *     its slot (MAP_FIXED over our own reservation: no window), hugetlb if
 *     the pool has them, else 4 KB pages, and the move goes on.
 *  4. When the kernel refuses everything, the move waits (1 ms, doubling to
 *     100 ms) and tries again, with one warning: a buffer is never left in
 *     two parts, and the process is never aborted. */
typedef uintptr_t hp_piece[2];

typedef struct {
  char *from, *to;
  hp_piece *piece; /* offsets from `from`, in address order */
  size_t n, at;
  size_t page_size;        /* of the pieces: 0 for 4 KB pages */
  bool from_lost, to_lost; /* a slot on that side was taken by another mapping */
  size_t from_held_end;    /* from side: vacated slots [0, end) are ours */
  size_t to_held_start;    /* to side: slots [start, size) are ours */
} hp_move;

/* Reserves [addr, addr + len) if nothing is mapped there. */
static bool take_slot(char *addr, size_t len) {
  if (injected(HP_OS_FAULT_MMAP)) return false;
  void *p = sys_mmap(addr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  if (p == MAP_FAILED) return false;
  if (p != addr) { /* a kernel before 4.17 takes the flag for a hint */
    (void)sys_munmap(p, len);
    return false;
  }
  return true;
}

/* Replaces our mapping at [addr, addr + len) by reserved address space
 * (one call: no window); else unmaps it.  libc: seen by registration hooks
 * (a buffer's pages go). */
static bool release_to_slot(char *addr, size_t len) {
  if (!injected(HP_OS_FAULT_MMAP) &&
      mmap(addr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == addr)
    return true;
  munmap(addr, len);
  return false;
}

static bool step_forward(hp_move *m) {
  uintptr_t off = m->piece[m->at][0], len = m->piece[m->at][1] - off;
  if (!move_range(m->from + off, len, m->to + off)) return false;
  if (!m->from_lost && !take_slot(m->from + off, len)) {
    m->from_lost = true;
    m->from_held_end = off;
  }
  m->at++;
  return true;
}

static bool step_back(hp_move *m) {
  uintptr_t off = m->piece[m->at - 1][0], end = m->piece[m->at - 1][1];
  if (!move_range(m->to + off, end - off, m->from + off)) return false;
  if (!m->to_lost && !take_slot(m->to + off, end - off)) {
    m->to_lost = true;
    m->to_held_start = end;
  }
  m->at--;
  return true;
}

/* Copies one piece from `src` to new pages at `dst` (a slot of ours). */
static bool copy_piece(char *src, char *dst, size_t len, size_t page_size) {
  int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED;
  void *p = MAP_FAILED;
  if (page_size && !injected(HP_OS_FAULT_MMAP))
    p = sys_mmap(dst, len, PROT_READ | PROT_WRITE,
                 flags | MAP_HUGETLB | (page_size == HP_1G ? MAP_HUGE_1GB : MAP_HUGE_2MB), -1, 0);
  if (p == MAP_FAILED && !injected(HP_OS_FAULT_MMAP)) {
    p = sys_mmap(dst, len, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (p != MAP_FAILED && page_size)
      os_report("a buffer being moved was partly copied onto 4 KB pages (no hugetlb page left)");
  }
  if (p == MAP_FAILED) return false;
  memcpy(dst, src, len);
  return true;
}

static bool copy_forward(hp_move *m) {
  uintptr_t off = m->piece[m->at][0], len = m->piece[m->at][1] - off;
  if (!copy_piece(m->from + off, m->to + off, len, m->page_size)) return false;
  if (m->from_lost) {
    munmap(m->from + off, len); /* libc: seen by registration hooks */
  } else if (!release_to_slot(m->from + off, len)) {
    m->from_lost = true;
    m->from_held_end = off;
  }
  m->at++;
  return true;
}

static bool copy_back(hp_move *m) {
  uintptr_t off = m->piece[m->at - 1][0], end = m->piece[m->at - 1][1];
  if (!copy_piece(m->to + off, m->from + off, end - off, m->page_size)) return false;
  if (m->to_lost) {
    munmap(m->to + off, end - off); /* libc: seen by registration hooks */
  } else if (!release_to_slot(m->to + off, end - off)) {
    m->to_lost = true;
    m->to_held_start = end;
  }
  m->at--;
  return true;
}

/* Brings a move that stopped half way to one side: back if it can (the
 * caller then reports the error as if nothing had been tried), else
 * forward.  Returns whether the buffer ended up at `to`. */
static bool settle(hp_move *m) {
  long delay_ns = 1000000;
  bool warned = false;
  for (;;) {
    if (!m->from_lost)
      while (m->at > 0 && step_back(m)) {
      }
    if (m->at == 0) return false;
    if (!m->to_lost)
      while (m->at < m->n && step_forward(m)) {
      }
    if (m->at == m->n) return true;
    /* Neither way by moving: copy the piece that is stuck, then go on. */
    if (!m->from_lost && copy_back(m)) continue;
    if (!m->to_lost && copy_forward(m)) continue;
    if (!warned) {
      os_report("the kernel refuses to move or copy a part of the buffer at %p (%s); retrying until it does",
                (void *)m->from, strerror(errno));
      warned = true;
    }
    struct timespec ts = {0, delay_ns};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    if (delay_ns < 100000000) delay_ns *= 2;
  }
}

/* Lists the mappings of [from, from + size) into m->piece; false (errno)
 * unless they cover the range with no hole. */
static bool list_pieces(hp_move *m, size_t size, size_t *cap_bytes) {
  size_t cap = size / 4096 + 1; /* a mapping is at least one 4 KB page */
  *cap_bytes = cap * sizeof(hp_piece);
  m->piece = os_map_sparse(*cap_bytes);
  if (m->piece == NULL) return false;
  uintptr_t lo = (uintptr_t)m->from;
  int n = os_mappings_in(lo, lo + size, m->piece, cap > INT32_MAX ? INT32_MAX : (int)cap);
  if (n <= 0) {
    errno = n < 0 ? ENOSYS : EFAULT;
    return false;
  }
  m->n = (size_t)n;
  uintptr_t expect = lo;
  for (size_t i = 0; i < m->n; i++) {
    if (m->piece[i][0] != expect) break;
    expect = m->piece[i][1];
    m->piece[i][0] -= lo;
    m->piece[i][1] -= lo;
  }
  if (expect != lo + size) {
    errno = EFAULT; /* a hole: not a buffer of ours */
    return false;
  }
  return true;
}

int os_move(void *from, size_t size, void *to, size_t page_size) {
  hp_move m = {.from = from, .to = to, .page_size = page_size, .from_held_end = size, .to_held_start = 0};
  size_t cap_bytes = 0;
  bool at_to = false;
  int err = 0;
  if (list_pieces(&m, size, &cap_bytes)) {
    while (m.at < m.n && step_forward(&m)) {
    }
    err = errno;
    at_to = m.at == m.n || (m.at > 0 && settle(&m));
  } else {
    err = errno;
  }
  if (m.piece) os_unmap_meta(m.piece, cap_bytes);
  if (at_to) {
    if (m.from_held_end) munmap(from, m.from_held_end); /* libc: where the buffer was */
    return 0;
  }
  if (m.to_held_start < size) (void)sys_munmap((char *)to + m.to_held_start, size - m.to_held_start);
  errno = err;
  return -1;
}

/* ---- a hugetlb buffer onto 4 KB pages, in place (fork.c) ---------------- */

int os_move_to_small(void *addr, size_t size, size_t page_size) {
  /* Replaces a hugetlb mapping by an anonymous 4 KB one at the same address,
   * carrying over the pages that exist (reading a missing hugetlb page could
   * itself need a pool page). */
  char *anon = sys_mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (anon == MAP_FAILED) return -1;
  char *src = addr;
  for (size_t off = 0; off < size; off += page_size) {
    unsigned char present = 0;
    if (mincore(src + off, 4096, &present) == 0 && (present & 1)) memcpy(anon + off, src + off, page_size);
  }
  if (os_move_mapping(anon, size, addr) != 0) {
    int err = errno;
    (void)sys_munmap(anon, size);
    errno = err;
    return -1;
  }
  (void)sys_madvise(addr, size, MADV_NOHUGEPAGE);
  return 0;
}
