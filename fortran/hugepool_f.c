/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The C half of the Fortran module (hugepool.f90): calls that must read errno
 * right after the library call (the Fortran runtime may call libc between
 * two Fortran statements), and the message a failed call reports.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "hugepool/hugepool.h"

#define HP_F_API __attribute__((visibility("default")))

HP_F_API void *hugepool_f_alloc(size_t bytes, int zero, int *err);
HP_F_API void hugepool_f_free(void *p, int *err);
HP_F_API size_t hugepool_f_message(int err, size_t bytes, char *buf, size_t len);
HP_F_API int hugepool_f_segment_create(size_t bytes, int node, hugepool_segment *out);
HP_F_API int hugepool_f_segment_map(const hugepool_segment_handle *handle, hugepool_segment *out);
HP_F_API int hugepool_f_segment_unmap(hugepool_segment *seg);

void *hugepool_f_alloc(size_t bytes, int zero, int *err) {
  errno = 0;
  void *p = zero ? hugepool_calloc(1, bytes) : hugepool_alloc(bytes);
  *err = p ? 0 : (errno ? errno : ENOMEM);
  return p;
}

/* A pointer that is not the start of a live buffer is refused (EINVAL) and
 * left alone: a Fortran pointer to a section, or to memory from elsewhere. */
void hugepool_f_free(void *p, int *err) {
  if (!hugepool_owns(p)) {
    *err = EINVAL;
    return;
  }
  hugepool_free(p);
  *err = 0;
}

/* The text for a failed allocation of `bytes` (0: a failed free), with the
 * pool's state for a shortage.  Returns the length written (NUL excluded). */
size_t hugepool_f_message(int err, size_t bytes, char *buf, size_t len) {
  if (len == 0) return 0;
  size_t page = hugepool_get_page_size();
  int n;
  if (bytes == 0 && err == EINVAL) {
    n = snprintf(buf, len, "hugepool: not the start of a live hugepool buffer (%s)", strerror(err));
  } else if (err == ENOMEM && page) {
    long free_pages = hugepool_pool_free_pages(HUGEPOOL_ANY_NODE);
    size_t need = bytes / page + (bytes % page != 0);
    n = snprintf(buf, len,
                 "hugepool: cannot allocate %zu bytes on %zu MB pages: %zu pages needed, %ld free in the pool, "
                 "policy %s (%s); reserve more (hugepool-reserve, /proc/sys/vm/nr_hugepages) or allow a fallback "
                 "(HUGEPOOL_POLICY=thp)",
                 bytes, page >> 20, need, free_pages, hugepool_policy_name(hugepool_get_policy()), strerror(err));
  } else {
    n = snprintf(buf, len, "hugepool: cannot allocate %zu bytes (%s)", bytes, strerror(err));
  }
  if (n < 0) return 0;
  return (size_t)n < len ? (size_t)n : len - 1;
}

int hugepool_f_segment_create(size_t bytes, int node, hugepool_segment *out) {
  hugepool_segment_options opts = HUGEPOOL_SEGMENT_OPTIONS_INIT;
  opts.node = node;
  return hugepool_segment_create(bytes, &opts, out) == 0 ? 0 : errno;
}

int hugepool_f_segment_map(const hugepool_segment_handle *handle, hugepool_segment *out) {
  return hugepool_segment_map(handle, out) == 0 ? 0 : errno;
}

int hugepool_f_segment_unmap(hugepool_segment *seg) { return hugepool_segment_unmap(seg) == 0 ? 0 : errno; }
