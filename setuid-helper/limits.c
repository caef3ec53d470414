/* SPDX-License-Identifier: BSD-3-Clause */
#define _POSIX_C_SOURCE 200809L /* O_NOFOLLOW, O_CLOEXEC */
/* hugepool-reserve: a user's job limits never exceed what the user holds.
 * An isolated job's reservation limit (cgroup.c) is what its processes may
 * take of the pool's free pages; the pool grew only by what was granted.  So
 * for every user and page size, whenever the lock is held:
 *
 *     sum over the user's jobs of (limit - allowance)  <=  the user's grants
 *
 * (allowance: the default_job_pages the site gives a job started without
 * --hugepages, granted to nobody; 0 for every other job).  A limit above that
 * lets a job map pages the pool holds for someone else.  Rules kept:
 *
 *  1. A user's jobs are the root-owned registry entries of their uid; a job
 *     whose cgroup is gone has no limit, one whose limit is "max" was not
 *     limited by the plugin (nothing to count or to lower).  Any other limit
 *     or usage that cannot be read, a registry that cannot be read, or no
 *     hugetlb hierarchy found while a job the prolog isolated is registered:
 *     refuse (fail closed).
 *  2. Here limits are only lowered, never below what the job has reserved
 *     (the kernel refuses that: the operation is then refused), and the job
 *     named keep (a grant's caller's job) last; a release names none (the
 *     epilog has no caller job): the jobs keep what they reserved, and what
 *     is left goes to them in registry order.  A limit is raised only in pool.c, only
 *     the caller's own job's, to what the grant covers, after the pool grew.
 *  3. A release keeps at least what the user's jobs have reserved, and
 *     lowers the limits to what is kept before the grant table is written;
 *     a grant inside a job first lowers limits that drifted above the grants
 *     (a table restored by an administrator, a failed write).  A kill at any
 *     point leaves limits at or below the grants, never above.
 *  4. The helper writes only limit files handed to its group (checked on the
 *     descriptor, cgroup.c); the root side (the Slurm plugin) any of ours.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helper.h"

unsigned long long limits_grants_of_size(const struct reserve_grants *gs, uid_t uid, unsigned size_kb) {
  unsigned long long n = 0;
  size_t i;
  for (i = 0; i < gs->n; i++)
    if (gs->g[i].uid == uid && gs->g[i].size_kb == size_kb) n += gs->g[i].pages;
  return n;
}

/* The job's root-owned <job>.iso (written by the plugin's prolog),
 * NUL-terminated at its first line's end; -1 if there is none. */
static int job_iso(unsigned long job, char *buf, size_t cap) {
  char path[256];
  struct stat st;
  size_t len;
  int fd, rc = -1;
  snprintf(path, sizeof path, RESERVE_JOBS_DIR "/%lu.iso", job);
  fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return -1;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 && sysfs_read_fd(fd, buf, cap, &len) == 0) {
    buf[strcspn(buf, "\n")] = '\0';
    rc = 0;
  }
  close(fd);
  return rc;
}

/* The ungranted pages a job started with: "isolated R A" in <job>.iso; 0 if none. */
static unsigned long long job_allowance(unsigned long job, unsigned size_kb) {
  char buf[700];
  unsigned long long a = 0;
  const char *sp;
  if (size_kb != RESERVE_PAGE_2M) return 0; /* default_job_pages is in 2 MB pages */
  if (job_iso(job, buf, sizeof buf) == 0 && strncmp(buf, "isolated ", 9) == 0 && (sp = strchr(buf + 9, ' ')) != NULL &&
      reserve_parse_count(sp + 1, RESERVE_MAX_PAGES, &a) != 0)
    a = 0;
  return a;
}

/* Did the prolog give the job a limited cgroup ("isolated" in <job>.iso)? */
static int job_isolated(unsigned long job) {
  char buf[700];
  return job_iso(job, buf, sizeof buf) == 0 && strncmp(buf, "isolated ", 9) == 0;
}

/* One job's limit and reservations, in pages.  1: counted, 0: nothing to
 * count (no cgroup, or not limited), -1: unreadable. */
static int job_read(struct user_jobs *uj, unsigned long job) {
  unsigned long long lim, used, page = (unsigned long long)uj->size_kb * 1024;
  int fd = cg_job_open(&uj->h, job), rc;
  size_t k = uj->n;
  if (fd < 0) return errno == ENOENT ? 0 : -1;
  rc = cg_job_limit_read(fd, &uj->h, uj->size_kb, 0, "max", &lim) == 0 &&
               cg_job_limit_read(fd, &uj->h, uj->size_kb, 0, "current", &used) == 0
           ? 1
           : -1;
  close(fd);
  if (rc != 1 || lim == ~0ULL) return rc == 1 ? 0 : -1;
  uj->job[k] = job;
  uj->limit[k] = lim / page;
  uj->used[k] = (used + page - 1) / page;
  uj->allow[k] = job_allowance(job, uj->size_kb);
  uj->n++;
  return 1;
}

int limits_jobs_load(uid_t uid, unsigned size_kb, struct user_jobs *uj) {
  unsigned long jobs[RESERVE_MAX_JOBS];
  char why[256];
  int n, i;
  uj->n = 0;
  uj->size_kb = size_kb;
  n = state_registry_jobs(uid, 0, jobs, RESERVE_MAX_JOBS);
  if (n < 0) return -1;
  if (cg_detect(&uj->h, why, sizeof why) != 0) {
    /* No controller seen: no limits, unless the prolog made one for a job
     * that is still registered; its limit cannot be read now. */
    for (i = 0; i < n; i++)
      if (job_isolated(jobs[i])) {
        errno = ENOENT;
        return -1;
      }
    return 0;
  }
  for (i = 0; i < n; i++)
    if (job_read(uj, jobs[i]) < 0) return -1;
  return 0;
}

static unsigned long long charged(const struct user_jobs *uj, size_t k) {
  return uj->limit[k] > uj->allow[k] ? uj->limit[k] - uj->allow[k] : 0;
}

unsigned long long limits_jobs_charged(const struct user_jobs *uj, unsigned long except) {
  unsigned long long n = 0;
  size_t k;
  for (k = 0; k < uj->n; k++)
    if (uj->job[k] != except) n += charged(uj, k);
  return n;
}

/* The least a job's charge can be lowered to: what it has reserved beyond
 * its allowance (the kernel keeps a limit at or above the reservations). */
static unsigned long long floor_of(const struct user_jobs *uj, size_t k) {
  unsigned long long f = uj->used[k] > uj->allow[k] ? uj->used[k] - uj->allow[k] : 0;
  return f < charged(uj, k) ? f : charged(uj, k);
}

unsigned long long limits_jobs_reserved(const struct user_jobs *uj) {
  unsigned long long n = 0;
  size_t k;
  for (k = 0; k < uj->n; k++) n += floor_of(uj, k);
  return n;
}

static int job_lower(struct user_jobs *uj, size_t k, unsigned long long to) {
  int fd = cg_job_open(&uj->h, uj->job[k]), rc;
  if (fd < 0) return errno == ENOENT ? 0 : -1; /* gone meanwhile: no limit */
  rc = cg_job_limit_write(fd, &uj->h, uj->size_kb, to, geteuid() != 0);
  close(fd);
  if (rc == 0) uj->limit[k] = to;
  return rc;
}

int limits_jobs_fit(struct user_jobs *uj, unsigned long long budget, unsigned long keep) {
  unsigned long long left, give;
  size_t k, pass;
  if (limits_jobs_charged(uj, 0) <= budget) return 0;
  if (limits_jobs_reserved(uj) > budget) {
    errno = EBUSY;
    return -1;
  }
  left = budget - limits_jobs_reserved(uj);
  for (pass = 0; pass < 2; pass++) /* the job to keep first, then the others in registry order */
    for (k = 0; k < uj->n; k++) {
      if ((uj->job[k] == keep) != (pass == 0)) continue;
      give = charged(uj, k) - floor_of(uj, k);
      if (give > left) give = left;
      left -= give;
      if (floor_of(uj, k) + give < charged(uj, k) && job_lower(uj, k, uj->allow[k] + floor_of(uj, k) + give) != 0)
        return -1;
    }
  return 0;
}

unsigned long long limits_job_limit_of(const struct user_jobs *uj, unsigned long job, unsigned long long *allow) {
  size_t k;
  for (k = 0; k < uj->n; k++)
    if (uj->job[k] == job) {
      *allow = uj->allow[k];
      return uj->limit[k];
    }
  *allow = 0;
  return ~0ULL;
}
