/* SPDX-License-Identifier: BSD-3-Clause */
/* Starting the core (init.h): once per process, the options, then every
 * module, then the atfork handlers; the report at exit.  The top of the
 * core with api.c: it calls into every module, and no module calls it. */
#define _GNU_SOURCE
#include "init.h"

#include <pthread.h>
#include <stdatomic.h>

#include "alloc.h"
#include "atfork.h"
#include "cache.h"
#include "launcher.h"
#include "options.h"
#include "release.h"
#include "share.h"
#include "stats.h"
#include "tcache.h"

static pthread_once_t hp_once = PTHREAD_ONCE_INIT;
static atomic_bool hp_ready;

/* The OS layer's reports (os_set_reporter), as any other warning. */
static void warn_from_os(const char *text) { hp_warn("%s", text); }

/* An exiting thread's cached blocks move to the shared cache. */
static void thread_exit(hp_tcache *tc) {
  hp_block victims[HP_BATCH];
  size_t n = 0;
  pthread_mutex_lock(&hp_lock);
  tcache_retire(tc, victims, HP_BATCH, &n);
  release_mark(victims, n);
  pthread_mutex_unlock(&hp_lock);
  release_now(victims, n);
}

static void init_once(void) {
  os_set_reporter(warn_from_os);
  /* A bad HUGEPOOL_PREFAULT's warning names the default that applies, which
   * depends on the nodes (below): read them now only then. */
  bool prefault_named = option_in_environment(HP_OPT_PREFAULT);
  if (prefault_named && os_node_count() > 1) options_set_default(HP_OPT_PREFAULT, 0);
  options_init();
  /* The stderr the program started with, for what was asked to be printed
   * at exit or on the way: a process that asked for neither keeps no extra
   * descriptor (every command of a job under the site's module). */
  if (stats_report_asked() || option_get(HP_OPT_VERBOSE)) os_keep_stderr();
  launcher_init();
  share_init();
  tcache_init(thread_exit);
  long long policy = option_get(HP_OPT_POLICY);
  /* fallback (the preload's): the core refuses, the preload serves from glibc */
  hp_set_policy(policy == HP_POLICY_FALLBACK ? HUGEPOOL_POLICY_STRICT : (hugepool_policy)policy);
  size_t page = (size_t)option_get(HP_OPT_PAGE_SIZE);
  if (page != HP_2M && !os_page_size_supported(page)) { /* 2M: a kernel without it refuses each mapping, said then */
    hp_warn("HUGEPOOL_PAGE_SIZE=%zuM: this kernel has no such huge page size; using 2M", page >> 20);
    page = HP_2M;
  }
  hp_set_page_size(page);
  cache_configure((size_t)option_get(HP_OPT_CACHE_SLOTS), (size_t)option_get(HP_OPT_CACHE_BYTES));
  /* Where a page lands is decided at its fault: where a first touch may
   * choose between nodes, HUGEPOOL_PREFAULT's default leaves that to the
   * thread that first writes the page (OpenMP codes initialise in parallel
   * for that reason); the nodes are counted at the first mapping. */
  alloc_set_prefault((size_t)option_get(HP_OPT_PREFAULT), !prefault_named);
  alloc_set_decay(option_get(HP_OPT_CACHE_DECAY));
  atfork_install();
  atomic_store_explicit(&hp_ready, true, memory_order_release);
}

void hp_ensure_init(void) {
  if (__builtin_expect(atomic_load_explicit(&hp_ready, memory_order_acquire), 1)) return;
  /* Under a glibc older than the core needs, only the preload gets here (a
   * program linked with this library has this glibc or later), and it keeps
   * its calls off the core: the core stays unstarted (libc-floor.h). */
  if (!hp_libc_complete()) return;
  pthread_once(&hp_once, init_once);
}

static atomic_bool hp_stay_unstarted;
void hp_no_start_at_load(void) { atomic_store(&hp_stay_unstarted, true); }

__attribute__((constructor)) static void hp_constructor(void) {
  if (!atomic_load(&hp_stay_unstarted)) hp_ensure_init();
}

__attribute__((destructor)) static void hp_destructor(void) {
  if (atomic_load(&hp_ready)) stats_print_at_exit();
}
