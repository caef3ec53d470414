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
 * never run on them) and a 64 KiB stack, and are joined before the call
 * returns.  Where a thread cannot be started its slice is faulted by the
 * caller.  A page lands on the node of the thread that faults it, as the
 * registration's own fault would put it on the caller's: on a machine of
 * several nodes the helpers run only on the CPUs of the caller's node that
 * it may use, and where those cannot be read nothing is done here. */
#define _GNU_SOURCE
#include "prefault.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "os.h"

enum { MAX_THREADS = 8 };
#define SLICE_MIN ((size_t)32 << 20) /* less per thread costs more in thread starts than it saves */
#define GRANULE ((size_t)2 << 20)

typedef struct slice {
  char *addr;
  size_t size;
} slice;

static void *populate(void *arg) {
  const slice *s = arg;
  int saved = errno;
  (void)os_populate(s->addr, s->size); /* best effort: see the file's comment */
  errno = saved;
  return NULL;
}

/* The CPUs of a cpulist ("0-15,32-47") into *set; false where unreadable. */
static bool parse_cpulist(const char *text, cpu_set_t *set) {
  CPU_ZERO(set);
  const char *c = text;
  while (*c && *c != '\n') {
    char *end;
    long lo = strtol(c, &end, 10), hi = lo;
    if (end == c || lo < 0) return false;
    if (*end == '-') {
      c = end + 1;
      hi = strtol(c, &end, 10);
      if (end == c || hi < lo) return false;
    }
    for (long cpu = lo; cpu <= hi && cpu < CPU_SETSIZE; cpu++) CPU_SET((int)cpu, set);
    c = *end == ',' ? end + 1 : end;
  }
  return CPU_COUNT(set) > 0;
}

/* The CPUs the helpers may run on, in *set: the caller's, and on a machine
 * of several nodes only those of the node it runs on.  False: none. */
static bool helper_cpus(cpu_set_t *set) {
  if (sched_getaffinity(0, sizeof(*set), set) != 0) return false;
  if (os_node_count() <= 1) return true;
  unsigned cpu, node;
  if (getcpu(&cpu, &node) != 0) return false;
  char path[64], text[4096];
  (void)snprintf(path, sizeof(path), "/sys/devices/system/node/node%u/cpulist", node);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = read(fd, text, sizeof(text) - 1);
  close(fd);
  cpu_set_t on_node;
  if (n <= 0 || (text[n] = '\0', !parse_cpulist(text, &on_node))) return false;
  CPU_AND(set, set, &on_node);
  return CPU_COUNT(set) > 0;
}

void hp_prefault_parallel(void *addr, size_t size) {
  if (size < 2 * SLICE_MIN || (uintptr_t)addr % GRANULE != 0) return;
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
    (void)pthread_attr_setstacksize(&attr, (size_t)64 << 10);
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
