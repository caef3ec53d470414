/* SPDX-License-Identifier: BSD-3-Clause */
/* Registration faults in the pages it pins, one at a time, inside the
 * driver: the kernel zeroes each fresh page on the calling thread.  On an
 * H200 node a first cuMemHostRegister of a fresh 1 GiB hugepool buffer took
 * 152 ms, of which the registration of present pages is 19 and the rest the
 * zeroing of 512 pages (bench/RESULTS.md).  PyTorch's caching host
 * allocator faults its blocks from a thread pool before registering them
 * (pinned_num_register_threads) for the same reason.  Here the range is cut
 * into slices of whole 2 MB pages and each slice faulted in with
 * MADV_POPULATE_WRITE (Linux 5.14), one thread per slice: populating never
 * changes a present page and, unlike a touch, returns an error instead of
 * raising SIGBUS where a page cannot be had.
 *
 * The helper threads run with every signal blocked (a program's handlers
 * never run on them) and a small stack (64 KiB, or twice the system's
 * minimum), and are joined before the call
 * returns.  Where a thread cannot be started its slice is faulted by the
 * caller.  A page lands on the node of the thread that faults it, as the
 * registration's own fault would put it on the caller's: on a machine of
 * several nodes the helpers run only on the CPUs of the caller's node that
 * it may use, and where those cannot be read nothing is done here.  The
 * slices are whole 2 MB pages: on 1 GB pages the threads of one page wait
 * for each other (no gain, no harm).  Every registrar gets it: a
 * registration pins the pages it is given, whoever's it is. */
#define _GNU_SOURCE
#include "prefault.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

#include "os.h"

enum { MAX_THREADS = 8 };
#define SLICE_MIN ((size_t)32 << 20) /* less per thread costs more in thread starts than it saves */
#define GRANULE ((size_t)2 << 20)

typedef struct slice {
  char *addr;
  size_t size;
} slice;

/* A kernel without MADV_POPULATE_WRITE (before 5.14) says EINVAL once. */
static atomic_bool unsupported;

static void *populate(void *arg) {
  const slice *s = arg;
  int saved = errno;
  if (os_populate(s->addr, s->size) != 0 && errno == EINVAL) atomic_store(&unsupported, true);
  errno = saved; /* best effort: see the file's comment */
  return NULL;
}

/* The CPUs the helpers may run on, in *set: the caller's, and on a machine
 * of several nodes only those of the node it runs on.  False: none. */
static bool helper_cpus(cpu_set_t *set) {
  if (sched_getaffinity(0, sizeof(*set), set) != 0) return false;
  if (os_node_count() <= 1) return true;
  cpu_set_t on_node;
  if (!os_node_cpus(&on_node)) return false;
  CPU_AND(set, set, &on_node);
  return CPU_COUNT(set) > 0;
}

void hp_prefault_parallel(void *addr, size_t size) {
  if (size < 2 * SLICE_MIN || (uintptr_t)addr % GRANULE != 0 || atomic_load(&unsupported) || !hp_libc_complete())
    return;
  cpu_set_t cpus;
  int saved = errno;
  bool known = helper_cpus(&cpus);
  errno = saved;
  size_t n = known ? (size_t)CPU_COUNT(&cpus) : 0;
  if (n > MAX_THREADS) n = MAX_THREADS;
  if (n > size / SLICE_MIN) n = size / SLICE_MIN;
  if (n < 2) return; /* one thread: the registration's own faults cost as much */
  size_t granules = size / GRANULE, per = granules / n;
  slice s[MAX_THREADS];
  for (size_t i = 0; i < n; i++) {
    s[i].addr = (char *)addr + i * per * GRANULE;
    s[i].size = i == n - 1 ? size - i * per * GRANULE : per * GRANULE;
  }
  pthread_t t[MAX_THREADS];
  bool started[MAX_THREADS] = {false};
  pthread_attr_t attr;
  bool attr_ok = pthread_attr_init(&attr) == 0;
  if (attr_ok) {
    long min = sysconf(_SC_THREAD_STACK_MIN); /* 16 KiB on x86-64, 128 KiB on arm64 */
    size_t stack = (size_t)64 << 10;
    if (min > 0 && (size_t)min * 2 > stack) stack = (size_t)min * 2;
    (void)pthread_attr_setstacksize(&attr, stack);
    (void)pthread_attr_setaffinity_np(&attr, sizeof(cpus), &cpus);
  }
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old); /* the helpers start with every signal blocked */
  for (size_t i = 1; i < n; i++) started[i] = pthread_create(&t[i], attr_ok ? &attr : NULL, populate, &s[i]) == 0;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (attr_ok) pthread_attr_destroy(&attr);
  populate(&s[0]);
  for (size_t i = 1; i < n; i++) {
    if (started[i])
      pthread_join(t[i], NULL);
    else
      populate(&s[i]);
  }
}
