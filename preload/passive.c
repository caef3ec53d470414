/* SPDX-License-Identifier: BSD-3-Clause */
/* Passive under an older glibc (lib/libc-floor.h: hp_libc_complete() says
 * whether the core may run): the one line that says why not. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "preload.h"

/* Under a glibc older than the core needs, with HUGEPOOL_VERBOSE set, one
 * line says why this process runs on glibc's malloc alone (the options are
 * the core's, which does not run here: the variable is read as it is). */
void hpl_say_passive(void) {
  const char *v = getenv("HUGEPOOL_VERBOSE");
  if (!v || !*v || (v[0] == '0' && !v[1])) return;
  char line[256];
  int n = snprintf(line, sizeof(line),
                   "hugepool-preload[%ld]: glibc %s is older than %d.%d: this process runs on glibc's malloc alone\n",
                   (long)getpid(), gnu_get_libc_version(), HP_LIBC_ACTIVE_FLOOR_MAJOR, HP_LIBC_ACTIVE_FLOOR_MINOR);
  if (n > 0) {
    ssize_t w = write(STDERR_FILENO, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
    (void)w;
  }
}
