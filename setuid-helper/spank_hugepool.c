#define _DEFAULT_SOURCE /* getgrouplist */
/* Slurm SPANK plugin: srun/sbatch/salloc --hugepages=N.
 *
 * The option value comes from the user's client and is untrusted: the
 * client-side check is only for a friendly early error; the root-side job
 * prolog validates it again and applies the same site limits as the helper.
 *
 *   job prolog  (root, slurmd, at allocation with PrologFlags=Alloc):
 *               register job -> owner in the job registry (for require_job),
 *               then grant N pages to the job's user.
 *   task init   (every task, as the user, before exec): if the grant
 *               failed, the task exits with the reason.  Not the prolog, nor
 *               user_init: a failure there drains the node (for batch jobs),
 *               and a user must not be able to do that.
 *   job epilog  (root): unregister; when the user has no other job on the
 *               node, release everything the user holds.
 *
 * Rules kept:
 *  1. The option value is validated again on the root side.
 *  2. The job's user comes from Slurm (spank_get_item), never the option.
 *  3. A refusal never fails the prolog (that would drain the node).
 *  4. A busy lock is retried, never dropped: the epilog's release always
 *     happens (the core kills a helper that holds the lock too long).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <slurm/spank.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "internal.h"

SPANK_PLUGIN(hugepool, 1)

static int check_pages(int val, const char *optarg, int remote) {
  unsigned long long v;
  (void)val;
  (void)remote;
  if (optarg == NULL || reserve_parse_count(optarg, RESERVE_MAX_PAGES, &v) != 0 || v == 0) {
    slurm_error("hugepool: --hugepages needs a whole number from 1 to %llu", RESERVE_MAX_PAGES);
    return -1;
  }
  return 0;
}

static struct spank_option hugepages_opt = {
    "hugepages", "N", "Reserve N 2 MB hugetlb pages on each node of the job; released when it ends.",
    1,           0,   check_pages};

int slurm_spank_init(spank_t sp, int ac, char **av) {
  (void)ac;
  (void)av;
  if (spank_option_register(sp, &hugepages_opt) != ESPANK_SUCCESS && spank_context() != S_CTX_SLURMD) return -1;
  return 0;
}

static void failure_path(char *buf, size_t cap, uint32_t job) {
  snprintf(buf, cap, RESERVE_JOBS_DIR "/%u.failed", (unsigned)job);
}

static void record_failure(uint32_t job, const char *why) {
  char path[256];
  int fd;
  failure_path(path, sizeof path, job);
  fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return;
  if (write(fd, why, strlen(why)) < 0) {
    /* the audit log has the reason anyway */
  }
  close(fd);
}

static int job_caller(spank_t sp, struct reserve_caller *who, uint32_t *job) {
  uid_t uid;
  gid_t gid;
  const struct passwd *pw;
  memset(who, 0, sizeof *who);
  if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS || spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_ID, job) != ESPANK_SUCCESS)
    return -1;
  who->uid = uid;
  who->gid = gid;
  who->job = *job;
  who->source = "slurm";
  pw = getpwuid(uid);
  who->ngroups = RESERVE_MAX_GROUPS;
  if (pw == NULL || getgrouplist(pw->pw_name, gid, who->groups, &who->ngroups) < 0) who->ngroups = 0;
  return 0;
}

int slurm_spank_job_prolog(spank_t sp, int ac, char **av) {
  struct reserve_caller who;
  struct reserve_config conf;
  struct reserve_request rq;
  char *val = NULL, msg[1024];
  uint32_t job;
  (void)ac;
  (void)av;
  openlog("hugepool-spank", LOG_PID, LOG_AUTHPRIV);
  if (job_caller(sp, &who, &job) != 0) {
    slurm_error("hugepool: cannot identify the job");
    return 0;
  }
  if (reserve_job_register(job, who.uid) != 0)
    slurm_error("hugepool: cannot register job %u: %s", (unsigned)job, strerror(errno));
  if (spank_option_getopt(sp, &hugepages_opt, &val) != ESPANK_SUCCESS) return 0;
  memset(&rq, 0, sizeof rq);
  rq.action = ACT_GRANT;
  rq.node = -1;
  rq.size_kb = RESERVE_PAGE_2M;
  if (val == NULL || reserve_parse_count(val, RESERVE_MAX_PAGES, &rq.pages) != 0 || rq.pages == 0) {
    snprintf(msg, sizeof msg, "--hugepages: not a whole number from 1 to %llu", RESERVE_MAX_PAGES);
    reserve_audit(&who, "action=grant outcome=refused reason=\"bad --hugepages value\"");
    record_failure(job, msg);
    return 0;
  }
  if (reserve_load_config(&conf, msg, sizeof msg) != 0 || reserve_authorize(&conf, &who, msg, sizeof msg) != 0) {
    reserve_audit(&who, "action=grant request=%llu granted=0 outcome=refused reason=\"%s\"", rq.pages, msg);
    record_failure(job, msg);
  } else {
    int rc, tries = 0;
    /* A busy lock (after a stopped helper holding it was killed) is retried. */
    while ((rc = reserve_grant(&conf, &who, &rq, msg, sizeof msg)) == RESERVE_BUSY && ++tries < 3) {
    }
    if (rc != RESERVE_OK) record_failure(job, msg); /* reserve_grant has logged it */
  }
  return 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av) {
  char path[256], why[1024];
  uint32_t job;
  ssize_t n;
  int fd;
  (void)ac;
  (void)av;
  if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS) return 0;
  failure_path(path, sizeof path, job);
  fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return 0;
  n = read(fd, why, sizeof why - 1);
  close(fd);
  why[n > 0 ? n : 0] = '\0';
  /* In the task, on its stderr: the user sees it in the job's output. */
  dprintf(2, "hugepool: --hugepages could not be granted: %s\n", why);
  slurm_error("hugepool: --hugepages could not be granted: %s", why);
  return -1;
}

int slurm_spank_job_epilog(spank_t sp, int ac, char **av) {
  struct reserve_caller who;
  char path[256], msg[1024];
  uint32_t job;
  (void)ac;
  (void)av;
  openlog("hugepool-spank", LOG_PID, LOG_AUTHPRIV);
  if (job_caller(sp, &who, &job) != 0) return 0;
  reserve_job_unregister(job);
  failure_path(path, sizeof path, job);
  unlink(path);
  if (!reserve_user_has_job(who.uid, job)) {
    int rc, tries = 0;
    /* The release must not be dropped because the lock was busy: retry (each
     * try waits for the lock and kills a stopped helper holding it). */
    while ((rc = reserve_release(&who, msg, sizeof msg)) == RESERVE_BUSY && ++tries < 5) {
    }
    if (rc != RESERVE_OK) slurm_error("hugepool: release for job %u: %s", (unsigned)job, msg);
  }
  return 0;
}
