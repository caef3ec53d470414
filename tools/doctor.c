/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool doctor: tells a user or an administrator whether hugepool will
 * work on this node, for this process environment, and what to do if not.
 *
 * Rules this file keeps (it is an unprivileged tool, but may be started by
 * root, or by mistake from a setuid or setgid copy):
 *  1. It only reads; it never writes a file, runs a program or changes a
 *     limit.  Every fix is printed for the user to run.
 *  2. --root DIR (a prepared /proc and /sys tree, for tests) is refused in a
 *     privileged context: a set-id start (AT_SECURE) or real and effective
 *     ids that differ.  Root may use it only on a tree owned by root and not
 *     writable by group or others, so no other user can feed root's doctor.
 *  3. Below --root, no symlink is followed at the last path component (a tree
 *     cannot point the doctor at files outside it that way).
 *  4. Bounded everything: fixed buffers, files read up to a size limit.
 */
#define _GNU_SOURCE
#include "doctor.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef HUGEPOOL_VERSION
#define HUGEPOOL_VERSION "unknown"
#endif

static const char usage_text[] =
    "usage: hugepool doctor [--json] [--need SIZE] [--ranks N] [--root DIR]\n"
    "\n"
    "Checks whether hugepool will work on this node for this process environment\n"
    "and prints, for each problem, the command that fixes it.\n"
    "\n"
    "options:\n"
    "      --json        one JSON object instead of text\n"
    "      --need SIZE   memory each process of the job puts on hugetlb pages (K/M/G/T);\n"
    "                    the pool is checked against it (default: one free 2 MB page)\n"
    "      --ranks N     MPI ranks on this node: N times the need, plus the 3 pages per\n"
    "                    rank UCX's own shared memory takes from the pool\n"
    "      --root DIR    read /proc, /sys and /etc below DIR (prepared trees for tests;\n"
    "                    refused in a privileged context)\n"
    "  -h, --help        this text\n"
    "      --version     the hugepool version\n"
    "\n"
    "Exit status: 0 hugepool will work (warnings may be printed), 1 it will not as\n"
    "things stand (each problem comes with its fix), 2 usage error.\n";

/* ---- files below the root ---- */

static char root_dir[PATH_MAX] = "";

int dr_real_root(void) { return root_dir[0] == '\0'; }

static int dr_path(const char *rel, char *out, size_t len) {
  int n = snprintf(out, len, "%s%s", root_dir, rel);
  return (n < 0 || (size_t)n >= len) ? -1 : 0;
}

long dr_read(const char *rel, char *buf, size_t len) {
  char path[PATH_MAX];
  if (len == 0) return -1;
  buf[0] = '\0';
  if (dr_path(rel, path, sizeof path) != 0) return -1;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | (dr_real_root() ? 0 : O_NOFOLLOW));
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

#define MAX_SECTIONS 12
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

/* ---- command line ---- */

/* Rule 2: a --root tree is only for unprivileged runs, or root's own tree. */
static int accept_root(const char *dir) {
  if (getauxval(AT_SECURE) || getuid() != geteuid() || getgid() != getegid()) {
    (void)fprintf(stderr, "hugepool doctor: --root is refused in a privileged (set-id) process\n");
    return -1;
  }
  char real[PATH_MAX];
  if (!realpath(dir, real)) {
    (void)fprintf(stderr, "hugepool doctor: --root %s: %s\n", dir, strerror(errno));
    return -1;
  }
  struct stat st;
  if (stat(real, &st) != 0 || !S_ISDIR(st.st_mode)) {
    (void)fprintf(stderr, "hugepool doctor: --root %s is not a directory\n", dir);
    return -1;
  }
  if (geteuid() == 0 && (st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH)))) {
    (void)fprintf(stderr,
                  "hugepool doctor: as root, --root must be a directory owned by root and not writable by group or "
                  "others (%s is not)\n",
                  dir);
    return -1;
  }
  if (strcmp(real, "/") == 0) return 0; /* the real system */
  (void)snprintf(root_dir, sizeof root_dir, "%s", real);
  return 0;
}

static int parse_size(const char *s, unsigned long long *bytes) {
  char *end = NULL;
  errno = 0;
  if (*s < '0' || *s > '9') return -1;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno) return -1;
  unsigned shift = 0;
  switch (*end) {
    case '\0': break;
    case 'k':
    case 'K':
      shift = 10;
      end++;
      break;
    case 'm':
    case 'M':
      shift = 20;
      end++;
      break;
    case 'g':
    case 'G':
      shift = 30;
      end++;
      break;
    case 't':
    case 'T':
      shift = 40;
      end++;
      break;
    default: return -1;
  }
  if (shift && (*end == 'i' || *end == 'I')) end++;
  if (shift && (*end == 'b' || *end == 'B')) end++;
  if (*end != '\0' || (shift && v > (~0ULL >> shift))) return -1;
  *bytes = v << shift;
  return 0;
}

/* "--name VALUE" or "--name=VALUE" at argv[*i]: the value (advancing *i past
 * a separate one), or NULL. */
static const char *opt_value(int argc, char **argv, int *i, const char *name) {
  size_t n = strlen(name);
  const char *a = argv[*i];
  if (!a || strncmp(a, name, n) != 0) return NULL;
  if (a[n] == '=') return a + n + 1;
  if (a[n] == '\0' && *i + 1 < argc) return argv[++*i];
  return NULL;
}

int hugepool_doctor_main(int argc, char **argv);
int hugepool_doctor_main(int argc, char **argv) {
  int json = 0;
  struct dr_need need = {0};
  unsigned long long per_rank = 0, ranks = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = NULL;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      (void)fputs(usage_text, stdout);
      return 0;
    }
    if (strcmp(a, "--version") == 0) {
      printf("hugepool %s\n", HUGEPOOL_VERSION);
      return 0;
    }
    if (strcmp(a, "--json") == 0) {
      json = 1;
      continue;
    }
    if ((val = opt_value(argc, argv, &i, "--ranks")) != NULL) {
      char *end = NULL;
      errno = 0;
      unsigned long long r = strtoull(val, &end, 10);
      if (errno || *val < '1' || *val > '9' || *end != '\0' || r > 100000) {
        (void)fprintf(stderr, "hugepool doctor: bad rank count '%s'\n", val);
        return 2;
      }
      ranks = r;
      continue;
    }
    if ((val = opt_value(argc, argv, &i, "--need")) != NULL) {
      unsigned long long b;
      if (parse_size(val, &b) != 0) {
        (void)fprintf(stderr, "hugepool doctor: bad size '%s' (e.g. 4G, 512M)\n", val);
        return 2;
      }
      per_rank = (b + (2ULL << 20) - 1) >> 21;
      continue;
    }
    if ((val = opt_value(argc, argv, &i, "--root")) != NULL) {
      if (accept_root(val) != 0) return 2;
      continue;
    }
    (void)fprintf(stderr, "hugepool doctor: unknown or incomplete option '%s'\n%s", a, usage_text);
    return 2;
  }

  /* An MPI job: UCX (Debian's MPICH is ch4:ucx) puts its own SysV shared
   * memory on hugetlb pages whenever the pool has room, 3 pages per rank
   * (measured, UCX 1.13), and those come out of the same pool. */
  unsigned long long ucx = ranks * DR_UCX_PAGES_PER_RANK;
  need.pages_2m = (ranks ? ranks : 1) * per_rank + ucx;
  dr_section("need", "what the job needs from the 2 MB pool");
  if (need.pages_2m) {
    dr_row("%llu pages: %llu rank%s x %llu pages of buffers%s", need.pages_2m, ranks ? ranks : 1, ranks > 1 ? "s" : "",
           per_rank, ranks ? " + 3 per rank for UCX's shared memory" : "");
    dr_kv_num("pages", (long long)need.pages_2m);
    dr_kv_num("ranks", (long long)(ranks ? ranks : 1));
    dr_kv_num("buffer_pages_per_rank", (long long)per_rank);
    dr_kv_num("ucx_pages", (long long)ucx);
  } else {
    dr_row("at least one free page (no --need given)");
  }

  unsigned long long free_2m = 0, reservable_2m = 0;
  dr_check_pools(&need, &free_2m, &reservable_2m);
  unsigned long long want = need.pages_2m ? need.pages_2m : 1;
  dr_check_mounts_thp();
  dr_check_cgroups(&need);
  dr_check_limits_env();
  dr_check_helper(&need, free_2m < want);

  if (json)
    print_json();
  else
    print_text();
  return count(DR_ERROR) ? 1 : 0;
}
