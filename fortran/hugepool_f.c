/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The C half of the Fortran module (hugepool.f90): calls that must read errno
 * right after the library call (the Fortran runtime may call libc between
 * two Fortran statements), and the message a failed call reports.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hugepool/hugepool.h"

#define HP_F_API __attribute__((visibility("default")))

HP_F_API void *hugepool_f_alloc(size_t bytes, int zero, int *err);
HP_F_API void hugepool_f_free(void *p, size_t bytes, int *err);
HP_F_API size_t hugepool_f_message(int err, size_t bytes, char *buf, size_t len);
HP_F_API int hugepool_f_segment_create(size_t bytes, int node, hugepool_segment *out);
HP_F_API int hugepool_f_segment_map(const hugepool_segment_handle *handle, hugepool_segment *out);
HP_F_API int hugepool_f_segment_unmap(hugepool_segment *seg);

/* The arrays hugepool_allocate made, by address, with their size in bytes:
 * a deallocate must name a whole one.  Its pointer to a section that starts
 * where the array starts (a(1:k), a(1::2), a(:,1:1)) points at the same
 * address as the array, so the address alone cannot tell them apart; the
 * size can.  A table of the module's own, since the library rounds sizes
 * up to whole pages. */
typedef struct f_array {
  void *addr;
  size_t bytes;
  struct f_array *next;
} f_array;
#define F_BUCKETS 1024
static f_array *f_arrays[F_BUCKETS];
static pthread_mutex_t f_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t f_bucket(const void *p) { return ((uintptr_t)p >> 21 ^ (uintptr_t)p >> 12) % F_BUCKETS; }

static int f_remember(void *p, size_t bytes) {
  f_array *a = malloc(sizeof(*a));
  if (!a) return ENOMEM;
  a->addr = p;
  a->bytes = bytes;
  pthread_mutex_lock(&f_lock);
  a->next = f_arrays[f_bucket(p)];
  f_arrays[f_bucket(p)] = a;
  pthread_mutex_unlock(&f_lock);
  return 0;
}

/* Forgets the array at p if it is `bytes` long: true; else false, kept. */
static int f_forget(void *p, size_t bytes) {
  pthread_mutex_lock(&f_lock);
  f_array **at = &f_arrays[f_bucket(p)];
  while (*at && (*at)->addr != p) at = &(*at)->next;
  f_array *a = *at && (*at)->bytes == bytes ? *at : NULL;
  if (a) *at = a->next;
  pthread_mutex_unlock(&f_lock);
  free(a);
  return a != NULL;
}

void *hugepool_f_alloc(size_t bytes, int zero, int *err) {
  errno = 0;
  void *p = zero ? hugepool_calloc(1, bytes) : hugepool_alloc(bytes);
  *err = p ? 0 : (errno ? errno : ENOMEM);
  if (p && (*err = f_remember(p, bytes)) != 0) {
    hugepool_free(p);
    p = NULL;
  }
  return p;
}

/* Anything but a whole array of hugepool_allocate, `bytes` long, is refused
 * (EINVAL) and left alone: a section, a view of a segment, memory from
 * elsewhere, an array freed already. */
void hugepool_f_free(void *p, size_t bytes, int *err) {
  if (!hugepool_owns(p) || !f_forget(p, bytes)) {
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
    n = snprintf(buf, len,
                 "hugepool: not a whole array of hugepool_allocate: a section of one, or not the start of a live "
                 "hugepool buffer (%s)",
                 strerror(err));
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
