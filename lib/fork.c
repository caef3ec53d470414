/* SPDX-License-Identifier: BSD-3-Clause */
/* fork() and live hugetlb buffers.
 *
 * A child inherits live buffers as private copy-on-write mappings but not
 * their hugetlb reservation: its first write to a page (or first read of a
 * page the parent never touched) needs a page from the free pool, and the
 * kernel answers a shortage with SIGBUS.  Worse, when the parent writes a
 * shared page while the pool is empty, the kernel takes the page away from
 * the child, which is killed on its next access.
 *
 * HUGEPOOL_FORK=copy (default): the child's atfork handler gives it private
 * copies at once, so it never depends on the pool later:
 *   - MADV_POPULATE_WRITE over each live buffer copies its pages onto fresh
 *     hugetlb pages, and reports a shortage as an error, not a signal;
 *   - if that fails, the buffer moves onto ordinary 4 KB pages at the same
 *     address (every pointer stays valid) and is a 4 KB buffer from then on.
 * The parent's fork() returns only once the child has its copies (a pipe
 * handshake between the atfork handlers): until then the pages are shared,
 * and a parent write to a shared page with the pool empty would take the
 * page away from the child.  Writes by the parent's *other* threads while
 * fork() runs are not held back.
 * The cost is one copy of the live buffers per fork(), paid in the child.
 * posix_spawn(), system() and popen() (glibc >= 2.29) use clone(CLONE_VFORK)
 * and run no atfork handlers, so they do not pay it.
 *
 * HUGEPOOL_FORK=keep: the kernel's behaviour, no copy; one warning in the
 * child when the free pool could not cover a full copy of what it inherited. */
#define _GNU_SOURCE
#include "fork.h"

#include <errno.h>
#include <string.h>

#include "options.h"
#include "registry.h"
#include "split.h"

static void make_private(hp_block *b, void *arg) {
  (void)arg;
  size_t page = hp_page_of((hugepool_kind)b->kind);
  if (!page) return;
  if (split_fork_privatize(b)) return; /* some of its pages are 4 KB pages: page by page */
  if (os_populate(b->addr, b->size) == 0) {
    hp_stats.fork_copies_huge++;
    if (hp_trace_on())
      hp_trace(HP_TRACE_FORK, "the %zu MiB buffer at %p copied into this child (HUGEPOOL_FORK=copy: its own pages, "
               "reserved; HUGEPOOL_FORK=keep shares them copy-on-write)", b->size >> 20, b->addr);
    return;
  }
  if (os_move_to_small(b->addr, b->size, page) != 0) {
    hp_warn("fork: cannot copy the %zu MiB buffer at %p inherited from the parent (%s); writing to it may SIGBUS",
            b->size >> 20, b->addr, strerror(errno));
    return;
  }
  b->kind = HUGEPOOL_KIND_SMALL;
  hp_stats.fork_moves_small++;
}

static void sum_huge(hp_block *b, void *arg) {
  if (hp_page_of((hugepool_kind)b->kind)) *(size_t *)arg += b->size;
}

static int handshake[2] = {-1, -1};

static void any_huge(hp_block *b, void *arg) {
  if (hp_page_of((hugepool_kind)b->kind)) *(bool *)arg = true;
}

void fork_prepare(void) {
  bool live_huge = false;
  if (option_get(HP_OPT_FORK) == HP_FORK_COPY) registry_walk(any_huge, &live_huge);
  if (!live_huge || os_pipe(handshake) != 0) handshake[0] = handshake[1] = -1;
}

void fork_parent_wait(void) {
  if (handshake[0] < 0) return;
  os_close(handshake[1]);
  (void)os_pipe_read_byte(handshake[0]); /* a byte, or EOF if the child died */
  os_close(handshake[0]);
  handshake[0] = handshake[1] = -1;
}

static void child_done(void) {
  if (handshake[0] < 0) return;
  (void)os_write_all(handshake[1], "", 1); /* a parent gone is no error here */
  os_close(handshake[0]);
  os_close(handshake[1]);
  handshake[0] = handshake[1] = -1;
}

void fork_child_privatize(void) {
  if (option_get(HP_OPT_FORK) == HP_FORK_COPY) {
    registry_walk(make_private, NULL);
    child_done();
    return;
  }
  size_t huge_bytes = 0;
  registry_walk(sum_huge, &huge_bytes);
  long avail = os_pool_available(HP_2M, -1);
  if (huge_bytes && avail >= 0 && huge_bytes / HP_2M > (size_t)avail) {
    hp_warn(
        "fork (HUGEPOOL_FORK=keep): this child shares %zu MiB of hugetlb buffers but the pool has %ld free "
        "pages: writing to them may kill it with SIGBUS",
        huge_bytes >> 20, avail);
  }
}
