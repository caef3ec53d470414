/* SPDX-License-Identifier: BSD-3-Clause */
/* Live blocks: the one place the registry and the thread caches are asked
 * about a live block together.  A block a thread cache handed out keeps a
 * marked registry entry that only that cache can interpret; every question
 * (find, take, mark for a resize) asks the registry, and on EAGAIN the
 * thread cache named in the entry, until neither says "changed since"
 * (handshake()).  The resize mark is a flag of the block's registry entry,
 * set and cleared under the entry's stripe lock. */
#include "live.h"

#include <errno.h>

#include "registry.h"
#include "tcache.h"

/* One question, asked of the registry and then, for a thread cache's
 * entry, of that cache: each answers 0 (*out set), EAGAIN (registry: *out
 * is the cache's entry; cache: the entry changed, ask again) or an error. */
typedef struct live_question {
  int (*registry)(const void *addr, hp_block *out);
  int (*tcache)(const hp_block *entry, hp_block *out);
} live_question;

static int handshake(const void *addr, const live_question *q, hp_block *out) {
  for (;;) {
    hp_block entry;
    int err = q->registry(addr, &entry);
    if (err != EAGAIN) {
      if (err == 0) *out = entry;
      return err;
    }
    err = q->tcache(&entry, out);
    if (err != EAGAIN) return err;
  }
}

/* ---- find: a copy of the block ---- */

static int find_in_registry(const void *addr, hp_block *out) {
  if (!registry_find(addr, out)) return EINVAL;
  return out->tc ? EAGAIN : 0;
}

static int find_in_tcache(const hp_block *entry, hp_block *out) {
  int rc = tcache_lookup(entry, out);
  return rc > 0 ? 0 : rc == 0 ? EINVAL /* cached, not live */ : EAGAIN;
}

static const live_question find = {find_in_registry, find_in_tcache};

bool live_find(const void *addr, hp_block *out) {
  hp_tcache *tc = tcache_self_if_any(); /* this thread's own first: no shared lock */
  if (tc && tcache_find_own(tc, addr, out)) return true;
  return handshake(addr, &find, out) == 0;
}

/* ---- take: the block leaves the registry ---- */

static int take_from_tcache(const hp_block *entry, hp_block *out) { return tcache_detach(entry, false, out); }

static const live_question take = {registry_remove_idle, take_from_tcache};

int live_take(const void *addr, hp_block *out) { return handshake(addr, &take, out); }

/* ---- a resize: marked at its beginning, its entry set at its end ---- */

static int mark_resizing(hp_block *b, void *arg) {
  if (b->resizing) {
    errno = EBUSY;
    return -1;
  }
  b->resizing = 1;
  *(hp_block *)arg = *b;
  return 0;
}

static int mark_in_registry(const void *addr, hp_block *out) {
  /* On success mark_resizing fills *out; on EAGAIN registry_update does. */
  return registry_update(addr, mark_resizing, out, out) == 0 ? 0 : errno;
}

static int mark_in_tcache(const hp_block *entry, hp_block *out) { return tcache_detach(entry, true, out); }

static const live_question mark = {mark_in_registry, mark_in_tcache};

int live_begin_resize(const void *addr, hp_block *out) {
  int err = handshake(addr, &mark, out);
  if (err == 0) return 0;
  errno = err; /* EINVAL or EBUSY */
  return -1;
}

static int set_block(hp_block *b, void *arg) {
  *b = *(const hp_block *)arg;
  return 0;
}

void live_end_in_place(const hp_block *now) {
  hp_block b = *now, old;
  b.resizing = 0;
  (void)registry_update(b.addr, set_block, &b, &old); /* needs no memory */
}

void live_end_resize(const hp_block *was, const hp_block *now) {
  hp_block b = *now, old;
  b.resizing = 0;
  if (b.addr == was->addr) {
    live_end_in_place(&b);
    return;
  }
  (void)registry_remove_resized(was->addr, &old);
  if (registry_insert(&b) != 0) /* the new address's stripe could not grow */
    hp_warn("hugepool_realloc(%p): no memory to track the moved buffer %p; it is no longer a hugepool buffer",
            was->addr, b.addr);
}
