/* SPDX-License-Identifier: BSD-3-Clause */
/* The lines that say whose heap serves a process: passive (preload.h)
 * under an older glibc (lib/libc-floor.h) or a sanitizer (other-heap.c),
 * and another allocator's heap behind ours. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "hooks.h"
#include "preload.h"

/* With HUGEPOOL_VERBOSE set, one line says why this process runs on another
 * heap alone (the options may not have been read: the variable is read here,
 * by the option table's rules).  `who`: the object whose malloc serves it. */
void hpl_say_passive(hpl_passive_why why, const char *who) {
  const char *v = getenv(option_desc(HP_OPT_VERBOSE)->name);
  long long on = 0;
  char expected[128];
  if (!v || option_parse(HP_OPT_VERBOSE, v, true, &on, expected, sizeof(expected)) != 0 || !on) return;
  char line[640];
  long pid = (long)getpid();
  int n = 0;
  switch (why) {
    case HPL_PASSIVE_OLD_GLIBC:
      n = snprintf(line, sizeof(line),
                   "hugepool-preload[%ld]: glibc %s is older than %d.%d: this process runs on glibc's malloc alone\n",
                   pid, gnu_get_libc_version(), HP_LIBC_ACTIVE_FLOOR_MAJOR, HP_LIBC_ACTIVE_FLOOR_MINOR);
      break;
    case HPL_PASSIVE_SANITIZER:
      n = snprintf(line, sizeof(line),
                   "hugepool-preload[%ld]: a checker's heap (%s) serves every request: hugepool stays out\n", pid,
                   who);
      break;
    case HPL_PASSIVE_OTHER_HEAP:
      n = snprintf(line, sizeof(line),
                   "hugepool-preload[%ld]: the program links its own allocator (%s), which serves every request: "
                   "hugepool stays out (HUGEPOOL_OTHER_HEAP=share puts large requests on hugetlb pages)\n",
                   pid, who);
      break;
  }
  if (n > 0) {
    ssize_t w = write(STDERR_FILENO, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
    (void)w;
  }
}

/* Another allocator's heap behind ours (other-heap.c), with
 * HUGEPOOL_VERBOSE; `threshold` SIZE_MAX: hugepool stays out (the passive
 * line says so). */
void hpl_say_other_heap(const char *who, size_t threshold, bool small_heap_asked) {
  char line[700];
  long pid = (long)getpid();
  int n = 0;
  if (!hp_trace_on()) return; /* a decision, said with HUGEPOOL_VERBOSE */
  if (small_heap_asked)
    n = snprintf(line, sizeof(line),
                 "hugepool-preload[%ld]: --small-heap is off in this process: its small requests belong to the "
                 "allocator it loads (%s)\n",
                 pid, who);
  else if (threshold != SIZE_MAX)
    n = snprintf(line, sizeof(line),
                 "hugepool-preload[%ld]: requests below %zu bytes go to the allocator this process loads (%s), "
                 "larger ones to hugepool\n",
                 pid, threshold, who);
  if (n > 0) os_write_stderr(line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}
