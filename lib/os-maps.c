/* SPDX-License-Identifier: BSD-3-Clause */
/* The OS layer, continued: the one reader of /proc/self/maps, for a move's
 * pieces (os-move.c) and a split page's protection (os-split.c).  Same
 * contract as os.c (os.h); no malloc: a 4 KB buffer on the stack, and a
 * line longer than that (a path name, of no interest) loses its middle. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "os-kernel.h"

/* One line's start: "start-end perms ..."; false if it is not one. */
static bool parse_line(char *line, uintptr_t *start, uintptr_t *end, const char **perms) {
  char *p = NULL;
  *start = (uintptr_t)strtoull(line, &p, 16);
  if (!p || *p != '-') return false;
  *end = (uintptr_t)strtoull(p + 1, &p, 16);
  if (!p || *p != ' ') return false;
  *perms = p + 1;
  return true;
}

/* The complete lines of buf[0, have) go to fn; returns the offset of the
 * unfinished rest, or -1 once fn asked to stop. */
static long walk_lines(char *buf, size_t have, bool *at_line_start, os_maps_fn fn, void *arg) {
  char *line = buf, *nl;
  while ((nl = memchr(line, '\n', have - (size_t)(line - buf))) != NULL) {
    *nl = '\0';
    uintptr_t s, e;
    const char *perms;
    if (*at_line_start && parse_line(line, &s, &e, &perms) && !fn(s, e, perms, arg)) return -1;
    *at_line_start = true;
    line = nl + 1;
  }
  return (long)(line - buf);
}

int os_maps_each(os_maps_fn fn, void *arg) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[4096];
  size_t have = 0;
  bool at_line_start = true, failed = false;
  for (;;) {
    ssize_t r = read(fd, buf + have, sizeof(buf) - 1 - have);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) failed = true;
    if (r <= 0) break;
    have += (size_t)r;
    long rest_at = walk_lines(buf, have, &at_line_start, fn, arg);
    if (rest_at < 0) break;
    /* Keep the unfinished line; one that fills the buffer is a path name,
     * of no interest: drop its middle. */
    size_t rest = have - (size_t)rest_at;
    if (rest == sizeof(buf) - 1) {
      at_line_start = false;
      rest = 0;
    }
    memmove(buf, buf + rest_at, rest);
    have = rest;
  }
  int err = errno;
  close(fd);
  errno = err;
  return failed ? -1 : 0;
}

typedef struct {
  uintptr_t lo, hi;
  uintptr_t (*out)[2];
  int n, max;
} mappings_walk;

static bool collect(uintptr_t s, uintptr_t e, const char *perms, void *arg) {
  (void)perms;
  mappings_walk *w = arg;
  if (s >= w->hi) return false; /* the file is sorted by address */
  if (e > w->lo) {
    w->out[w->n][0] = s > w->lo ? s : w->lo;
    w->out[w->n][1] = e < w->hi ? e : w->hi;
    w->n++;
  }
  return w->n < w->max;
}

int os_mappings_in(uintptr_t lo, uintptr_t hi, uintptr_t (*out)[2], int max) {
  mappings_walk w = {lo, hi, out, 0, max};
  if (max <= 0) return 0;
  return os_maps_each(collect, &w) != 0 ? -1 : w.n;
}

typedef struct {
  uintptr_t addr;
  int prot;
} prot_walk;

static bool find_prot(uintptr_t s, uintptr_t e, const char *perms, void *arg) {
  prot_walk *w = arg;
  if (w->addr < s || w->addr >= e) return w->addr >= e; /* sorted: past it, stop */
  w->prot = 0;
  if (perms[0] == 'r') w->prot |= PROT_READ;
  if (perms[0] != '\0' && perms[1] == 'w') w->prot |= PROT_WRITE;
  if (perms[0] != '\0' && perms[1] != '\0' && perms[2] == 'x') w->prot |= PROT_EXEC;
  return false;
}

int os_prot_at(uintptr_t addr) {
  prot_walk w = {addr, -1};
  if (os_maps_each(find_prot, &w) != 0) return -1;
  return w.prot;
}
