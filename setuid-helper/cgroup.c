/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE /* dirfd, O_PATH, pidfd_open */
/* hugepool-reserve: per-job hugetlb isolation through the kernel's hugetlb
 * cgroup controller.  A job's processes live in <hierarchy>/hugepool/job_<id>
 * whose reservation limit (hugetlb.<size>.rsvd.max in v2,
 * hugetlb.<size>.rsvd.limit_in_bytes in v1) is the job's grant: a mapping
 * beyond it fails at mmap with ENOMEM.  The fault-time limit is never set (it
 * would turn a fault into SIGBUS).  Rules kept:
 *
 *  1. Detect, never guess: the hierarchy comes from /proc/self/mountinfo (a
 *     cgroup2 mount whose root cgroup.controllers lists hugetlb, else a v1
 *     mount whose super options name hugetlb), mounted at its root ("/"),
 *     with no escaped characters in its path.  Nothing found: no isolation,
 *     and the reason is returned for the job's output and the audit log.
 *  2. Only the root side (the Slurm plugin) creates, fills and removes job
 *     cgroups; it hands the reservation limit files (nothing else) to the
 *     state directory's group, the helper's.
 *  3. The helper finds the caller's job from the kernel alone: the caller's
 *     own cgroup (/proc/self/cgroup) must be exactly /hugepool/job_<N> of that
 *     hierarchy, N a root-owned registry entry of the caller's uid.  Every
 *     component is opened O_NOFOLLOW below the mount, which must be a cgroup
 *     file system (fstatfs); the limit file must be root-owned, of the
 *     helper's group.  Anything else: refused (fail closed).
 *  4. In v2 a task is moved only if its cgroup is not Slurm's own (no job_<N>
 *     component): Slurm's cgroup plugins track a job by its cgroup.  The v1
 *     hugetlb hierarchy is independent of every other one: moving a task there
 *     changes nothing else.
 *  5. Nothing read is trusted: numbers through reserve_parse_count, files
 *     larger than their buffer are errors.
 *  6. A job's cgroup is removed only empty: what is left in it at the end of
 *     the job is killed (v2: cgroup.kill; v1, or a kernel without it:
 *     SIGKILL to each pid, pinned by a pidfd and checked to be still in the
 *     cgroup), bounded; never moved to the hierarchy's root, where nothing
 *     limits it.  Its reservation limits are lowered first, as far as the
 *     kernel lets them go (0, or what is reserved: it refuses a limit below
 *     that), so nothing left in it can reserve more while it is killed.  A
 *     cgroup that cannot be emptied stays with those limits, and the removal
 *     fails: the caller must keep the job's grant covering them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <signal.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "helper.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif
#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif

#define CG_DIR "hugepool"

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

static const unsigned cg_sizes[] = {RESERVE_PAGE_2M, RESERVE_PAGE_1G};

static int procs_kill(int jfd, const struct cg_hier *h, unsigned long job, int kill);

/* ---- root side: the Slurm plugin ---- */

static int write_str(int dirfd, const char *name, const char *text) {
  int fd = openat(dirfd, name, O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
  ssize_t w;
  if (fd < 0) return -1;
  w = write(fd, text, strlen(text));
  if (close(fd) != 0) w = -1;
  return w == (ssize_t)strlen(text) ? 0 : -1;
}

static int open_dir(int at, const char *name) {
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

/* The group the helper runs with: the lock file's. */
static int helper_gid(gid_t *gid) {
  struct stat st;
  if (stat(RESERVE_STATE_DIR "/lock", &st) != 0) return -1;
  *gid = st.st_gid;
  return 0;
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

int cg_job_create(const struct cg_hier *h, unsigned long job, unsigned long long pages_2m, char *why, size_t whylen) {
  char name[64];
  int mfd, dfd = -1, jfd = -1, e, existed;
  size_t i;
  gid_t gid;
  if (helper_gid(&gid) != 0) {
    snprintf(why, whylen, "cannot read %s/lock: %s", RESERVE_STATE_DIR, strerror(errno));
    return -1;
  }
  mfd = open_dir(AT_FDCWD, h->mnt);
  if (mfd < 0) goto fail;
  /* v2: the controller must be enabled in every parent's subtree_control;
   * the hierarchy's root holds no constraint on processes, hugepool/ none. */
  if (h->v2 && write_str(mfd, "cgroup.subtree_control", "+hugetlb") != 0) goto fail;
  if (mkdirat(mfd, CG_DIR, 0755) != 0 && errno != EEXIST) goto fail;
  if ((dfd = open_dir(mfd, CG_DIR)) < 0) goto fail;
  if (h->v2 && write_str(dfd, "cgroup.subtree_control", "+hugetlb") != 0) goto fail;
  snprintf(name, sizeof name, "job_%lu", job);
  existed = mkdirat(dfd, name, 0755) != 0;
  if (existed && errno != EEXIST) goto fail;
  if ((jfd = open_dir(dfd, name)) < 0) goto fail;
  if (existed) (void)procs_kill(jfd, h, job, 1); /* left by an earlier job of that id: not this job's */
  for (i = 0; i < sizeof cg_sizes / sizeof cg_sizes[0]; i++) {
    char f[64];
    struct stat st;
    cg_file(h, cg_sizes[i], 0, "max", f, sizeof f);
    if (fstatat(jfd, f, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (cg_sizes[i] == RESERVE_PAGE_2M) { /* 1 GB pages may not exist on this machine */
        snprintf(why, whylen, "the kernel's hugetlb controller has no reservation limits (%s; Linux 5.7 or later)", f);
        goto fail_msg;
      }
      continue;
    }
    if (cg_job_limit_write(jfd, h, cg_sizes[i], cg_sizes[i] == RESERVE_PAGE_2M ? pages_2m : 0, 0) != 0 ||
        fchownat(jfd, f, 0, gid, AT_SYMLINK_NOFOLLOW) != 0 || fchmodat(jfd, f, 0664, 0) != 0)
      goto fail;
  }
  close(jfd);
  close(dfd);
  close(mfd);
  return 0;
fail:
  e = errno;
  snprintf(why, whylen, "cannot set up the hugetlb cgroup %s/" CG_DIR "/job_%lu: %s", h->mnt, job, strerror(e));
fail_msg:
  if (jfd >= 0) close(jfd);
  if (dfd >= 0) {
    snprintf(name, sizeof name, "job_%lu", job);
    (void)unlinkat(dfd, name, AT_REMOVEDIR);
    close(dfd);
  }
  if (mfd >= 0) close(mfd);
  return -1;
}

/* A task's cgroup in the hierarchy h (from /proc/<pid>/cgroup; pid
 * "self": the caller's own). */
static int task_cgroup(const struct cg_hier *h, const char *pid, char *out, size_t cap) {
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

int cg_task_enter(const struct cg_hier *h, unsigned long job, char *why, size_t whylen) {
  char cur[1024], path[sizeof h->mnt + 64], pid[24];
  int fd;
  if (task_cgroup(h, "self", cur, sizeof cur) != 0) {
    snprintf(why, whylen, "cannot read this task's cgroup: %s", strerror(errno));
    return -1;
  }
  /* Slurm's cgroup plugins name a job's cgroup job_<id>: a task there is
   * tracked through that cgroup and must stay in it (v2 has one hierarchy). */
  if (h->v2 && strstr(cur, "/job_") != NULL) {
    snprintf(why, whylen,
             "this task is in Slurm's own cgroup %s (cgroup/v2 plugin): it is not moved; mount a cgroup v1 "
             "hierarchy with only hugetlb to isolate jobs (see the admin guide)",
             cur);
    return -1;
  }
  snprintf(path, sizeof path, "%s/" CG_DIR "/job_%lu", h->mnt, job);
  fd = open_dir(AT_FDCWD, path);
  if (fd < 0) {
    snprintf(why, whylen, "cannot open %s: %s", path, strerror(errno));
    return -1;
  }
  snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
  if (write_str(fd, "cgroup.procs", pid) != 0) {
    snprintf(why, whylen, "cannot move the task into %s: %s", path, strerror(errno));
    close(fd);
    return -1;
  }
  close(fd);
  return 0;
}

/* SIGKILLs each process listed in the job cgroup's cgroup.procs (kill 0:
 * only counts them).  Each pid is pinned by pidfd_open and still in the
 * job's cgroup after that (its /proc/<pid>/cgroup), so a pid reused by a
 * process outside the job is never hit.  Returns how many were listed, or -1. */
static int procs_kill(int jfd, const struct cg_hier *h, unsigned long job, int kill) {
  char line[32], want[64], cur[1024];
  int fd = openat(jfd, "cgroup.procs", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY), n = 0;
  FILE *f = fd >= 0 ? fdopen(fd, "re") : NULL;
  if (f == NULL) {
    if (fd >= 0) close(fd);
    return -1;
  }
  snprintf(want, sizeof want, "/" CG_DIR "/job_%lu", job);
  while (fgets(line, sizeof line, f) != NULL) {
    unsigned long long pid;
    int pidfd;
    line[strcspn(line, "\n")] = '\0';
    if (reserve_parse_count(line, 1ULL << 31, &pid) != 0) continue;
    n++;
    if (!kill || (pidfd = pidfd_open((pid_t)pid, 0)) < 0) continue;
    if (task_cgroup(h, line, cur, sizeof cur) == 0 && strcmp(cur, want) == 0)
      (void)pidfd_send_signal(pidfd, SIGKILL, NULL, 0);
    close(pidfd);
  }
  (void)fclose(f);
  return n;
}

/* Lowers a job's reservation limit of one page size as far as the kernel
 * lets it: to 0, else (EBUSY: never below what is reserved) to what is
 * reserved now, read again while it moves (a process still in the cgroup may
 * map or unmap meanwhile).  Returns the limit left, in pages (0 where this
 * page size has no limit file). */
static unsigned long long limit_lower(int jfd, const struct cg_hier *h, unsigned size_kb) {
  unsigned long long used, lim = ~0ULL, page = (unsigned long long)size_kb * 1024;
  char name[64];
  struct stat st;
  int tries;
  cg_file(h, size_kb, 0, "max", name, sizeof name);
  if (fstatat(jfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT) return 0;
  if (cg_job_limit_write(jfd, h, size_kb, 0, 0) == 0) return 0;
  for (tries = 0; tries < 10 && errno == EBUSY; tries++) {
    if (cg_job_limit_read(jfd, h, size_kb, 0, "current", &used) != 0) break;
    if (cg_job_limit_write(jfd, h, size_kb, (used + page - 1) / page, 0) == 0) return (used + page - 1) / page;
  }
  if (cg_job_limit_read(jfd, h, size_kb, 0, "max", &lim) != 0) return ~0ULL;
  return lim == ~0ULL ? lim : lim / page;
}

/* Lowers its limits, kills what is left in a job's cgroup and waits (at
 * most ~5 s: a process in uninterruptible sleep dies when it wakes) until it
 * is empty and gone.  *killed: the processes that were there.  0, or -1
 * (errno). */
static int cg_empty_and_remove(int dfd, int jfd, const struct cg_hier *h, unsigned long job, int *killed) {
  struct timespec ts = {0, 20L * 1000 * 1000};
  char name[32];
  int tries, n, v2kill;
  size_t i;
  snprintf(name, sizeof name, "job_%lu", job);
  for (i = 0; i < sizeof cg_sizes / sizeof cg_sizes[0]; i++) (void)limit_lower(jfd, h, cg_sizes[i]);
  *killed = procs_kill(jfd, h, job, 0);
  if (*killed < 0) return -1;
  v2kill = h->v2 && write_str(jfd, "cgroup.kill", "1") == 0; /* the whole cgroup at once, forks included */
  for (tries = 0; tries < 250; tries++) {
    if (unlinkat(dfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT) return 0;
    if (errno != EBUSY) return -1;
    n = procs_kill(jfd, h, job, !v2kill || tries % 50 == 49); /* new forks on v1 */
    if (n < 0) return -1;
    nanosleep(&ts, NULL);
  }
  errno = EBUSY;
  return -1;
}

int cg_job_remove(const struct cg_hier *h, unsigned long job, int *killed, char *why, size_t whylen) {
  char name[32];
  unsigned long long left_2m = ~0ULL, left_1g = ~0ULL; /* -1 when printed: unknown */
  int mfd, dfd = -1, jfd = -1, rc = -1, e;
  *killed = 0;
  snprintf(name, sizeof name, "job_%lu", job);
  mfd = open_dir(AT_FDCWD, h->mnt);
  if (mfd >= 0) dfd = open_dir(mfd, CG_DIR);
  if (dfd >= 0) jfd = open_dir(dfd, name);
  if (jfd < 0 && errno == ENOENT) rc = 0; /* never made, or already gone */
  if (jfd >= 0) rc = cg_empty_and_remove(dfd, jfd, h, job, killed);
  e = errno;
  if (rc != 0 && jfd >= 0) { /* left with its processes: they reserve no more than they hold */
    left_2m = limit_lower(jfd, h, RESERVE_PAGE_2M);
    left_1g = limit_lower(jfd, h, RESERVE_PAGE_1G);
  }
  if (rc != 0)
    snprintf(why, whylen,
             "cannot remove %s/" CG_DIR
             "/%s (%d processes were in it): %s; its reservation limits are lowered to "
             "what it holds (%lld pages of 2048 kB, %lld of 1048576 kB; -1: no limit, or unreadable)",
             h->mnt, name, *killed, strerror(e), (long long)left_2m, (long long)left_1g);
  if (jfd >= 0) close(jfd);
  if (dfd >= 0) close(dfd);
  if (mfd >= 0) close(mfd);
  return rc;
}

int cg_job_open(const struct cg_hier *h, unsigned long job) {
  char name[32];
  int mfd, dfd, fd, e;
  snprintf(name, sizeof name, "job_%lu", job);
  mfd = open_dir(AT_FDCWD, h->mnt);
  dfd = mfd >= 0 ? open_dir(mfd, CG_DIR) : -1;
  fd = dfd >= 0 ? open_dir(dfd, name) : -1;
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
  if (task_cgroup(&j->h, "self", cur, sizeof cur) != 0) return 0;
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
