/* fork() and the parent's hugetlb buffers.
 *
 * A child inherits live buffers as private copy-on-write mappings but not
 * their hugetlb reservation: its first write to a page (and even its first
 * read of a page the parent never touched) needs a page from the free pool,
 * and the kernel answers a shortage with SIGBUS.  Worse, when the parent
 * writes a shared page and the pool is empty, the kernel takes the page away
 * from the child, which is killed on its next access.
 *
 * HUGEPOOL_FORK=copy (default): the child's atfork handler gives it private
 * copies at once, so it never depends on the pool later:
 *   - madvise(MADV_POPULATE_WRITE) over each live buffer: copies the pages
 *     onto fresh hugetlb pages, and reports a shortage as an error, not SIGBUS;
 *   - if that fails, the buffer is moved onto ordinary 4 KB pages: the pages
 *     the parent had touched are copied into an anonymous mapping which then
 *     replaces the hugetlb one at the same address (mremap), so every pointer
 *     stays valid.  The buffer is then a 4 KB buffer for hugepool too.
 * The cost is one copy of the live buffers per fork, also when exec follows
 * (posix_spawn, system() and popen() in glibc 2.36 use clone(CLONE_VFORK)
 * and run no atfork handlers, so they do not pay it).
 *
 * HUGEPOOL_FORK=keep: the kernel's behaviour, no copy; one warning in the
 * child when the free pool could not cover a full copy of what it inherited. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"
#include "preload.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static bool fork_keep;
static uint64_t forks_copied;    /* buffers moved to 4 KB pages in this (child) process */
static uint64_t forks_populated; /* buffers given private hugetlb copies */

typedef struct {
  size_t huge_bytes;
} keep_sum;

static void sum_live(hp_block *b, void *arg) {
  if (b->kind == HUGEPOOL_KIND_HUGE_2M || b->kind == HUGEPOOL_KIND_HUGE_1G) ((keep_sum *)arg)->huge_bytes += b->size;
}

static void make_private(hp_block *b, void *arg) {
  (void)arg;
  if (b->kind != HUGEPOOL_KIND_HUGE_2M && b->kind != HUGEPOOL_KIND_HUGE_1G) return;
  if (madvise(b->addr, b->size, MADV_POPULATE_WRITE) == 0) {
    forks_populated++;
    return;
  }
  char *anon = mmap(NULL, b->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (anon == MAP_FAILED) {
    hp_warn("fork: cannot copy a %zu MiB buffer inherited at %p (%s); writing to it may SIGBUS", b->size >> 20,
            b->addr, strerror(errno));
    return;
  }
  size_t page = b->kind == HUGEPOOL_KIND_HUGE_1G ? HP_1G : HP_2M;
  char *src = b->addr;
  for (size_t off = 0; off < b->size; off += page) {
    unsigned char present = 0;
    /* Only pages that exist: reading a missing one would need a pool page. */
    if (mincore(src + off, (size_t)sysconf(_SC_PAGESIZE), &present) == 0 && (present & 1)) {
      memcpy(anon + off, src + off, page);
    }
  }
  if (mremap(anon, b->size, b->size, MREMAP_MAYMOVE | MREMAP_FIXED, b->addr) == MAP_FAILED) {
    hp_warn("fork: cannot move a %zu MiB buffer at %p to 4 KB pages (%s); writing to it may SIGBUS",
            b->size >> 20, b->addr, strerror(errno));
    munmap(anon, b->size);
    return;
  }
  (void)madvise(b->addr, b->size, MADV_NOHUGEPAGE);
  b->kind = HUGEPOOL_KIND_SMALL;
  forks_copied++;
}

static void atfork_child(void) {
  forks_copied = forks_populated = 0;
  if (fork_keep) {
    keep_sum sum = {0};
    hp_for_each_live(sum_live, &sum);
    long avail = hugepool_pool_free_pages(-1);
    size_t page = hugepool_get_page_size();
    if (sum.huge_bytes && avail >= 0 && sum.huge_bytes / page > (size_t)avail) {
      hp_warn("fork (HUGEPOOL_FORK=keep): this child shares %zu MiB of hugetlb buffers but the pool has %ld free "
              "pages: writing to them may kill it with SIGBUS",
              sum.huge_bytes >> 20, avail);
    }
    return;
  }
  hp_for_each_live(make_private, NULL);
}

void hpl_fork_init(void) {
  const char *mode = getenv("HUGEPOOL_FORK");
  if (mode && strcasecmp(mode, "keep") == 0) fork_keep = true;
  else if (mode && *mode && strcasecmp(mode, "copy") != 0)
    hp_warn("HUGEPOOL_FORK='%s' is not valid (expected copy or keep); using copy", mode);
  pthread_atfork(NULL, NULL, atfork_child);
}

void hpl_fork_stats(uint64_t *copied, uint64_t *populated) {
  *copied = forks_copied;
  *populated = forks_populated;
}
