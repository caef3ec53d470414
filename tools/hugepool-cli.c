/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool: the user's front door to the tools.
 *
 *   hugepool doctor [--json] [--need SIZE]   will hugepool work here, and if not, why
 *   hugepool stats FILES...                  merge a job's per-rank statistics
 *
 * `stats` runs hugepool-stats from the directory this program lives in, never
 * from PATH, and only outside a set-id start. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#ifndef HUGEPOOL_VERSION
#define HUGEPOOL_VERSION "unknown"
#endif

int hugepool_doctor_main(int argc, char **argv);

static const char usage_text[] =
    "usage: hugepool COMMAND [options]\n"
    "\n"
    "commands:\n"
    "  doctor    check whether hugepool will work on this node, and how to fix it if not\n"
    "  stats     merge the per-rank statistics files of a job into one report\n"
    "\n"
    "  hugepool COMMAND --help   options of a command\n"
    "  hugepool --version        the version\n";

static int run_stats(char **argv) {
  if (getauxval(AT_SECURE)) {
    (void)fprintf(stderr, "hugepool: refusing to run hugepool-stats from a set-id process\n");
    return 2;
  }
  char self[PATH_MAX], tool[PATH_MAX + 32];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    perror("hugepool: /proc/self/exe");
    return 2;
  }
  self[n] = '\0';
  char *slash = strrchr(self, '/');
  if (slash) *slash = '\0';
  (void)snprintf(tool, sizeof tool, "%s/hugepool-stats", self);
  argv[0] = tool;
  execv(tool, argv);
  (void)fprintf(stderr, "hugepool: cannot run %s: %s\n", tool, strerror(errno));
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
    (void)fputs(usage_text, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (strcmp(argv[1], "--version") == 0) {
    printf("hugepool %s\n", HUGEPOOL_VERSION);
    return 0;
  }
  if (strcmp(argv[1], "doctor") == 0) return hugepool_doctor_main(argc - 1, argv + 1);
  if (strcmp(argv[1], "stats") == 0) return run_stats(argv + 1);
  (void)fprintf(stderr, "hugepool: unknown command '%s'\n%s", argv[1], usage_text);
  return 2;
}
