/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE /* dirfd, O_PATH */
/* hugepool-reserve: per-job hugetlb isolation through the kernel's hugetlb
 * cgroup controller, the part both sides read.  A job's processes live in
 * <hierarchy>/hugepool/job_<id> whose reservation limit
 * (hugetlb.<size>.rsvd.max in v2, hugetlb.<size>.rsvd.limit_in_bytes in v1)
 * is the job's grant: a mapping beyond it fails at mmap with ENOMEM.  The
 * fault-time limit is never set (it would turn a fault into SIGBUS).  This
 * file finds the hierarchy, names and reads its files, and finds the
 * helper's caller's job; cgroup-job.c makes, fills and removes a job's
 * cgroup (the root side, with rules 2, 4 and 6).  Rules kept:
 *
 *  1. Detect, never guess: the hierarchy comes from /proc/self/mountinfo (a
 *     cgroup2 mount whose root cgroup.controllers lists hugetlb, else a v1
 *     mount whose super options name hugetlb), mounted at its root ("/"),
 *     with no escaped characters in its path.  Nothing found: no isolation,
 *     and the reason is returned for the job's output and the audit log.
 *  3. The helper finds the caller's job from the kernel alone: the caller's
 *     own cgroup (/proc/self/cgroup) must be exactly /hugepool/job_<N> of that
 *     hierarchy, N a root-owned registry entry of the caller's uid.  Every
 *     component is opened O_NOFOLLOW below the mount, which must be a cgroup
 *     file system (fstatfs); the limit file must be root-owned, of the
 *     helper's group.  Anything else: refused (fail closed).
 *  5. Nothing read is trusted: numbers through reserve_parse_count, files
 *     larger than their buffer are errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "cgroup.h"
#include "helper.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif
#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif

/* ---- detection ---- */

/* The nth space-separated field of a mountinfo line (0-based), copied. */
static int field(const char *line, int n, char *out, size_t cap) {
  const char *p = line, *e;
  size_t len;
  while (n-- > 0) {
    p = strchr(p, ' ');
    if (p == NULL) return -1;
    p++;
  }
  e = strchr(p, ' ');
  len = e != NULL ? (size_t)(e - p) : strlen(p);
  if (len == 0 || len >= cap) return -1;
  memcpy(out, p, len);
  out[len] = '\0';
  return 0;
}

static int has_token(const char *list, const char *tok, char sep) {
  size_t tl = strlen(tok);
  const char *p = list;
  while (p != NULL && *p != '\0') {
    if (strncmp(p, tok, tl) == 0 && (p[tl] == sep || p[tl] == '\0' || p[tl] == '\n' || p[tl] == ' ')) return 1;
    p = strchr(p, sep);
    if (p != NULL) p++;
  }
  return 0;
}

int cg_detect(struct cg_hier *h, char *why, size_t whylen) {
  char v1[sizeof h->mnt] = "", v2[sizeof h->mnt] = "", ctrl[512], line[4096];
  size_t len;
  int v2_seen = 0, skip = 0;
  FILE *f;
  memset(h, 0, sizeof *h);
  /* Line by line (a node may have thousands of mounts); no static buffer:
   * slurmd and slurmstepd are threaded. */
  f = fopen("/proc/self/mountinfo", "re");
  if (f == NULL) {
    snprintf(why, whylen, "cannot read /proc/self/mountinfo: %s", strerror(errno));
    return -1;
  }
  while (fgets(line, sizeof line, f) != NULL) {
    char root[16], mnt[sizeof h->mnt], type[16], opts[512];
    const char *dash;
    int was_skipping = skip;
    len = strlen(line);
    skip = len == 0 || line[len - 1] != '\n'; /* longer than the buffer: the rest is skipped too */
    if (was_skipping || skip) continue;
    line[len - 1] = '\0';
    dash = strstr(line, " - ");
    if (dash == NULL || field(line, 3, root, sizeof root) != 0 || field(line, 4, mnt, sizeof mnt) != 0 ||
        field(dash + 3, 0, type, sizeof type) != 0 || field(dash + 3, 2, opts, sizeof opts) != 0)
      continue;
    /* a bind mount of a sub-cgroup, or a path with escaped characters: not used */
    if (strcmp(root, "/") != 0 || strchr(mnt, '\\') != NULL || mnt[0] != '/') continue;
    if (strcmp(type, "cgroup2") == 0 && v2[0] == '\0') {
      v2_seen = 1;
      memcpy(v2, mnt, sizeof v2);
    } else if (strcmp(type, "cgroup") == 0 && v1[0] == '\0' && has_token(opts, "hugetlb", ',')) {
      memcpy(v1, mnt, sizeof v1);
    }
  }
  (void)fclose(f);
  if (v2[0] != '\0') {
    char path[sizeof h->mnt + 32];
    snprintf(path, sizeof path, "%s/cgroup.controllers", v2);
    if (sysfs_read_small(path, ctrl, sizeof ctrl, &len) == 0 && has_token(ctrl, "hugetlb", ' ')) {
      h->v2 = 1;
      memcpy(h->mnt, v2, sizeof h->mnt);
      return 0;
    }
  }
  if (v1[0] != '\0') {
    h->v2 = 0;
    memcpy(h->mnt, v1, sizeof h->mnt);
    return 0;
  }
  snprintf(why, whylen,
           "no hugetlb cgroup controller on this node (%s, and no cgroup v1 hierarchy with hugetlb is mounted)",
           v2_seen ? "the cgroup2 hierarchy does not offer hugetlb" : "no cgroup2 hierarchy is mounted");
  return -1;
}

/* "2MB" / "1GB": the controller's name of a page size. */
static void size_name(char *buf, size_t cap, unsigned size_kb) {
  if (size_kb >= 1048576)
    snprintf(buf, cap, "%uGB", size_kb / 1048576);
  else
    snprintf(buf, cap, "%uMB", size_kb / 1024);
}

/* The reservation limit (what = "max") or usage ("current") file's name;
 * fault = 1: the fault-time counter instead. */
void cg_file(const struct cg_hier *h, unsigned size_kb, int fault, const char *what, char *buf, size_t cap) {
  char sz[16];
  size_name(sz, sizeof sz, size_kb);
  if (h->v2)
    snprintf(buf, cap, "hugetlb.%s.%s%s", sz, fault ? "" : "rsvd.", what);
  else
    snprintf(buf, cap, "hugetlb.%s.%s%s", sz, fault ? "" : "rsvd.",
             strcmp(what, "max") == 0 ? "limit_in_bytes" : "usage_in_bytes");
}

/* ---- the job cgroups' directories and limit files ---- */

int cg_open_dir(int at, const char *name) {
  int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct statfs sf;
  struct stat st;
  if (fd < 0) return -1;
  if (fstatfs(fd, &sf) != 0 || (sf.f_type != CGROUP2_SUPER_MAGIC && sf.f_type != CGROUP_SUPER_MAGIC) ||
      fstat(fd, &st) != 0 || st.st_uid != 0) {
    close(fd);
    errno = EPERM;
    return -1;
  }
  return fd;
}

/* check: the helper's write; the file must be root-owned, of the helper's
 * group (its effective gid) and group-writable, as the plugin left it. */
int cg_job_limit_write(int jobfd, const struct cg_hier *h, unsigned size_kb, unsigned long long pages, int check) {
  char name[64], val[32];
  struct stat st;
  ssize_t w;
  int fd;
  cg_file(h, size_kb, 0, "max", name, sizeof name);
  snprintf(val, sizeof val, "%llu\n", pages * size_kb * 1024ULL);
  fd = openat(jobfd, name, O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return -1;
  if (check && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 || st.st_gid != getegid() ||
                (st.st_mode & S_IWGRP) == 0)) {
    close(fd);
    errno = EPERM;
    return -1;
  }
  w = write(fd, val, strlen(val));
  if (close(fd) != 0) w = -1;
  return w == (ssize_t)strlen(val) ? 0 : -1;
}

int cg_job_limit_read(int jobfd, const struct cg_hier *h, unsigned size_kb, int fault, const char *what,
                      unsigned long long *bytes) {
  char name[64], buf[32];
  size_t len;
  int fd, rc;
  cg_file(h, size_kb, fault, what, name, sizeof name);
  fd = openat(jobfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return -1;
  rc = sysfs_read_fd(fd, buf, sizeof buf, &len);
  close(fd);
  if (rc != 0) return -1;
  if (len > 0 && buf[len - 1] == '\n') buf[--len] = '\0';
  if (strcmp(buf, "max") == 0) {
    *bytes = ~0ULL;
    return 0;
  }
  if (reserve_parse_count(buf, ~0ULL, bytes) != 0) return -1;
  /* No limit, spelled as a number: v1's "unlimited", and v2's for a page
   * size whose maximum is not a whole number of its pages (1 GB:
   * 9223372036854771712).  No pool comes near 2^62 bytes. */
  if (*bytes >= 1ULL << 62) *bytes = ~0ULL;
  return 0;
}

int cg_task_cgroup(const struct cg_hier *h, const char *pid, char *out, size_t cap) {
  char buf[4096], path[64];
  size_t len;
  char *line, *save = NULL;
  snprintf(path, sizeof path, "/proc/%s/cgroup", pid);
  if (sysfs_read_small(path, buf, sizeof buf, &len) != 0) return -1;
  for (line = strtok_r(buf, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
    char *c1 = strchr(line, ':'), *c2 = c1 != NULL ? strchr(c1 + 1, ':') : NULL;
    if (c2 == NULL) continue;
    *c1 = *c2 = '\0';
    if (h->v2 ? strcmp(line, "0") == 0 && c1[1] == '\0' : has_token(c1 + 1, "hugetlb", ',')) {
      if (strlen(c2 + 1) >= cap) return -1;
      memcpy(out, c2 + 1, strlen(c2 + 1) + 1);
      return 0;
    }
  }
  errno = ENOENT;
  return -1;
}

int cg_job_open(const struct cg_hier *h, unsigned long job) {
  char name[32];
  int mfd, dfd, fd, e;
  snprintf(name, sizeof name, "job_%lu", job);
  mfd = cg_open_dir(AT_FDCWD, h->mnt);
  dfd = mfd >= 0 ? cg_open_dir(mfd, CG_DIR) : -1;
  fd = dfd >= 0 ? cg_open_dir(dfd, name) : -1;
  e = errno;
  if (dfd >= 0) close(dfd);
  if (mfd >= 0) close(mfd);
  errno = e;
  return fd;
}

/* ---- the helper: the caller's job ---- */

int cg_caller_job(uid_t uid, struct cg_job *j, char *why, size_t whylen) {
  char cur[1024], reg[256], buf[32], name[64];
  unsigned long long job, owner;
  size_t len;
  struct stat st;
  int fd;
  j->fd = -1;
  if (cg_detect(&j->h, why, whylen) != 0) return 0; /* no controller: no isolated job */
  if (cg_task_cgroup(&j->h, "self", cur, sizeof cur) != 0) return 0;
  if (strncmp(cur, "/" CG_DIR "/job_", sizeof CG_DIR + 5) != 0 ||
      reserve_parse_count(cur + sizeof CG_DIR + 5, 1ULL << 40, &job) != 0)
    return 0; /* not in a job cgroup of ours */
  j->job = (unsigned long)job;
  snprintf(reg, sizeof reg, RESERVE_JOBS_DIR "/%llu", job);
  fd = open(reg, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 ||
      sysfs_read_fd(fd, buf, sizeof buf, &len) != 0) {
    if (fd >= 0) close(fd);
    snprintf(why, whylen, "this process is in the hugetlb cgroup of job %llu, which is not registered", job);
    return -1;
  }
  close(fd);
  if (len > 0 && buf[len - 1] == '\n') buf[--len] = '\0';
  if (reserve_parse_count(buf, 0xfffffffeULL, &owner) != 0 || owner != uid) {
    snprintf(why, whylen, "this process is in the hugetlb cgroup of job %llu, which is not yours", job);
    return -1;
  }
  snprintf(name, sizeof name, "job_%llu", job);
  j->fd = cg_job_open(&j->h, j->job);
  if (j->fd < 0) {
    snprintf(why, whylen, "cannot open the hugetlb cgroup of job %llu: %s", job, strerror(errno));
    return -1;
  }
  snprintf(j->path, sizeof j->path, "%s/" CG_DIR "/%s", j->h.mnt, name);
  return 1;
}

/* Before the pool grows: is the job's limit file the one the plugin handed
 * to the helper (root-owned, the helper's group, group-writable)? */
int cg_job_limit_ok(const struct cg_job *j, unsigned size_kb) {
  char name[64];
  struct stat st;
  cg_file(&j->h, size_kb, 0, "max", name, sizeof name);
  if (fstatat(j->fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return -1;
  if (!S_ISREG(st.st_mode) || st.st_uid != 0 || st.st_gid != getegid() || (st.st_mode & S_IWGRP) == 0) {
    errno = EPERM;
    return -1;
  }
  return 0;
}

void cg_job_close(struct cg_job *j) {
  if (j->fd >= 0) close(j->fd);
  j->fd = -1;
}
