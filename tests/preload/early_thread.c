/* SPDX-License-Identifier: BSD-3-Clause */
/* early_thread: with early_thread_lib.c's thread allocating since before the
 * interposer's constructor ran, the main thread's small blocks land on
 * hugetlb pages (the kernel's view: KernelPageSize of the mapping holding
 * them, from /proc/self/smaps) once the small heap is loaded, and the early
 * thread's blocks, from before and after the load, keep their bytes and are
 * freed where they came from.  Prints one line; exit 0 when all holds. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "early_thread.h"

/* The KernelPageSize (kB) of the mapping holding p, or 0. */
static long page_kb_of(const void *p) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) return 0;
  char line[512];
  int inside = 0;
  long kb = 0;
  uintptr_t a = (uintptr_t)p;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
      inside = a >= lo && a < hi;
    } else if (inside && sscanf(line, "KernelPageSize: %ld kB", &kb) == 1) {
      break;
    }
  }
  (void)fclose(f);
  return inside ? kb : 0;
}

int main(void) {
  while (early_thread_ops() < 20000) usleep(1000); /* the thread has run through the load */
  enum { N = 20000 };
  static char *mine[N];
  for (int i = 0; i < N; i++) {
    mine[i] = malloc(32 + (size_t)(i % 200));
    if (!mine[i]) return 1;
    memset(mine[i], i & 0xff, 32);
  }
  long kb = page_kb_of(mine[N / 2]);
  unsigned long ops = 0;
  long bad = early_thread_stop(&ops);
  int wrong = 0;
  for (int i = 0; i < N; i++) {
    if ((unsigned char)mine[i][31] != (unsigned char)(i & 0xff)) wrong++;
    free(mine[i]);
  }
  printf("early thread: %lu operations, %ld bad; main: %d wrong, a small block on %ld kB pages\n", ops, bad, wrong,
         kb);
  return bad == 0 && wrong == 0 && kb == 2048 ? 0 : 1;
}
