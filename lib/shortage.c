/* SPDX-License-Identifier: BSD-3-Clause */
/* The pool found short, per page size: a deadline before the next real
 * attempt, doubling while the pool stays short (shortage.h says why). */
#define _GNU_SOURCE
#include "shortage.h"

#include <stdatomic.h>

#include "os.h"

#define SHORT_MIN_MS 1
#define SHORT_MAX_MS 64

static _Atomic long long short_until_ns[2]; /* [0] 2 MB, [1] 1 GB pages; 0: not short */
static _Atomic long long short_wait_ns[2];
static _Atomic size_t short_size[2]; /* the smallest request refused in this wait */

bool shortage_known(size_t size, size_t page) {
  int i = page == HP_1G;
  long long until = atomic_load_explicit(&short_until_ns[i], memory_order_relaxed);
  return until != 0 && size >= atomic_load_explicit(&short_size[i], memory_order_relaxed) && os_coarse_ns() < until;
}

void shortage_found(size_t size, size_t page) {
  int i = page == HP_1G;
  size_t was = atomic_load_explicit(&short_size[i], memory_order_relaxed);
  bool waiting = atomic_load_explicit(&short_until_ns[i], memory_order_relaxed) != 0;
  atomic_store_explicit(&short_size[i], waiting && was < size ? was : size, memory_order_relaxed);
  long long wait = atomic_load_explicit(&short_wait_ns[i], memory_order_relaxed);
  wait = wait == 0                             ? SHORT_MIN_MS * 1000000LL
         : wait * 2 > SHORT_MAX_MS * 1000000LL ? SHORT_MAX_MS * 1000000LL
                                               : wait * 2;
  atomic_store_explicit(&short_wait_ns[i], wait, memory_order_relaxed);
  atomic_store_explicit(&short_until_ns[i], os_coarse_ns() + wait, memory_order_relaxed);
}

/* A load first: frees call this, and the line is written only when it
 * changes. */
void shortage_over(size_t page) {
  int i = page == HP_1G;
  if (atomic_load_explicit(&short_until_ns[i], memory_order_relaxed) == 0 &&
      atomic_load_explicit(&short_wait_ns[i], memory_order_relaxed) == 0)
    return;
  atomic_store_explicit(&short_until_ns[i], 0, memory_order_relaxed);
  atomic_store_explicit(&short_wait_ns[i], 0, memory_order_relaxed);
}
