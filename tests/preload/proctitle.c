/* SPDX-License-Identifier: BSD-3-Clause */
/* A program that writes its process title over its argv and environment
 * strings, as redis, nginx and postgres do (setproctitle): the environment
 * is first copied elsewhere ("copy"), or dropped ("clear"), then the
 * original strings are overwritten with the title and filler bytes.  It
 * then makes one large allocation and prints its pid: the preload must
 * still write its statistics where HUGEPOOL_STATS_FILE said at start-up.
 *   proctitle copy|clear [args...] */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  int clear = strcmp(argv[1], "clear") == 0;
  /* The strings' area: argv's, then environ's right after it. */
  char *start = argv[0], *end = argv[argc - 1] + strlen(argv[argc - 1]) + 1;
  size_t n = 0;
  while (environ[n]) n++;
  for (size_t i = 0; i < n; i++)
    if (environ[i] == end) end = environ[i] + strlen(environ[i]) + 1;
  if (clear) {
    clearenv();
  } else {
    char **copy = calloc(n + 1, sizeof(char *));
    if (!copy) return 1;
    for (size_t i = 0; i < n; i++) copy[i] = strdup(environ[i]);
    environ = copy;
  }
  memset(start, '\002', (size_t)(end - start));
  (void)snprintf(start, (size_t)(end - start), "proctitle: worker");
  char *big = malloc(8 << 20);
  if (!big) return 1;
  memset(big, 1, 8 << 20);
  free(big);
  printf("%ld\n", (long)getpid());
  return 0;
}
