/* SPDX-License-Identifier: BSD-3-Clause */
/* What the files of the OS layer (os*.c) share, and nothing else includes:
 * the reporter's one-line voice and the page-size flags glibc lacks.  Not
 * installed.  Lock order: none (see os.h). */
#ifndef HUGEPOOL_OS_KERNEL_H
#define HUGEPOOL_OS_KERNEL_H

#include <sys/mman.h>

#include "os.h"

/* glibc defines MAP_HUGE_SHIFT and MADV_POPULATE_WRITE (2.35+), not these. */
#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << MAP_HUGE_SHIFT)
#endif
#ifndef MAP_HUGE_1GB
#define MAP_HUGE_1GB (30 << MAP_HUGE_SHIFT)
#endif

/* One line for the user, through the core's reporter (none yet: nothing). */
HP_INTERNAL void os_report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* HUGEPOOL_OS_KERNEL_H */
