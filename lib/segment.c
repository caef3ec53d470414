/* SPDX-License-Identifier: BSD-3-Clause */
/* Node-shared segments: hugetlb buffers that processes of one user on the
 * node map together.
 *
 * Rules this file keeps:
 *  1. The backing file never has a name (memfd, or O_TMPFILE on a mount):
 *     nothing is left on any mount whenever a process dies.
 *  2. Every page is reserved (mmap without MAP_NORESERVE) and populated at
 *     creation: a shortage is ENOMEM here, never a SIGBUS at a later touch.
 *  3. A mapper trusts nothing in the handle: the descriptor it gets must be
 *     a hugetlb file owned by its own user, mode 0600, with the inode,
 *     device and page size the handle names, and at least its size.
 *     Anything else is an error and nothing is mapped.
 *  4. Other users are kept out by the kernel: pidfd_getfd() and
 *     /proc/<pid>/fd need ptrace rights on the creator, the file is 0600.
 * The public hugepool_segment_* (api.c) start the core and call these. */
#define _GNU_SOURCE
#include "segment.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "release.h" /* release_cached */

static void report_segment_shortage(size_t size, size_t page, int node) {
  char pool[400];
  hp_describe_shortage(pool, sizeof(pool), size, page, node);
  hp_warn("cannot create a %zu MiB shared segment on %s", size >> 20, pool);
}

/* The file, sized and mapped, its pages populated (bound to node if one is
 * given); 0 or -1 with errno, and nothing held on failure. */
static int create_mapped(size_t size, size_t page, int node, const char *dir, int *fd_out, void **addr_out) {
  int fd = os_huge_file(page, dir);
  if (fd < 0) return -1;
  void *p = NULL;
  if (os_huge_file_size(fd, size) != 0 || (p = os_map_shared(fd, size)) == NULL) {
    int err = errno;
    os_close(fd);
    errno = err;
    return -1;
  }
  /* mbind before the first touch, then fault every page in: the pages
   * land on the node now, and a node short of pages is an error now. */
  if ((node != HUGEPOOL_ANY_NODE && os_bind_node(p, size, node) != 0) || os_populate(p, size) != 0) {
    int err = errno;
    os_unmap(p, size);
    os_close(fd);
    errno = (err == EFAULT || err == ENOMEM) ? ENOMEM : err;
    return -1;
  }
  *fd_out = fd;
  *addr_out = p;
  return 0;
}

int segment_create(size_t bytes, const hugepool_segment_options *opts, hugepool_segment *out) {
  hugepool_segment_options o = HUGEPOOL_SEGMENT_OPTIONS_INIT;
  if (opts) o = *opts;
  size_t page = o.page_size ? o.page_size : hp_current_page_size();
  if (!out || bytes == 0 || (page != HP_2M && page != HP_1G)) {
    errno = EINVAL;
    return -1;
  }
  if (!os_page_size_supported(page)) {
    errno = ENOTSUP;
    return -1;
  }
  if (o.node != HUGEPOOL_ANY_NODE && !os_node_has_memory(o.node)) {
    hp_warn("NUMA node %d does not exist or has no memory", o.node);
    errno = EINVAL;
    return -1;
  }
  size_t size = hp_round_up(bytes, page);
  if (size == 0) {
    errno = EINVAL;
    return -1;
  }
  char mount[256];
  const char *dir = o.hugetlbfs;
  if (dir && dir[0] == '\0') {
    if (os_find_hugetlbfs(page, mount, sizeof(mount)) != 0) {
      hp_warn(
          "no hugetlbfs mount of %zu MB pages in /proc/self/mountinfo (mount one with 'hugeadm "
          "--create-global-mounts', or use a memfd segment)",
          page >> 20);
      errno = ENOENT;
      return -1;
    }
    dir = mount;
  }
  int fd = -1;
  void *p = NULL;
  int rc = create_mapped(size, page, o.node, dir, &fd, &p);
  if (rc != 0 && errno == ENOMEM && release_cached() > 0) {
    rc = create_mapped(size, page, o.node, dir, &fd, &p); /* our own cache held the pages */
  }
  if (rc != 0) {
    int err = errno;
    if (err == ENOMEM)
      report_segment_shortage(size, page, o.node);
    else if (dir)
      hp_warn("cannot create a shared segment in %s: %s", dir, strerror(err));
    errno = err;
    return -1;
  }
  os_file_info info;
  if (os_huge_file_info(fd, &info) != 0) {
    int err = errno;
    os_unmap(p, size);
    os_close(fd);
    errno = err;
    return -1;
  }
  memset(out, 0, sizeof(*out));
  out->addr = p;
  out->size = size;
  out->page_size = page;
  out->fd = fd;
  out->created = 1;
  out->handle.pid = os_pid();
  out->handle.fd = fd;
  out->handle.ino = info.ino;
  out->handle.dev = info.dev;
  out->handle.size = size;
  out->handle.page_size = page;
  return 0;
}

/* Rule 3: the descriptor is the file the handle names, and safe to map. */
static int check_peer_file(int fd, const hugepool_segment_handle *h) {
  os_file_info info;
  if (os_huge_file_info(fd, &info) != 0) return -1;
  if (!info.is_hugetlb || info.page_size != h->page_size) {
    errno = EINVAL;
    return -1;
  }
  if (info.ino != h->ino || info.dev != h->dev) {
    errno = ESTALE; /* the creator closed it and the number was reused */
    return -1;
  }
  if (info.uid != os_euid() || (info.mode & 077) != 0) {
    errno = EPERM;
    return -1;
  }
  if (info.size < h->size) { /* a mapping beyond the end would SIGBUS */
    errno = EINVAL;
    return -1;
  }
  return 0;
}

int segment_map(const hugepool_segment_handle *h, hugepool_segment *out) {
  if (!h || !out || h->size == 0 || (h->page_size != HP_2M && h->page_size != HP_1G) || h->size % h->page_size != 0 ||
      h->size > (uint64_t)SIZE_MAX || h->fd < 0 || h->fd > INT32_MAX) {
    errno = EINVAL;
    return -1;
  }
  int fd = os_peer_fd((long)h->pid, (int)h->fd);
  if (fd < 0) return -1;
  if (check_peer_file(fd, h) != 0) {
    int err = errno;
    os_close(fd);
    errno = err;
    return -1;
  }
  void *p = os_map_shared(fd, (size_t)h->size);
  int err = errno;
  os_close(fd); /* the mapping keeps the file */
  if (!p) {
    errno = err;
    return -1;
  }
  /* The creator populated the file: this only fills the page tables, so
   * the first copy into a peer's buffer takes no page fault. */
  if (os_populate(p, (size_t)h->size) != 0) {
    err = errno;
    os_unmap(p, (size_t)h->size);
    errno = err;
    return -1;
  }
  memset(out, 0, sizeof(*out));
  out->addr = p;
  out->size = (size_t)h->size;
  out->page_size = (size_t)h->page_size;
  out->fd = -1;
  out->created = 0;
  out->handle = *h;
  return 0;
}

int segment_unmap(hugepool_segment *seg) {
  if (!seg || !seg->addr || seg->size == 0) {
    errno = EINVAL;
    return -1;
  }
  os_unmap(seg->addr, seg->size);
  if (seg->created) os_close(seg->fd);
  seg->addr = NULL;
  seg->size = 0;
  seg->fd = -1;
  return 0;
}
