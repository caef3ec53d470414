/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool doctor: the hugetlb cgroup limits that apply to this process
 * (v2 and v1, reservation and fault-time), and whether they leave room for
 * the need. */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"
#include "doctor-util.h"

#define MB (1ULL << 20)
#define UNLIMITED_BYTES (1ULL << 62) /* cgroup v1 prints ~2^63 for "no limit" */

struct climit {
  unsigned long long limit, usage; /* bytes; limit UNLIMITED_BYTES when none */
  char where[PATH_MAX];            /* the cgroup file that sets it (real path) */
};

/* Mount point of the v2 hierarchy, or of the v1 one carrying "hugetlb". */
static int cgroup_mount(int v2, char *out, size_t len) {
  char mounts[65536];
  if (dr_read("/proc/mounts", mounts, sizeof mounts) <= 0) return -1;
  char *save = NULL;
  for (char *line = strtok_r(mounts, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    char dev[256], dir[1024], type[64], opts[512];
    if (sscanf(line, "%255s %1023s %63s %511s", dev, dir, type, opts) != 4) continue;
    if (v2 ? strcmp(type, "cgroup2") == 0 : (strcmp(type, "cgroup") == 0 && strstr(opts, "hugetlb"))) {
      (void)snprintf(out, len, "%s", dir);
      return 0;
    }
  }
  return -1;
}

/* Reads a limit file: "max" or a byte count.  Returns 0 when present. */
static int read_limit(const char *rel, unsigned long long *bytes) {
  char buf[64];
  if (dr_read(rel, buf, sizeof buf) <= 0) return -1;
  if (strncmp(buf, "max", 3) == 0) {
    *bytes = UNLIMITED_BYTES;
    return 0;
  }
  char *end = NULL;
  unsigned long long v = strtoull(buf, &end, 10);
  if (end == buf) return -1;
  *bytes = v >= UNLIMITED_BYTES ? UNLIMITED_BYTES : v;
  return 0;
}

/* Walks from the process's cgroup up to the hierarchy's root and keeps the
 * tightest room (limit - usage) of `limit_file`. */
static int tightest(const char *mnt, const char *cg, const char *limit_file, const char *usage_file,
                    struct climit *out) {
  char dir[PATH_MAX], path[PATH_MAX];
  int found = 0;
  (void)snprintf(dir, sizeof dir, "%s", cg);
  out->limit = UNLIMITED_BYTES;
  out->usage = 0;
  out->where[0] = '\0';
  for (;;) {
    unsigned long long lim, use = 0;
    (void)snprintf(path, sizeof path, "%s%s/%s", mnt, strcmp(dir, "/") == 0 ? "" : dir, limit_file);
    if (read_limit(path, &lim) == 0) {
      found = 1;
      char upath[PATH_MAX];
      (void)snprintf(upath, sizeof upath, "%s%s/%s", mnt, strcmp(dir, "/") == 0 ? "" : dir, usage_file);
      (void)dr_read_ull(upath, &use);
      unsigned long long room = lim > use ? lim - use : 0;
      unsigned long long best = out->limit > out->usage ? out->limit - out->usage : 0;
      if (lim != UNLIMITED_BYTES && (out->limit == UNLIMITED_BYTES || room < best)) {
        out->limit = lim;
        out->usage = use;
        (void)snprintf(out->where, sizeof out->where, "%s", path);
      }
    }
    if (strcmp(dir, "/") == 0 || dir[0] == '\0') break;
    char *slash = strrchr(dir, '/');
    if (!slash) break;
    if (slash == dir)
      slash[1] = '\0';
    else
      *slash = '\0';
  }
  return found ? 0 : -1;
}

static void fmt_bytes(unsigned long long b, char *buf, size_t len) {
  if (b >= UNLIMITED_BYTES)
    (void)snprintf(buf, len, "max");
  else
    (void)snprintf(buf, len, "%llu MiB", b / MB);
}

/* One line of /proc/self/cgroup ("ID:CONTROLLERS:PATH") a hugetlb controller
 * governs: the v2 line, or a v1 line naming hugetlb, whose hierarchy is
 * mounted.  Returns 0 with *v2, *cg (inside line) and the mount point. */
static int hugetlb_hierarchy(char *line, int *v2, const char **cg, char *mnt, size_t len) {
  char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
  if (!c2) return -1;
  *c1 = *c2 = '\0';
  const char *ctrl = c1 + 1;
  *v2 = strcmp(line, "0") == 0 && ctrl[0] == '\0';
  if (!*v2 && !strstr(ctrl, "hugetlb")) return -1;
  *cg = c2 + 1;
  return cgroup_mount(*v2, mnt, len);
}

/* The Slurm plugin's per-job cgroup (setuid-helper/cgroup.c): its
 * reservation limit is the job's grant, raised by hugepool-reserve.  Says so
 * and returns 1 when cg is one. */
static int hugepool_job_row(const char *cg, int v2) {
  unsigned long job = 0;
  char tail = 0;
  if (sscanf(cg, "/hugepool/job_%lu%c", &job, &tail) != 1) return 0;
  dr_row(
      "Slurm job %lu runs in its own hugetlb cgroup (hugepool job isolation, cgroup %s): its pages are its "
      "own, a mapping beyond its reservation limit fails with ENOMEM; hugepool-reserve PAGES raises it",
      job, v2 ? "v2" : "v1");
  dr_kv_num("job", (long long)job);
  dr_kv_str("isolation", "hugepool");
  return 1;
}

/* One page size's limits in one hierarchy. */
struct size_limits {
  struct climit fault, rsvd;
  int have_fault, have_rsvd; /* the files exist on the path to the root */
};

/* The tightest fault-time and reservation limits of one page size over cg
 * and its ancestors (v1 and v2 name the files differently).  Returns 0
 * when neither kind of file exists. */
static int read_size_limits(const char *mnt, const char *cg, int v2, const char *size, struct size_limits *out) {
  char lf[64], uf[64], rlf[64], ruf[64];
  (void)snprintf(lf, sizeof lf, "hugetlb.%s.%s", size, v2 ? "max" : "limit_in_bytes");
  (void)snprintf(uf, sizeof uf, "hugetlb.%s.%s", size, v2 ? "current" : "usage_in_bytes");
  (void)snprintf(rlf, sizeof rlf, "hugetlb.%s.rsvd.%s", size, v2 ? "max" : "limit_in_bytes");
  (void)snprintf(ruf, sizeof ruf, "hugetlb.%s.rsvd.%s", size, v2 ? "current" : "usage_in_bytes");
  out->have_fault = tightest(mnt, cg, lf, uf, &out->fault) == 0;
  out->have_rsvd = tightest(mnt, cg, rlf, ruf, &out->rsvd) == 0;
  return out->have_fault || out->have_rsvd;
}

/* The row of one page size's limits and use. */
static void size_limits_row(const char *cg, int v2, const char *size, const struct size_limits *l) {
  char a[32], b[32], c[32], d[32];
  fmt_bytes(l->fault.limit, a, sizeof a);
  fmt_bytes(l->fault.usage, b, sizeof b);
  fmt_bytes(l->rsvd.limit, c, sizeof c);
  fmt_bytes(l->rsvd.usage, d, sizeof d);
  dr_row("cgroup %s %s (%s): fault-time limit %s (used %s), reservation limit %s (used %s)", v2 ? "v2" : "v1", cg, size,
         a, b, l->have_rsvd ? c : "not supported", d);
  dr_kv_str("hierarchy", v2 ? "v2" : "v1");
  dr_kv_str("cgroup", cg);
  dr_kv_str("page", size);
  dr_kv_num("max_bytes", l->fault.limit >= UNLIMITED_BYTES ? -1 : (long long)l->fault.limit);
  dr_kv_num("current_bytes", (long long)l->fault.usage);
  dr_kv_num("rsvd_max_bytes", !l->have_rsvd || l->rsvd.limit >= UNLIMITED_BYTES ? -1 : (long long)l->rsvd.limit);
  dr_kv_num("rsvd_current_bytes", (long long)l->rsvd.usage);
}

/* The 2 MB reservation limit against the need: mmap fails with ENOMEM
 * beyond it.  In a hugepool job cgroup hugepool-reserve raises it. */
static void judge_rsvd_limit(const struct size_limits *l, int v2, int hp_job, unsigned long long want) {
  const struct climit *rsvd = &l->rsvd;
  if (!l->have_rsvd || rsvd->limit == UNLIMITED_BYTES) return;
  unsigned long long room = rsvd->limit - (rsvd->usage < rsvd->limit ? rsvd->usage : rsvd->limit);
  if (room >= want) return;
  char fix[PATH_MAX + 64];
  if (hp_job)
    (void)snprintf(fix, sizeof fix, "hugepool-reserve %llu   (inside the job: raises its limit with the pool)",
                   (rsvd->usage + want + 2 * MB - 1) / (2 * MB));
  else
    (void)snprintf(fix, sizeof fix, "echo %s > %s   (as root, or ask the batch system to raise it)", v2 ? "max" : "-1",
                   rsvd->where);
  dr_problem(DR_ERROR, fix,
             "hugetlb cgroup reservation limit: %s allows %llu more MiB of 2 MB pages, the job needs %llu MiB "
             "(mmap fails with ENOMEM)",
             rsvd->where, room / MB, want / MB);
}

/* The 2 MB fault-time limit: touching pages beyond it kills the process
 * with SIGBUS, so it must leave room for the need, and a reservation limit
 * no larger should turn that into ENOMEM at mmap. */
static void judge_fault_limit(const struct size_limits *l, int v2, unsigned long long want) {
  const struct climit *fault = &l->fault;
  if (!l->have_fault || fault->limit == UNLIMITED_BYTES) return;
  char fix[PATH_MAX + 64];
  (void)snprintf(fix, sizeof fix, "echo %s > %s   (as root; limit %s instead, which fails at mmap)", v2 ? "max" : "-1",
                 fault->where, v2 ? "hugetlb.2MB.rsvd.max" : "hugetlb.2MB.rsvd.limit_in_bytes");
  unsigned long long room = fault->limit > fault->usage ? fault->limit - fault->usage : 0;
  if (room < want)
    dr_problem(DR_ERROR, fix,
               "hugetlb cgroup fault-time limit: %s allows %llu more MiB of 2 MB pages, the job needs %llu "
               "MiB: touching the pages beyond it kills the process with SIGBUS",
               fault->where, room / MB, want / MB);
  else if (!l->have_rsvd || l->rsvd.limit > fault->limit)
    dr_problem(DR_WARNING, fix,
               "hugetlb cgroup fault-time limit %s (%llu MiB) is not matched by a reservation limit: a "
               "process that maps more than it allows is killed with SIGBUS at first touch instead of "
               "getting ENOMEM",
               fault->where, fault->limit / MB);
}

/* One hierarchy's limits for the process's cgroup: a row a page size, the
 * 2 MB ones judged against the need.  Returns 1 when any limit was found. */
static int check_hierarchy(int v2, const char *cg, const char *mnt, unsigned long long want) {
  int hp_job = hugepool_job_row(cg, v2);
  const char *sizes[] = {"2MB", "1GB"};
  int any = 0;
  for (int s = 0; s < 2; s++) {
    struct size_limits l;
    if (!read_size_limits(mnt, cg, v2, sizes[s], &l)) continue;
    any = 1;
    size_limits_row(cg, v2, sizes[s], &l);
    if (s != 0) continue; /* the job's need is counted in 2 MB pages */
    judge_rsvd_limit(&l, v2, hp_job, want);
    judge_fault_limit(&l, v2, want);
  }
  return any;
}

void dr_check_cgroups(const struct dr_need *need) {
  char self[4096];
  dr_section("cgroup", "hugetlb cgroup limits of this process (tightest over its cgroup and ancestors)");
  if (dr_read("/proc/self/cgroup", self, sizeof self) <= 0) {
    dr_row("(cannot read /proc/self/cgroup)");
    return;
  }
  unsigned long long want = (need->pages_2m ? need->pages_2m : 1) * 2 * MB;
  int any = 0;
  char *save = NULL;
  for (char *line = strtok_r(self, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    int v2 = 0;
    const char *cg = NULL;
    char mnt[1024];
    if (hugetlb_hierarchy(line, &v2, &cg, mnt, sizeof mnt) == 0 && check_hierarchy(v2, cg, mnt, want)) any = 1;
  }
  if (!any) dr_row("no hugetlb controller applies to this process: no limits");
}
