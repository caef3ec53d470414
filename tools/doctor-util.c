/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool doctor: what every check uses.  Files are read below the root
 * ("/" unless --root named a prepared tree); the report collects sections,
 * rows and problems and prints them once, as text or JSON.  Nothing here
 * calls a check or the command line.
 *
 * Rules kept (those of doctor.c that live here):
 *  3. Below --root, no symlink is followed at the last path component (a tree
 *     cannot point the doctor at files outside it that way).
 *  4. Bounded everything: fixed buffers, files read up to a size limit.
 */
#define _GNU_SOURCE
#include "doctor-util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef HUGEPOOL_VERSION
#define HUGEPOOL_VERSION "unknown"
#endif

/* ---- files below the root ---- */

static char root_dir[PATH_MAX] = "";

int dr_real_root(void) { return root_dir[0] == '\0'; }

void dr_set_root(const char *dir) { (void)snprintf(root_dir, sizeof root_dir, "%s", dir); }

static int dr_path(const char *rel, char *out, size_t len) {
  int n = snprintf(out, len, "%s%s", root_dir, rel);
  return (n < 0 || (size_t)n >= len) ? -1 : 0;
}

/* Opens ROOT/rel to read: no symlink at its last component inside a --root
 * tree. */
static int dr_open(const char *rel) {
  char path[PATH_MAX];
  if (dr_path(rel, path, sizeof path) != 0) return -1;
  return open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | (dr_real_root() ? 0 : O_NOFOLLOW));
}

long dr_read(const char *rel, char *buf, size_t len) {
  if (len == 0) return -1;
  buf[0] = '\0';
  int fd = dr_open(rel);
  if (fd < 0) return -1;
  size_t got = 0;
  while (got + 1 < len) {
    ssize_t n = read(fd, buf + got, len - 1 - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += (size_t)n;
  }
  close(fd);
  buf[got] = '\0';
  return (long)got;
}

FILE *dr_fopen(const char *rel) {
  int fd = dr_open(rel);
  if (fd < 0) return NULL;
  FILE *f = fdopen(fd, "r");
  if (!f) close(fd);
  return f;
}

int dr_read_ull(const char *rel, unsigned long long *out) {
  char buf[64];
  if (dr_read(rel, buf, sizeof buf) <= 0) return -1;
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(buf, &end, 10);
  if (errno != 0 || end == buf || (*end != '\0' && *end != '\n')) return -1;
  *out = v;
  return 0;
}

DIR *dr_opendir(const char *rel) {
  char path[PATH_MAX];
  return dr_path(rel, path, sizeof path) == 0 ? opendir(path) : NULL;
}

int dr_lstat(const char *rel, struct stat *st) {
  char path[PATH_MAX];
  return dr_path(rel, path, sizeof path) == 0 ? lstat(path, st) : -1;
}

int dr_stat(const char *rel, struct stat *st) {
  char path[PATH_MAX];
  if (dr_path(rel, path, sizeof path) != 0) return -1;
  return dr_real_root() ? stat(path, st) : lstat(path, st);
}

/* ---- the report model ---- */

#define MAX_SECTIONS 16
#define MAX_ROWS 96
#define MAX_KV 14
#define MAX_PROBLEMS 48

struct kv {
  char key[32];
  int is_num;
  long long num;
  char str[160];
};
struct row {
  char text[240];
  int nkv;
  struct kv kv[MAX_KV];
};
struct section {
  const char *name, *title;
  int nrows;
  struct row rows[MAX_ROWS];
};
struct problem {
  enum dr_severity sev;
  char what[400];
  char fix[400];
};

static struct section sections[MAX_SECTIONS];
static int nsections;
static struct problem problems[MAX_PROBLEMS];
static int nproblems;

void dr_section(const char *name, const char *title) {
  if (nsections < MAX_SECTIONS) {
    sections[nsections].name = name;
    sections[nsections].title = title;
    sections[nsections].nrows = 0;
    nsections++;
  }
}

static struct row *cur_row(void) {
  if (nsections == 0) return NULL;
  struct section *s = &sections[nsections - 1];
  return s->nrows > 0 ? &s->rows[s->nrows - 1] : NULL;
}

int dr_section_rows(void) { return nsections ? sections[nsections - 1].nrows : 0; }

void dr_row(const char *fmt, ...) {
  if (nsections == 0) return;
  struct section *s = &sections[nsections - 1];
  if (s->nrows >= MAX_ROWS) return;
  struct row *r = &s->rows[s->nrows++];
  memset(r, 0, sizeof *r);
  va_list ap;
  va_start(ap, fmt);
  (void)vsnprintf(r->text, sizeof r->text, fmt, ap);
  va_end(ap);
}

static struct kv *new_kv(const char *key) {
  struct row *r = cur_row();
  if (!r || r->nkv >= MAX_KV) return NULL;
  struct kv *k = &r->kv[r->nkv++];
  (void)snprintf(k->key, sizeof k->key, "%s", key);
  return k;
}

void dr_kv_num(const char *key, long long value) {
  struct kv *k = new_kv(key);
  if (k) {
    k->is_num = 1;
    k->num = value;
  }
}

void dr_kv_str(const char *key, const char *value) {
  struct kv *k = new_kv(key);
  if (k) (void)snprintf(k->str, sizeof k->str, "%s", value ? value : "");
}

void dr_problem(enum dr_severity sev, const char *fix, const char *fmt, ...) {
  if (nproblems >= MAX_PROBLEMS) return;
  struct problem *p = &problems[nproblems++];
  p->sev = sev;
  va_list ap;
  va_start(ap, fmt);
  (void)vsnprintf(p->what, sizeof p->what, fmt, ap);
  va_end(ap);
  (void)snprintf(p->fix, sizeof p->fix, "%s", fix ? fix : "");
}

static int count(enum dr_severity sev) {
  int n = 0;
  for (int i = 0; i < nproblems; i++) n += problems[i].sev == sev;
  return n;
}

static const char *sev_name(enum dr_severity s) {
  return s == DR_ERROR ? "error" : s == DR_WARNING ? "warning" : "note";
}

/* ---- output ---- */

static void json_string(const char *s) {
  putchar('"');
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      printf("\\%c", *p);
    else if (*p == '\n')
      (void)fputs("\\n", stdout);
    else if (*p == '\t')
      (void)fputs("\\t", stdout);
    else if (*p < 0x20 || *p == 0x7f)
      printf("\\u%04x", *p);
    else
      putchar(*p);
  }
  putchar('"');
}

static const char *verdict_word(void) { return count(DR_ERROR) ? "fail" : count(DR_WARNING) ? "warn" : "ok"; }

static void verdict_text(char *buf, size_t len) {
  int e = count(DR_ERROR), w = count(DR_WARNING);
  if (e)
    (void)snprintf(buf, len, "hugepool will not work as things stand: %d problem%s, %d warning%s", e, e == 1 ? "" : "s",
                   w, w == 1 ? "" : "s");
  else if (w)
    (void)snprintf(buf, len, "hugepool will work, with %d warning%s", w, w == 1 ? "" : "s");
  else
    (void)snprintf(buf, len, "hugepool will work");
}

static void print_json(void) {
  char verdict[160];
  verdict_text(verdict, sizeof verdict);
  printf("{\"version\": ");
  json_string(HUGEPOOL_VERSION);
  printf(", \"verdict\": ");
  json_string(verdict_word());
  printf(", \"summary\": ");
  json_string(verdict);
  printf(", \"errors\": %d, \"warnings\": %d", count(DR_ERROR), count(DR_WARNING));
  for (int i = 0; i < nsections; i++) {
    const struct section *s = &sections[i];
    printf(", ");
    json_string(s->name);
    printf(": [");
    for (int j = 0; j < s->nrows; j++) {
      const struct row *r = &s->rows[j];
      printf("%s{\"text\": ", j ? ", " : "");
      json_string(r->text);
      for (int k = 0; k < r->nkv; k++) {
        printf(", ");
        json_string(r->kv[k].key);
        printf(": ");
        if (r->kv[k].is_num)
          printf("%lld", r->kv[k].num);
        else
          json_string(r->kv[k].str);
      }
      printf("}");
    }
    printf("]");
  }
  printf(", \"problems\": [");
  for (int i = 0; i < nproblems; i++) {
    printf("%s{\"severity\": ", i ? ", " : "");
    json_string(sev_name(problems[i].sev));
    printf(", \"what\": ");
    json_string(problems[i].what);
    printf(", \"fix\": ");
    json_string(problems[i].fix);
    printf("}");
  }
  printf("]}\n");
}

static void print_text(void) {
  for (int i = 0; i < nsections; i++) {
    const struct section *s = &sections[i];
    printf("%s\n", s->title);
    for (int j = 0; j < s->nrows; j++) printf("  %s\n", s->rows[j].text);
    if (s->nrows == 0) printf("  (none)\n");
  }
  if (nproblems) printf("\n");
  for (int pass = DR_ERROR; pass >= DR_INFO; pass--) {
    for (int i = 0; i < nproblems; i++) {
      if ((int)problems[i].sev != pass) continue;
      printf("%s: %s\n", sev_name(problems[i].sev), problems[i].what);
      if (problems[i].fix[0]) printf("  fix: %s\n", problems[i].fix);
    }
  }
  char verdict[160];
  verdict_text(verdict, sizeof verdict);
  printf("\nverdict: %s\n", verdict);
}

int dr_errors(void) { return count(DR_ERROR); }

void dr_print(int json) {
  if (json)
    print_json();
  else
    print_text();
}
