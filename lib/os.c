/* SPDX-License-Identifier: BSD-3-Clause */
/* The OS layer: every mmap / munmap / madvise / mbind hugepool makes, every
 * file it reads or writes (the kernel's pool state, /proc, the statistics
 * file, stderr) and the fork handshake's pipe.  The contract of every
 * function is stated once, in os.h.  Nothing here calls malloc, so the
 * preload interposer can use it from inside malloc, and nothing here calls
 * above this layer: what it must say goes through the reporter (report()). */
#define _GNU_SOURCE
#include "os.h"

#include <errno.h>
#include <fcntl.h>
#include <numaif.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

/* glibc defines MAP_HUGE_SHIFT and MADV_POPULATE_WRITE (2.35+), not these. */
#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << MAP_HUGE_SHIFT)
#endif
#ifndef MAP_HUGE_1GB
#define MAP_HUGE_1GB (30 << MAP_HUGE_SHIFT)
#endif

static _Atomic(os_reporter) reporter;

void os_set_reporter(os_reporter report) { atomic_store(&reporter, report); }

/* One line for the user, through the core's reporter (none yet: nothing). */
static void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void report(const char *fmt, ...) {
  os_reporter to = atomic_load(&reporter);
  if (!to) return;
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  if (n >= 0) to(line);
}

void *os_map_huge(size_t size, size_t page_size) {
  /* No MAP_NORESERVE: the kernel reserves every page now, so a shortage is
   * an ENOMEM here and never a SIGBUS at first touch. */
  int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB;
  flags |= page_size == HP_1G ? MAP_HUGE_1GB : MAP_HUGE_2MB;
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, flags, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

/* Anonymous memory of `size` bytes aligned to `align`: over-map by `align`
 * and trim both ends.  NULL with errno on failure. */
static char *map_aligned(size_t size, size_t align, int prot, int flags) {
  size_t span = size + align;
  if (span < size) {
    errno = ENOMEM;
    return NULL;
  }
  char *raw = mmap(NULL, span, prot, flags, -1, 0);
  if (raw == MAP_FAILED) return NULL;
  char *start = raw + ((align - (uintptr_t)raw % align) % align);
  size_t head = (size_t)(start - raw);
  size_t tail = span - head - size;
  if (head) munmap(raw, head);
  if (tail) munmap(start + size, tail);
  return start;
}

void *os_map_anon(size_t size, size_t align, bool want_thp) {
  /* Over-map and trim so the fallback is aligned like a huge page: THP can
   * then back every 2 MB of it, and all hugepool buffers share one alignment. */
  char *start = map_aligned(size, align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  if (start == NULL) return NULL;
  /* MADV_NOHUGEPAGE makes the 4 KB fallback honest on THP=always systems. */
  (void)madvise(start, size, want_thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  return start;
}

void os_unmap(void *addr, size_t size) {
  /* Always libc's munmap (never a raw syscall): MPI registration caches
   * (UCX, libfabric) hook it to learn that the range is gone. */
  if (munmap(addr, size) != 0) {
    report("munmap(%p, %zu) failed: %s", addr, size, strerror(errno));
  }
}

int os_bind_node(void *addr, size_t size, int node) {
  unsigned long mask[16];
  const unsigned long bits = sizeof(mask) * 8;
  if (node < 0 || (unsigned long)node >= bits) {
    errno = EINVAL;
    return -1;
  }
  memset(mask, 0, sizeof(mask));
  mask[(unsigned)node / (8 * sizeof(unsigned long))] |= 1UL << ((unsigned)node % (8 * sizeof(unsigned long)));
  return (int)mbind(addr, size, MPOL_BIND, mask, bits + 1, MPOL_MF_STRICT);
}

int os_populate(void *addr, size_t size) {
  /* Faults every page in now and reports a shortage as an error (EFAULT /
   * ENOMEM) instead of delivering SIGBUS at the first touch. */
  return madvise(addr, size, MADV_POPULATE_WRITE);
}

void *os_map_meta(size_t size) {
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

void *os_map_sparse(size_t size) {
  /* MAP_NORESERVE: only the pages touched count against the commit limit. */
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

void os_unmap_meta(void *addr, size_t size) { munmap(addr, size); }

static const char *const kSysfsPool = "/sys/kernel/mm/hugepages/hugepages-";
static const char *const kSysfsNode = "/sys/devices/system/node/node";

static size_t pool_dir(char *buf, size_t len, size_t page_size, int node, const char *file) {
  int n;
  if (node < 0) {
    n = snprintf(buf, len, "%s%zukB/%s", kSysfsPool, page_size >> 10, file);
  } else {
    n = snprintf(buf, len, "%s%d/hugepages/hugepages-%zukB/%s", kSysfsNode, node, page_size >> 10, file);
  }
  return n < 0 || (size_t)n >= len ? 0 : (size_t)n;
}

ssize_t os_read_file(const char *path, char *buf, size_t len) {
  if (len == 0) {
    errno = EINVAL;
    return -1;
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t done = 0;
  while (done < len - 1) {
    ssize_t n = read(fd, buf + done, len - 1 - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      errno = err;
      return -1;
    }
    if (n == 0) break;
    done += (size_t)n;
  }
  close(fd);
  buf[done] = '\0';
  return (ssize_t)done;
}

static long read_long(const char *path) {
  char buf[64];
  if (os_read_file(path, buf, sizeof(buf)) < 0) return -1;
  char *end = NULL;
  long v = strtol(buf, &end, 10);
  if (end == buf || v < 0) {
    errno = EINVAL;
    return -1;
  }
  return v;
}

long os_pool_available(size_t page_size, int node) {
  char path[160];
  if (!pool_dir(path, sizeof(path), page_size, node, "free_hugepages")) return -1;
  long free_pages = read_long(path);
  if (free_pages < 0 || node >= 0) return free_pages; /* per node: no reserved count */
  if (!pool_dir(path, sizeof(path), page_size, node, "resv_hugepages")) return -1;
  long resv = read_long(path);
  return resv < 0 ? free_pages : free_pages - resv;
}

long os_pool_total(size_t page_size, int node) {
  char path[160];
  if (!pool_dir(path, sizeof(path), page_size, node, "nr_hugepages")) return -1;
  return read_long(path);
}

bool os_page_size_supported(size_t page_size) {
  char path[160];
  struct stat st;
  return pool_dir(path, sizeof(path), page_size, -1, "") && stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Nodes with memory, read once from /sys/devices/system/node/has_memory
 * ("0", "0-3,6") so node-bound cache hits make no system call. */
#define HP_MAX_NODES 1024
static unsigned long nodes_with_memory[HP_MAX_NODES / (8 * sizeof(unsigned long))];

void os_nodes_init(void) {
  char buf[512];
  if (os_read_file("/sys/devices/system/node/has_memory", buf, sizeof(buf)) < 0) return;
  const char *p = buf;
  while (*p >= '0' && *p <= '9') {
    char *end = NULL;
    long lo = strtol(p, &end, 10), hi = lo;
    if (*end == '-') hi = strtol(end + 1, &end, 10);
    for (long n = lo; n <= hi && n < HP_MAX_NODES; n++) {
      nodes_with_memory[n / (long)(8 * sizeof(unsigned long))] |= 1UL << (n % (long)(8 * sizeof(unsigned long)));
    }
    p = *end == ',' ? end + 1 : end;
  }
}

bool os_node_has_memory(int node) {
  if (node < 0 || node >= HP_MAX_NODES) return false;
  return (nodes_with_memory[(unsigned)node / (8 * sizeof(unsigned long))] >>
          ((unsigned)node % (8 * sizeof(unsigned long)))) &
         1UL;
}

int os_write_all(int fd, const void *data, size_t len) {
  const char *p = data;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) {
      errno = EIO;
      return -1;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

void os_write_stderr(const char *text, size_t len) { (void)os_write_all(STDERR_FILENO, text, len); }

/* The statistics file: its path may come from the environment and its
 * directory may be shared with other users, who can plant anything at a
 * name a pattern will expand to.  Rules kept:
 *  1. Never block: every open has O_NONBLOCK (a FIFO cannot hang it), and
 *     what was opened must be a regular file of this effective user.
 *  2. Never follow or reuse what is there: files are created with
 *     O_CREAT | O_EXCL | O_NOFOLLOW, never opened as they are.
 *  3. A name already taken is replaced only if it holds a regular file of
 *     this effective user (a previous run's): the text goes to a fresh file
 *     next to it, renamed over it, so nothing is ever written into an
 *     existing file.  Anything else there (a symlink, FIFO, directory,
 *     another user's file) is left as it is: -1 with EEXIST.  A name
 *     swapped between the check and the rename is replaced, not written. */
#define OS_NEW_FILE (O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)

/* Creates path (0644 less the umask), writes data; a file left half
 * written is removed. */
static int os_write_new(const char *path, const char *data, size_t len) {
  int fd = open(path, OS_NEW_FILE, 0644);
  if (fd < 0) return -1;
  struct stat st;
  int rc = fstat(fd, &st) != 0 ? -1 : !S_ISREG(st.st_mode) || st.st_uid != geteuid() ? (errno = EEXIST, -1) : 0;
  if (rc == 0) rc = os_write_all(fd, data, len);
  int err = errno;
  if (close(fd) != 0 && rc == 0) rc = -1, err = errno;
  if (rc != 0) unlink(path);
  errno = err;
  return rc;
}

/* Replaces this user's own regular file at path with a fresh one. */
static int os_replace_own(const char *path, const char *data, size_t len) {
  struct stat st;
  char tmp[4096 + 48];
  if (lstat(path, &st) != 0) return -1;
  if (!S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
    errno = EEXIST;
    return -1;
  }
  for (int i = 0; i < 8; i++) { /* a name taken by someone else: the next */
    if (snprintf(tmp, sizeof tmp, "%s.%ld-%d.tmp", path, (long)getpid(), i) >= (int)sizeof tmp) {
      errno = ENAMETOOLONG;
      return -1;
    }
    if (os_write_new(tmp, data, len) == 0) {
      if (rename(tmp, path) == 0) return 0;
      int err = errno;
      unlink(tmp);
      errno = err;
      return -1;
    }
    if (errno != EEXIST) return -1;
  }
  return -1;
}

int os_write_file(const char *path, const char *data, size_t len) {
  if (os_write_new(path, data, len) == 0) return 0;
  return errno == EEXIST ? os_replace_own(path, data, len) : -1;
}

int os_pipe(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

int os_pipe_read_byte(int fd) {
  char byte;
  ssize_t n;
  do {
    n = read(fd, &byte, 1);
  } while (n < 0 && errno == EINTR);
  return n < 0 ? -1 : (int)n;
}

void os_close(int fd) {
  if (fd >= 0) (void)close(fd); /* on Linux the descriptor is gone even when close fails */
}

int os_move_to_small(void *addr, size_t size, size_t page_size) {
  /* Replaces a hugetlb mapping by an anonymous 4 KB one at the same address,
   * carrying over the pages that exist (reading a missing hugetlb page could
   * itself need a pool page). */
  char *anon = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (anon == MAP_FAILED) return -1;
  char *src = addr;
  for (size_t off = 0; off < size; off += page_size) {
    unsigned char present = 0;
    if (mincore(src + off, 4096, &present) == 0 && (present & 1)) memcpy(anon + off, src + off, page_size);
  }
  if (os_move_mapping(anon, size, addr) != 0) {
    int err = errno;
    munmap(anon, size);
    errno = err;
    return -1;
  }
  (void)madvise(addr, size, MADV_NOHUGEPAGE);
  return 0;
}

/* ---- address space for growth in place (realloc.c) ---------------------- */

void *os_reserve(size_t size, size_t align) {
  /* PROT_NONE and MAP_NORESERVE: no memory, no commit charge, no pool page;
   * only the range.  Over-map and trim for the alignment, as above. */
  return map_aligned(size, align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE);
}

int os_unmap_to_reserve(void *addr, size_t size) {
  /* One call replaces the mapping: the range is never free for another
   * thread's mmap to land in. */
  void *p = mmap(addr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  return p == MAP_FAILED ? -1 : 0;
}

/* Up to `max` mappings intersecting [lo, hi), clipped to it, in address
 * order, read from /proc/self/maps with no malloc.  -1 if it cannot be read. */
static int mappings_in(uintptr_t lo, uintptr_t hi, uintptr_t (*out)[2], int max) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[4096];
  size_t have = 0;
  int n = 0;
  bool at_line_start = true, done = false, failed = false;
  while (!done) {
    ssize_t r = read(fd, buf + have, sizeof(buf) - 1 - have);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) failed = true;
    if (r <= 0) break;
    have += (size_t)r;
    buf[have] = '\0';
    char *line = buf, *nl;
    while ((nl = strchr(line, '\n')) != NULL) {
      *nl = '\0';
      if (at_line_start) {
        char *end = NULL;
        uintptr_t s = (uintptr_t)strtoull(line, &end, 16), e = 0;
        if (end && *end == '-') e = (uintptr_t)strtoull(end + 1, NULL, 16);
        if (s >= hi) {
          done = true; /* the file is sorted by address */
          break;
        }
        if (e > lo && n < max) {
          out[n][0] = s > lo ? s : lo;
          out[n][1] = e < hi ? e : hi;
          n++;
        }
        if (n == max) {
          done = true;
          break;
        }
      }
      at_line_start = true;
      line = nl + 1;
    }
    if (done) break;
    /* Keep the unfinished line; a line longer than the buffer is a path
     * name, of no interest: drop its middle. */
    size_t rest = have - (size_t)(line - buf);
    if (rest == sizeof(buf) - 1) {
      at_line_start = false;
      rest = 0;
    }
    memmove(buf, line, rest);
    have = rest;
  }
  close(fd);
  return failed ? -1 : n;
}

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
  size_t page_size;       /* of the pieces: 0 for 4 KB pages */
  bool from_lost, to_lost; /* a slot on that side was taken by another mapping */
  size_t from_held_end;    /* from side: vacated slots [0, end) are ours */
  size_t to_held_start;    /* to side: slots [start, size) are ours */
} hp_move;

/* Reserves [addr, addr + len) if nothing is mapped there. */
static bool take_slot(char *addr, size_t len) {
  if (injected(HP_OS_FAULT_MMAP)) return false;
  void *p = mmap(addr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  if (p == MAP_FAILED) return false;
  if (p != addr) { /* a kernel before 4.17 takes the flag for a hint */
    munmap(p, len);
    return false;
  }
  return true;
}

/* Replaces our mapping at [addr, addr + len) by reserved address space
 * (one call: no window); else unmaps it. */
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
    p = mmap(dst, len, PROT_READ | PROT_WRITE, flags | MAP_HUGETLB | (page_size == HP_1G ? MAP_HUGE_1GB : MAP_HUGE_2MB),
             -1, 0);
  if (p == MAP_FAILED && !injected(HP_OS_FAULT_MMAP)) {
    p = mmap(dst, len, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (p != MAP_FAILED && page_size)
      report("a buffer being moved was partly copied onto 4 KB pages (no hugetlb page left)");
  }
  if (p == MAP_FAILED) return false;
  memcpy(dst, src, len);
  return true;
}

static bool copy_forward(hp_move *m) {
  uintptr_t off = m->piece[m->at][0], len = m->piece[m->at][1] - off;
  if (!copy_piece(m->from + off, m->to + off, len, m->page_size)) return false;
  if (m->from_lost) {
    munmap(m->from + off, len);
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
    munmap(m->to + off, end - off);
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
      report("the kernel refuses to move or copy a part of the buffer at %p (%s); retrying until it does",
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
  int n = mappings_in(lo, lo + size, m->piece, cap > INT32_MAX ? INT32_MAX : (int)cap);
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
    if (m.from_held_end) munmap(from, m.from_held_end);
    return 0;
  }
  if (m.to_held_start < size) munmap((char *)to + m.to_held_start, size - m.to_held_start);
  errno = err;
  return -1;
}
