/* SPDX-License-Identifier: BSD-3-Clause */
/* The core's atfork handlers (atfork.h): every lock of the core is taken
 * before fork() and released after it, in the lock order (base.h), so the
 * child starts with consistent tables; the child then drops its cached
 * blocks and gets its own copies of live buffers (fork.c). */
#define _GNU_SOURCE
#include "atfork.h"

#include <pthread.h>

#include "cache.h"
#include "fork.h"
#include "realloc.h"
#include "registrar.h"
#include "registry.h"
#include "release.h"
#include "share.h"
#include "tcache.h"

static void atfork_prepare(void) {
  realloc_fork_prepare(); /* first in the lock order (realloc.h) */
  pthread_mutex_lock(&hp_lock);
  tcache_lock_all();
  registry_lock_all();
  fork_prepare();
}

static void atfork_parent(void) {
  registry_unlock_all();
  tcache_unlock_all();
  pthread_mutex_unlock(&hp_lock);
  fork_parent_wait(); /* until the child has its own copies of the live buffers */
  realloc_fork_parent();
}

static void drop_in_child(hp_block *batch, size_t n) {
  for (size_t i = 0; i < n; i++) {
    os_unmap(batch[i].addr, batch[i].size);
    base_stats_unmapped(batch[i].size);
    size_t page = hp_page_of((hugepool_kind)batch[i].kind);
    if (page) share_mapped(page, -(long long)batch[i].size);
  }
}

static void atfork_child(void) {
  /* The child's cached mappings are private copy-on-write views of the
   * parent's: pages the child has no reservation for.  Drop them (from the
   * shared cache and every thread's) so the child maps (and reserves) its
   * own buffers instead of reusing them. */
  hp_block batch[HP_BATCH];
  size_t n;
  /* No registration is the child's: forgotten before the drops below, which call no registrar. */
  registrar_child_forget();
  tcache_unlock_all();   /* tcache_drain takes each lock itself, and the */
  registry_unlock_all(); /* registry's (this process has one thread now) */
  while ((n = cache_drain(batch, HP_BATCH)) > 0) drop_in_child(batch, n);
  while ((n = tcache_drain(HUGEPOOL_KIND_NONE, batch, HP_BATCH, NULL)) > 0) drop_in_child(batch, n);
  tcache_child_reset(); /* handed-out blocks become plain; other threads' caches lose their owners */
  /* Releases the parent's other threads had in flight do not happen here:
   * those mappings stay in the child, untracked, until it exits or execs. */
  release_forget_in_flight();
  fork_child_privatize();
  pthread_mutex_unlock(&hp_lock);
  realloc_fork_child();
}

void atfork_install(void) { pthread_atfork(atfork_prepare, atfork_parent, atfork_child); }
