/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool-reserve: what the privileged files share among themselves.
 *
 * sysfs.c      reads the kernel: pool files, meminfo, /proc/<pid>/status
 * usage.c      what users' processes hold of the pool (each page once)
 * usage-files.c  the hugetlb memfds a caller's processes hold open
 * state.c      the lock, the grant table, the job registry
 * intent.c     the intent record, and settling one a killed helper left
 * audit.c      the audit log (calls nothing else here)
 * config.c     loading the site config (parse.c parses it)
 * authorize.c  who may ask
 * pool.c       grant
 * status.c     --status [--json]
 * release.c    the release and the rule that keeps other users' pages
 * cgroup.c     per-job hugetlb cgroups: detection, the job's reservation limit,
 *              the caller's job (both sides)
 * cgroup-job.c a job's cgroup on the root side: made, entered, removed
 * limits.c     a user's job limits never exceed the user's grants
 * jobfiles.c   the plugin alone: its files beside a job's registry entry
 *              (jobfiles.h, jobfile_*)
 * fake.c       test build only: plays the kernel's part in a fake tree
 *
 * Nothing here is visible outside the helper or the Slurm plugin.  A
 * function a file offers the others is named for that file (sysfs_*,
 * usage_* (usage_files_* for usage-files.c), state_*, cg_* for cgroup.c,
 * cgjob_* for cgroup-job.c, limits_*); what the core offers the
 * helper's main and the plugin is reserve_* (reserve.h, which says where).
 */
#ifndef HUGEPOOL_RESERVE_HELPER_H
#define HUGEPOOL_RESERVE_HELPER_H

#include <stddef.h>
#include <sys/types.h>

#include "reserve.h"

#pragma GCC visibility push(hidden)

/* Every path is fixed at build time: the production ones in the generated
 * helper-paths.h (cmake/helper-paths.cmake); a test variant passes its own
 * tree's.  A test build reads a fake /sys and /proc below
 * HUGEPOOL_RESERVE_TEST_ROOT instead of the real ones. */
#include "helper-paths.h"
#ifdef HUGEPOOL_RESERVE_TEST_ROOT
#define SYS_ROOT HUGEPOOL_RESERVE_TEST_ROOT
#else
#define SYS_ROOT ""
#endif
#ifndef RESERVE_CONF_FILE
#define RESERVE_CONF_FILE HELPER_PATH_CONF
#endif
#ifndef RESERVE_STATE_DIR
#define RESERVE_STATE_DIR HELPER_PATH_STATE_DIR
#endif
#ifndef RESERVE_JOBS_DIR
#define RESERVE_JOBS_DIR HELPER_PATH_JOBS_DIR
#endif
/* How long a release may read /proc under the lock: other users' smaps
 * for at most RESERVE_SCAN_OTHERS_MS (past it they count lower, which only
 * keeps more of their grants promised), the whole walk for at most
 * RESERVE_SCAN_MS (past it the release keeps everything: the caller's own
 * count is never cut).  Monotonic clock: a clock jump changes nothing. */
#ifndef RESERVE_SCAN_OTHERS_MS
#define RESERVE_SCAN_OTHERS_MS 5000
#endif
#ifndef RESERVE_SCAN_MS
#define RESERVE_SCAN_MS 15000
#endif
#ifndef RESERVE_LOCK_WAIT_MS
#define RESERVE_LOCK_WAIT_MS 30000 /* a stuck caller must not block the others forever */
#endif

/* ---- sysfs.c ---- */

int sysfs_read_fd(int fd, char *buf, size_t cap, size_t *len);
int sysfs_read_small(const char *path, char *buf, size_t cap, size_t *len);
int sysfs_read_ull(const char *path, unsigned long long *v);
int sysfs_write_ull(const char *path, unsigned long long v);

struct pool_state {
  unsigned long long nr, free, resv, surplus;
};
/* node -1: the machine-wide pool of that page size. */
int sysfs_pool_path(char *buf, size_t cap, int node, unsigned size_kb, const char *what);
int sysfs_pool_file_read(int node, unsigned size_kb, const char *what, unsigned long long *v);
int sysfs_pool_read(int node, unsigned size_kb, struct pool_state *st);
unsigned long long sysfs_pool_spare(const struct pool_state *st);
/* Writes nr_hugepages (fake.c in the test build). */
int sysfs_pool_write_nr(int node, unsigned size_kb, unsigned long long nr);
/* The NUMA nodes (nodeN directories), in order; returns how many. */
size_t sysfs_node_list(int *nodes, size_t cap);

struct meminfo {
  unsigned long long total_kb, avail_kb, hugetlb_kb;
};
int sysfs_meminfo_read(struct meminfo *m);
int sysfs_node_meminfo_read(int node, struct meminfo *m);

/* What is read of a /proc/<pid>/status, whatever its length (a caller with
 * thousands of groups).  0, or -1 with errno (EPROTO: no Uid:/Gid: line, a
 * line we need that does not parse, a file cut short). */
struct proc_status {
  unsigned long long ruid, euid, rgid, egid;
  unsigned long long hugetlb_kb; /* 0 without a HugetlbPages: line (kernel threads) */
  int have;                      /* 1: Uid: seen, 2: Gid: seen */
};
int sysfs_proc_status_read(int fd, struct proc_status *ps);

/* ---- release.c ---- */
/* The shrink of a killed release finished by the next call: pages that went. */
unsigned long long release_finish(const struct reserve_grants *gs, int node, unsigned size_kb, unsigned long long want);

/* ---- usage.c ---- */

/* Hugetlb memory (kB) the caller's processes hold (counted over, never
 * under) and each other user of the grant table's surely hold (each page
 * once; under, never over).  0, or -1 with errno (fail closed). */
struct usage {
  size_t n;
  uid_t uid[RESERVE_MAX_GRANTS];
  unsigned long long kb[RESERVE_MAX_GRANTS];
  unsigned long long caller_kb;
};
int usage_read(const struct reserve_grants *gs, uid_t caller, struct usage *u);
/* usage-files.c: the blocks of the hugetlb memfds a process holds open,
 * each file once per call (counted over, never under). */
#define USAGE_MAX_FILES 1024
#define USAGE_MAX_TABLES 1024
struct usage_files {
  dev_t memfd_dev[3]; /* the kernel's hugetlbfs mounts of memfds (default, 2 MB, 1 GB pages) */
  size_t nmemfd_devs, nfiles, ntables;
  unsigned long long file_dev[USAGE_MAX_FILES], file_ino[USAGE_MAX_FILES];
  pid_t table_pid[USAGE_MAX_TABLES]; /* descriptor tables read (kcmp KCMP_FILES) */
};
void usage_files_init(struct usage_files *f);
unsigned long long usage_files_kb(struct usage_files *f, pid_t pid);
/* kcmp(KCMP_FILES): 0 the same descriptor table (fake.c in the test build). */
int usage_files_compare(pid_t a, pid_t b);
/* kcmp(KCMP_VM): 0 the same mm, 1 or 2 not, -1 unknown (fake.c in the test build). */
int usage_mm_compare(pid_t a, pid_t b);

/* ---- state.c ---- */

struct state {
  int lock_fd, grants_fd;
  struct reserve_grants gs;
  char text[RESERVE_GRANTS_MAX + 2]; /* the table as it is on disk */
  size_t text_len;
};
/* Returns 0, -1 (error, message in err) or -2 (the lock stayed busy).  An
 * exclusive open settles an intent left in the table first. */
int state_open(const struct reserve_caller *who, struct state *s, int exclusive, char *err, size_t errlen);
int state_write(struct state *s);
void state_close(struct state *s);
/* fsync of the table (fake.c in the test build). */
int state_table_sync(int fd);
struct reserve_grant_entry *state_grant_find(struct reserve_grants *gs, uid_t uid, int node, unsigned size_kb);

struct settled {
  unsigned long long came;    /* pages the pool had gained (grant) or given up (release) */
  unsigned long long now;     /* nr_hugepages at the end */
  unsigned long long charged; /* pages charged to the intent's user */
};
/* intent.c: settles the table's intent, charging what the pool holds for it. */
int intent_settle(struct state *s, struct settled *out);
/* intent.c: an intent found by a locked call (its helper was killed): the
 * shrink of a release finished, then settled and audited.  0, or -1 with errno. */
int intent_reconcile(const struct reserve_caller *who, struct state *s);
/* The jobs of uid in the root-owned registry, but except_job: how many (-1
 * with E2BIG when more than cap; -1 with errno when the registry or one of
 * its entries cannot be read: never "no jobs"). */
int state_registry_jobs(uid_t uid, unsigned long except_job, unsigned long *jobs, size_t cap);

/* ---- cgroup.c ---- */

/* The hierarchy the hugetlb controller is bound to. */
struct cg_hier {
  int v2;        /* 1: cgroup2, 0: a cgroup v1 hierarchy with hugetlb */
  char mnt[512]; /* its mount point (mounted at the hierarchy's root) */
};
/* 0, or -1 with the reason (no controller, nothing mounted). */
int cg_detect(struct cg_hier *h, char *why, size_t whylen);
/* The name of a page size's file: what "max" (the limit) or "current" (the
 * usage); fault 0: the reservation counter, 1: the fault-time one. */
void cg_file(const struct cg_hier *h, unsigned size_kb, int fault, const char *what, char *buf, size_t cap);
/* The directory of <mnt>/hugepool/job_<job>, checked as the helper checks
 * its own job's; -1 with errno (ENOENT: no such cgroup). */
int cg_job_open(const struct cg_hier *h, unsigned long job);
/* Limit (what "max") or usage ("current") of a job cgroup in bytes (~0: unlimited). */
int cg_job_limit_read(int jobfd, const struct cg_hier *h, unsigned size_kb, int fault, const char *what,
                      unsigned long long *bytes);
/* Sets the reservation limit to pages; check: the helper's write (the file
 * must be root-owned, of the helper's group and group-writable). */
int cg_job_limit_write(int jobfd, const struct cg_hier *h, unsigned size_kb, unsigned long long pages, int check);

/* The caller's isolated job, as the helper finds it. */
struct cg_job {
  struct cg_hier h;
  unsigned long job;
  int fd; /* the job cgroup's directory, -1: none */
  char path[600];
};
/* 1: the caller is in its own job's cgroup (j filled), 0: in none of ours,
 * -1: in one that is not verifiably its job's (refuse; reason in why). */
int cg_caller_job(uid_t uid, struct cg_job *j, char *why, size_t whylen);
/* 0 if the job's limit file of size_kb is the one the plugin handed to the
 * helper's group (checked again on the descriptor at the write). */
int cg_job_limit_ok(const struct cg_job *j, unsigned size_kb);
void cg_job_close(struct cg_job *j);

/* ---- cgroup-job.c ---- */

/* Root side: <mnt>/hugepool/job_<job> with a 2 MB reservation limit of
 * pages_2m pages (0 for the other sizes), its limit files handed to the
 * helper's group.  0, or -1 with the reason (nothing left behind). */
int cgjob_create(const struct cg_hier *h, unsigned long job, unsigned long long pages_2m, char *why, size_t whylen);
/* Root side, in the task before exec: move it into the job's cgroup. */
int cgjob_task_enter(const struct cg_hier *h, unsigned long job, char *why, size_t whylen);
/* Root side, at the job's end: the job cgroup's limits are lowered as far
 * as the kernel lets them, what is left in it is killed (*killed: how many),
 * the cgroup removed.  0, or -1 with the reason (the cgroup then stays, its
 * limits at what it still reserves: the job's grant must keep covering them). */
int cgjob_remove(const struct cg_hier *h, unsigned long job, int *killed, char *why, size_t whylen);
/* ---- limits.c ---- */

#define RESERVE_MAX_JOBS 64 /* one user's jobs on a node */
/* One user's isolated jobs and their limits of one page size, in pages. */
struct user_jobs {
  struct cg_hier h;
  unsigned size_kb;
  size_t n;
  unsigned long job[RESERVE_MAX_JOBS];
  unsigned long long limit[RESERVE_MAX_JOBS], allow[RESERVE_MAX_JOBS], used[RESERVE_MAX_JOBS];
};
unsigned long long limits_grants_of_size(const struct reserve_grants *gs, uid_t uid, unsigned size_kb);
/* 0 (n may be 0: no controller, no jobs), or -1 with errno (fail closed). */
int limits_jobs_load(uid_t uid, unsigned size_kb, struct user_jobs *uj);
/* Sum of the jobs' limits beyond their allowance (except one job: 0 for none). */
unsigned long long limits_jobs_charged(const struct user_jobs *uj, unsigned long except);
/* What the jobs have reserved beyond their allowance: no limit goes lower. */
unsigned long long limits_jobs_reserved(const struct user_jobs *uj);
/* Lowers the limits until limits_jobs_charged <= budget, job keep last.  0, or -1
 * with errno (EBUSY: the jobs have reserved more than budget; nothing written). */
int limits_jobs_fit(struct user_jobs *uj, unsigned long long budget, unsigned long keep);
/* A job's limit (~0: not one of the user's limited jobs) and allowance. */
unsigned long long limits_job_limit_of(const struct user_jobs *uj, unsigned long job, unsigned long long *allow);

#pragma GCC visibility pop

#endif
