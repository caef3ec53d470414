/* SPDX-License-Identifier: BSD-3-Clause */
/* What fork() costs a process holding large malloc'ed buffers: allocates
 * MiB (argv[1], default 256) in 16 MiB buffers, touches them, then times
 * fork() + child _exit() + waitpid() 7 times and prints the median and the
 * min / max in ms.  Run plain and under hugepool-run --fork copy|keep. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 256;
  size_t n = mib / 16;
  char **bufs = calloc(n, sizeof(char *));
  for (size_t i = 0; i < n; i++) {
    bufs[i] = malloc((size_t)16 << 20);
    memset(bufs[i], (int)i, (size_t)16 << 20);
  }
  double t[7];
  for (int r = 0; r < 7; r++) {
    double t0 = now_ms();
    pid_t pid = fork();
    if (pid == 0) _exit(bufs[0][0] == 0 ? 0 : 1);
    int st;
    waitpid(pid, &st, 0);
    t[r] = now_ms() - t0;
  }
  qsort(t, 7, sizeof(double), cmp);
  printf("%zu MiB live: fork+exit+wait median %.2f ms [%.2f .. %.2f]\n", mib, t[3], t[0], t[6]);
  for (size_t i = 0; i < n; i++) free(bufs[i]);
  free(bufs);
  return 0;
}
