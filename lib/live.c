/* SPDX-License-Identifier: BSD-3-Clause */
/* Live blocks marked as being resized: the mark is a flag of the block's
 * registry entry, set and cleared under the entry's stripe lock. */
#include "live.h"

#include <errno.h>

#include "registry.h"
#include "tcache.h"

static int mark_resizing(hp_block *b, void *arg) {
  if (b->resizing) {
    errno = EBUSY;
    return -1;
  }
  b->resizing = 1;
  *(hp_block *)arg = *b;
  return 0;
}

static int set_block(hp_block *b, void *arg) {
  *b = *(const hp_block *)arg;
  return 0;
}

int live_begin_resize(const void *addr, hp_block *out) {
  for (;;) {
    hp_block copy;
    if (registry_update(addr, mark_resizing, out, &copy) == 0) return 0;
    if (errno != EAGAIN) return -1;            /* EINVAL or EBUSY */
    int err = tcache_detach(&copy, true, out); /* a thread cache handed it out */
    if (err == 0) return 0;
    if (err != EAGAIN) {
      errno = err;
      return -1;
    }
  }
}

void live_end_in_place(const hp_block *now) {
  hp_block b = *now, old;
  b.resizing = 0;
  (void)registry_update(b.addr, set_block, &b, &old); /* needs no memory */
}
