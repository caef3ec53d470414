/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE /* pidfd_open */
/* hugepool-reserve: a job's hugetlb cgroup from its making to its removal,
 * the root side (the Slurm plugin).  What both sides read (detection, file
 * names, limits, the caller's job) is cgroup.c's, with rules 1, 3 and 5.
 * Rules kept:
 *
 *  2. Only the root side (the Slurm plugin) creates, fills and removes job
 *     cgroups; it hands the reservation limit files (nothing else) to the
 *     state directory's group, the helper's.
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
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "helper.h"

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

/* The group the helper runs with: the lock file's. */
static int helper_gid(gid_t *gid) {
  struct stat st;
  if (stat(RESERVE_STATE_DIR "/lock", &st) != 0) return -1;
  *gid = st.st_gid;
  return 0;
}

int cgjob_create(const struct cg_hier *h, unsigned long job, unsigned long long pages_2m, char *why, size_t whylen) {
  char name[64];
  int mfd, dfd = -1, jfd = -1, e, existed;
  size_t i;
  gid_t gid;
  if (helper_gid(&gid) != 0) {
    snprintf(why, whylen, "cannot read %s/lock: %s", RESERVE_STATE_DIR, strerror(errno));
    return -1;
  }
  mfd = cg_open_dir(AT_FDCWD, h->mnt);
  if (mfd < 0) goto fail;
  /* v2: the controller must be enabled in every parent's subtree_control;
   * the hierarchy's root holds no constraint on processes, hugepool/ none. */
  if (h->v2 && write_str(mfd, "cgroup.subtree_control", "+hugetlb") != 0) goto fail;
  if (mkdirat(mfd, CG_DIR, 0755) != 0 && errno != EEXIST) goto fail;
  if ((dfd = cg_open_dir(mfd, CG_DIR)) < 0) goto fail;
  if (h->v2 && write_str(dfd, "cgroup.subtree_control", "+hugetlb") != 0) goto fail;
  snprintf(name, sizeof name, "job_%lu", job);
  existed = mkdirat(dfd, name, 0755) != 0;
  if (existed && errno != EEXIST) goto fail;
  if ((jfd = cg_open_dir(dfd, name)) < 0) goto fail;
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

int cgjob_task_enter(const struct cg_hier *h, unsigned long job, char *why, size_t whylen) {
  char cur[1024], path[sizeof h->mnt + 64], pid[24];
  int fd;
  if (cg_task_cgroup(h, "self", cur, sizeof cur) != 0) {
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
  fd = cg_open_dir(AT_FDCWD, path);
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
    if (cg_task_cgroup(h, line, cur, sizeof cur) == 0 && strcmp(cur, want) == 0)
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

int cgjob_remove(const struct cg_hier *h, unsigned long job, int *killed, char *why, size_t whylen) {
  char name[32];
  unsigned long long left_2m = ~0ULL, left_1g = ~0ULL; /* -1 when printed: unknown */
  int mfd, dfd = -1, jfd = -1, rc = -1, e;
  *killed = 0;
  snprintf(name, sizeof name, "job_%lu", job);
  mfd = cg_open_dir(AT_FDCWD, h->mnt);
  if (mfd >= 0) dfd = cg_open_dir(mfd, CG_DIR);
  if (dfd >= 0) jfd = cg_open_dir(dfd, name);
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
