/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool doctor: tells a user or an administrator whether hugepool will
 * work on this node, for this process environment, and what to do if not.
 *
 * Rules this file keeps (it is an unprivileged tool, but may be started by
 * root, or by mistake from a setuid or setgid copy):
 *  1. It only reads; it never writes a file, runs a program or changes a
 *     limit.  Every fix is printed for the user to run.  The one exception
 *     is asked for by name: --measure maps up to four free 2 MB pages,
 *     privately, for about 50 ms (doctor-tlb.c), and unmaps them.
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
#include "doctor-util.h"
#include "../lib/options.h" /* HP_HOLD_FLOOR */

#include <errno.h>
#include <limits.h>
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
    "usage: hugepool doctor [--json] [--need SIZE] [--ranks N] [--measure] [--root DIR]\n"
    "\n"
    "Checks whether hugepool will work on this node for this process environment\n"
    "and prints, for each problem, the command that fixes it.\n"
    "\n"
    "options:\n"
    "      --json        one JSON object instead of text\n"
    "      --need SIZE   memory each process of the job puts on hugetlb pages: a size\n"
    "                    with its unit (512M, 4G; K/M/G/T), or a bare number of 2 MB\n"
    "                    pages as hugepool-reserve takes them (--need 8: 8 pages, 16 MiB);\n"
    "                    the pool is checked against it (default: one free 2 MB page)\n"
    "      --ranks N     MPI ranks on this node: N times the need, plus the 3 pages per\n"
    "                    rank UCX's own shared memory takes from the pool\n"
    "      --measure     also measure whether this CPU translates a 2 MB page with one\n"
    "                    TLB entry (a virtual machine may not): maps up to four free\n"
    "                    2 MB pages for about 50 ms; not with --root\n"
    "      --root DIR    read /proc, /sys and /etc below DIR (prepared trees for tests;\n"
    "                    refused in a privileged context)\n"
    "  -h, --help        this text\n"
    "      --version     the hugepool version\n"
    "\n"
    "Exit status: 0 hugepool will work (warnings may be printed), 1 it will not as\n"
    "things stand (each problem comes with its fix), 2 usage error.\n";

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
  dr_set_root(real);
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

/* --need's value in 2 MB pages: a bare number is pages (as hugepool-reserve
 * counts them), a number with a unit is bytes rounded up to pages. */
static int need_pages(const char *s, unsigned long long *pages) {
  unsigned long long v;
  if (parse_size(s, &v) != 0) return -1;
  size_t n = strlen(s);
  *pages = s[n - 1] >= '0' && s[n - 1] <= '9' ? v : (v + (2ULL << 20) - 1) >> 21;
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
  int json = 0, measure = 0;
  const char *root = NULL;
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
    if (strcmp(a, "--measure") == 0) {
      measure = 1;
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
      if (need_pages(val, &per_rank) != 0) {
        (void)fprintf(stderr, "hugepool doctor: bad size '%s' (a size with its unit: 4G, 512M; or a number of 2 MB pages)\n",
                      val);
        return 2;
      }
      continue;
    }
    if ((val = opt_value(argc, argv, &i, "--root")) != NULL) {
      if (accept_root(val) != 0) return 2;
      root = val;
      continue;
    }
    (void)fprintf(stderr, "hugepool doctor: unknown or incomplete option '%s'\n%s", a, usage_text);
    return 2;
  }

  if (measure && root) {
    (void)fprintf(stderr, "hugepool doctor: --measure measures this machine's CPU; it cannot go with --root\n");
    return 2;
  }

  /* An MPI job: UCX (Debian's MPICH is ch4:ucx) puts its own SysV shared
   * memory on hugetlb pages whenever the pool has room, 3 pages per rank
   * (measured, UCX 1.13), and those come out of the same pool. */
  unsigned long long ucx = ranks * DR_UCX_PAGES_PER_RANK;
  need.pages_2m = (ranks ? ranks : 1) * per_rank + ucx;
  dr_section("need", "what the job needs from the 2 MB pool");
  if (need.pages_2m) {
    dr_row("%llu page%s: %llu rank%s x %llu page%s of buffers%s", need.pages_2m, need.pages_2m == 1 ? "" : "s",
           ranks ? ranks : 1, ranks > 1 ? "s" : "", per_rank, per_rank == 1 ? "" : "s",
           ranks ? " + 3 per rank for UCX's shared memory" : "");
    dr_kv_num("pages", (long long)need.pages_2m);
    dr_kv_num("ranks", (long long)(ranks ? ranks : 1));
    dr_kv_num("buffer_pages_per_rank", (long long)per_rank);
    dr_kv_num("ucx_pages", (long long)ucx);
  } else {
    dr_row("at least one free page (no --need given)");
  }
  /* A program that is not an MPI rank holds back, under hugepool-run, a
   * single new request beyond an eighth of the pool (HUGEPOOL_HOLD=share,
   * preload/hold.c): a pool sized for such a request alone serves it only
   * with --hold all. */
  if (!ranks && per_rank > HP_HOLD_FLOOR / (2u << 20))
    dr_problem(DR_INFO, "hugepool-run --hold all -- PROGRAM",
               "under hugepool-run, a program that is not an MPI rank leaves a single new request of more than an "
               "eighth of the pool (and 64 MiB) to glibc (HUGEPOOL_HOLD=share); if one buffer is most of these "
               "%llu pages, run it with --hold all", need.pages_2m);

  unsigned long long free_2m = 0, reservable_2m = 0;
  dr_check_pools(&need, &free_2m, &reservable_2m);
  unsigned long long want = need.pages_2m ? need.pages_2m : 1;
  dr_check_holders();
  dr_check_mounts_thp();
  dr_check_tlb(measure);
  dr_check_cgroups(&need);
  dr_check_limits_env();
  dr_check_cuda();
  dr_check_helper(&need, free_2m < want);

  dr_print(json);
  return dr_errors() ? 1 : 0;
}
