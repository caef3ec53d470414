/* SPDX-License-Identifier: BSD-3-Clause */
#define _DEFAULT_SOURCE /* getgrouplist */
/* Slurm SPANK plugin: srun/sbatch/salloc --hugepages=N.
 *
 * The option value comes from the user's client and is untrusted: the
 * client-side check is only for a friendly early error; the root-side job
 * prolog validates it again and applies the same site limits as the helper.
 *
 *   job prolog  (root, slurmd, at allocation with PrologFlags=Alloc):
 *               register job -> owner in the job registry (for require_job
 *               and limits.c; if that fails, nothing is granted and no
 *               cgroup made), then add N pages to the job's user's grant, and create the
 *               job's hugetlb cgroup with a reservation limit of N pages
 *               (or default_job_pages for a job without --hugepages).
 *   task init   (every task, root then the user, before exec): the task
 *               enters the job's cgroup; if the grant failed, or isolation
 *               is required and could not be set up, the task exits with
 *               the reason; if isolation could not be set up, it says so.
 *               Not the prolog, nor user_init: a failure there drains the
 *               node (for batch jobs), and a user must not be able to do that.
 *   job epilog  (root): kill what is left in the job's cgroup, remove it
 *               and unregister; when the user has no other job on the
 *               node, release everything the user holds (the release also
 *               lowers the limits of the user's other jobs to what is kept).
 *               A cgroup that cannot be removed keeps the job registered
 *               and its grant held (its limit stays covered); audited.
 *
 * Rules kept:
 *  1. The option value is validated again on the root side.
 *  2. The job's user comes from Slurm (spank_get_item), never the option.
 *  3. A refusal never fails the prolog (that would drain the node).
 *  4. A busy lock is retried, never dropped: the epilog's release always
 *     happens (the core kills a helper that holds the lock too long).
 *  5. With require_isolation, nothing is granted to a job whose cgroup cannot
 *     be set up, and its tasks never run; without it, the job runs unisolated
 *     and says so in its output and the audit log.
 *  6. Registry files (<job>, <job>.failed, <job>.iso, <job>.kept) are
 *     written by root only, read only if they are root-owned regular files;
 *     a prolog starts from a clean state for its job id (register_job).
 *  7. A job's leftover processes are killed at its end, never moved out of
 *     its cgroup (outside it nothing limits them); audited.
 *  8. Every limited cgroup is a registered job's (limits.c counts only
 *     those): a job that cannot be registered is granted nothing and gets no
 *     cgroup, and its tasks that need either are refused; a job whose cgroup
 *     outlives the epilog stays registered, its grant held, until an
 *     administrator has removed the cgroup (fail closed).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <slurm/spank.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "helper.h"
#include "jobfiles.h"

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

static void record_failure(uint32_t job, const char *why) { jobfile_write(job, ".failed", why); }

/* groups: room for RESERVE_MAX_GROUPS; a user with more is checked by the
 * primary group alone (fail closed). */
static int job_caller(spank_t sp, struct reserve_caller *who, gid_t *groups, uint32_t *job) {
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
  who->groups = groups;
  who->ngroups = RESERVE_MAX_GROUPS;
  if (pw == NULL || getgrouplist(pw->pw_name, gid, groups, &who->ngroups) < 0) who->ngroups = 0;
  return 0;
}

/* The job's hugetlb cgroup: <job>.iso records "isolated R A" or
 * "unisolated R <reason>" (R: 1 if the site requires isolation; A: the
 * pages of its limit that nobody was granted, default_job_pages for a job
 * without --hugepages, limits.c) for the tasks, the helper and the epilog.
 * Returns 0, or -1 when isolation is required and failed (the failure is
 * recorded: the tasks will not run). */
static int isolate_job(const struct reserve_caller *who, const struct reserve_config *conf, uint32_t job,
                       const struct cg_hier *h, const char *detect_why, unsigned long long pages,
                       unsigned long long allowance) {
  char why[600], text[700];
  if (detect_why == NULL && cgjob_create(h, job, pages, why, sizeof why) == 0) {
    snprintf(text, sizeof text, "isolated %d %llu", conf->require_isolation, allowance);
    jobfile_write(job, ".iso", text);
    reserve_audit(who, "action=isolate hierarchy=%s cgroup=%s/hugepool/job_%u limit=%llu outcome=ok",
                  h->v2 ? "v2" : "v1", h->mnt, (unsigned)job, pages);
    return 0;
  }
  if (detect_why != NULL) snprintf(why, sizeof why, "%s", detect_why);
  snprintf(text, sizeof text, "unisolated %d %s", conf->require_isolation, why);
  jobfile_write(job, ".iso", text);
  reserve_audit(who, "action=isolate limit=%llu outcome=%s reason=\"%s\"", pages,
                conf->require_isolation ? "refused" : "unavailable", why);
  if (!conf->require_isolation) return 0;
  snprintf(text, sizeof text, "the site requires hugetlb isolation (require_isolation yes), which is not possible: %s",
           why);
  record_failure(job, text);
  return -1;
}

static int end_isolation(const struct reserve_caller *who, uint32_t job, char *why, size_t whylen);

/* Registers the job (its owner, for require_job and limits.c) from a clean
 * state for its id, which Slurm may have used before: an earlier job's
 * cgroup is ended as its epilog would have, then its files go (a .kept left
 * by a clean-up would make this job count as not running, a .failed refuse
 * it); a cgroup that cannot be ended keeps the id held, its files as they
 * are.  -1 if the job is not registered: limits.c would never count its
 * limit, so nothing is granted and no cgroup made; said in the audit log,
 * the node's log, and to the job (`have`: --hugepages) through .failed where
 * that can be written (else task_init_privileged refuses it). */
static int register_job(const struct reserve_caller *who, uint32_t job, int have) {
  char why[600], text[700], held[480];
  if (end_isolation(who, job, held, sizeof held) != 0) {
    snprintf(why, sizeof why, "job id %u is still held on this node by an earlier job: %s", (unsigned)job, held);
  } else {
    jobfile_drop(job, (const char *const[]){".failed", ".iso", ".kept", NULL});
    if (reserve_job_register(job, who->uid) == 0) return 0;
    snprintf(why, sizeof why, "cannot register the job in %s: %s", RESERVE_JOBS_DIR, strerror(errno));
  }
  reserve_audit(who, "action=register outcome=error reason=\"%s; nothing granted, no hugetlb cgroup made\"", why);
  slurm_error("hugepool: job %u: %s; nothing granted, no hugetlb cgroup made", (unsigned)job, why);
  snprintf(text, sizeof text, "--hugepages could not be granted: %s", why);
  if (have) record_failure(job, text);
  return -1;
}

int slurm_spank_job_prolog(spank_t sp, int ac, char **av) {
  struct reserve_caller who;
  gid_t groups[RESERVE_MAX_GROUPS];
  struct reserve_config conf;
  struct reserve_request rq;
  struct cg_hier h;
  char *val = NULL, msg[1024], why[600], text[1100];
  const char *detect_why = NULL;
  uint32_t job;
  int have = 0;
  (void)ac;
  (void)av;
  openlog("hugepool-spank", LOG_PID, LOG_AUTHPRIV);
  if (job_caller(sp, &who, groups, &job) != 0) {
    slurm_error("hugepool: cannot identify the job");
    return 0;
  }
  have = spank_option_getopt(sp, &hugepages_opt, &val) == ESPANK_SUCCESS;
  if (register_job(&who, job, have) != 0) return 0;
  memset(&rq, 0, sizeof rq);
  rq.action = ACT_GRANT;
  rq.node = -1;
  rq.size_kb = RESERVE_PAGE_2M;
  rq.for_job = 1;
  if (have && (val == NULL || reserve_parse_count(val, RESERVE_MAX_PAGES, &rq.pages) != 0 || rq.pages == 0)) {
    snprintf(msg, sizeof msg, "--hugepages could not be granted: --hugepages: not a whole number from 1 to %llu",
             RESERVE_MAX_PAGES);
    reserve_audit(&who, "action=grant outcome=refused reason=\"bad --hugepages value\"");
    record_failure(job, msg);
    return 0;
  }
  if (reserve_load_config(&conf, msg, sizeof msg) != 0 ||
      (have && reserve_authorize(&conf, &who, msg, sizeof msg) != 0)) {
    if (!have) return 0; /* nothing asked: nothing to refuse */
    reserve_audit(&who, "action=grant request=%llu granted=0 outcome=refused reason=\"%s\"", rq.pages, msg);
    snprintf(text, sizeof text, "--hugepages could not be granted: %s", msg);
    record_failure(job, text);
    return 0;
  }
  if (!have && !conf.default_job_pages_set) return 0; /* such jobs are not isolated */
  if (cg_detect(&h, why, sizeof why) != 0) detect_why = why;
  if (detect_why != NULL && conf.require_isolation) /* refused before anything is granted */
    return isolate_job(&who, &conf, job, &h, detect_why, have ? rq.pages : conf.default_job_pages, 0), 0;
  if (have) {
    int rc, tries = 0;
    /* A busy lock (after a stopped helper holding it was killed) is retried. */
    while ((rc = reserve_grant(&conf, &who, &rq, msg, sizeof msg)) == RESERVE_BUSY && ++tries < 3) {
    }
    if (rc != RESERVE_OK) { /* reserve_grant has logged it */
      snprintf(text, sizeof text, "--hugepages could not be granted: %s", msg);
      record_failure(job, text);
      return 0;
    }
  }
  (void)isolate_job(&who, &conf, job, &h, detect_why, have ? rq.pages : conf.default_job_pages,
                    have ? 0 : conf.default_job_pages);
  return 0;
}

/* Between task_init_privileged and task_init (the same process, the task). */
static char task_note[700], task_fail[700];
static int task_refused;

/* The prolog registers every job, and writes the .iso of every job it
 * grants for or isolates.  A job it could not register was granted nothing
 * and has no cgroup; a job whose .iso is missing (its write failed) would
 * run outside its cgroup.  Either way (`what`), a task that needs a grant
 * (--hugepages) or isolation (required, with default_job_pages) is refused:
 * the reason goes to task_fail (a .failed the prolog wrote, if any, says
 * more and is shown instead: slurm_spank_task_init). */
static void record_missing(spank_t sp, const char *what) {
  struct reserve_config conf;
  char *val = NULL, msg[512];
  if (spank_option_getopt(sp, &hugepages_opt, &val) == ESPANK_SUCCESS) {
    snprintf(task_fail, sizeof task_fail, "--hugepages could not be granted: %s (the node's log says why)", what);
    return;
  }
  if (reserve_load_config(&conf, msg, sizeof msg) != 0 || !conf.require_isolation || !conf.default_job_pages_set)
    return;
  snprintf(task_fail, sizeof task_fail,
           "the site requires hugetlb isolation (require_isolation yes), which is not possible: %s (the node's log "
           "says why)",
           what);
}

/* Root, in the task before it drops privileges: enter the job's cgroup. */
int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av) {
  char buf[700], why[700];
  struct cg_hier h;
  uint32_t job;
  int required = 0;
  (void)ac;
  (void)av;
  if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS) return 0;
  if (jobfile_read(job, "", buf, sizeof buf) != 0 || jobfile_read(job, ".kept", buf, sizeof buf) == 0) {
    record_missing(sp, "the job could not be registered on this node"); /* (.kept: the id is an earlier job's) */
    return 0;
  }
  if (jobfile_read(job, ".iso", buf, sizeof buf) != 0) {
    record_missing(sp, "the job's isolation record could not be written on this node");
    return 0;
  }
  if (strncmp(buf, "isolated ", 9) == 0) {
    struct reserve_caller who;
    gid_t groups[RESERVE_MAX_GROUPS];
    uint32_t id;
    required = buf[9] == '1';
    if (cg_detect(&h, why, sizeof why) == 0 && cgjob_task_enter(&h, job, why, sizeof why) == 0) return 0;
    openlog("hugepool-spank", LOG_PID, LOG_AUTHPRIV);
    if (job_caller(sp, &who, groups, &id) == 0)
      reserve_audit(&who, "action=isolate-task pid=%ld outcome=%s reason=\"%s\"", (long)getpid(),
                    required ? "refused" : "unavailable", why);
  } else if (strncmp(buf, "unisolated ", 11) == 0 && strlen(buf) > 13) {
    required = buf[11] == '1';
    snprintf(why, sizeof why, "%s", buf + 13);
  } else {
    snprintf(why, sizeof why, "the job's isolation record is damaged");
    required = 1;
  }
  snprintf(task_note, sizeof task_note, "%s", why);
  task_refused = required;
  return 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av) {
  char why[1100];
  uint32_t job;
  int failed;
  (void)ac;
  (void)av;
  if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS) return 0;
  failed = jobfile_read(job, ".failed", why, sizeof why) == 0; /* the prolog's reason, the most precise */
  if (!failed && task_fail[0] != '\0') {
    snprintf(why, sizeof why, "%s", task_fail);
    failed = 1;
  }
  if (failed) {
    /* In the task, on its stderr: the user sees it in the job's output. */
    dprintf(2, "hugepool: %s\n", why);
    slurm_error("hugepool: %s", why);
    return -1;
  }
  if (task_refused) {
    dprintf(2, "hugepool: the site requires hugetlb isolation (require_isolation yes), which is not possible: %s\n",
            task_note);
    slurm_error("hugepool: hugetlb isolation not possible: %s", task_note);
    return -1;
  }
  if (task_note[0] != '\0')
    dprintf(2, "hugepool: note: this job's hugetlb pages are not isolated from other jobs: %s\n", task_note);
  return 0;
}

/* The job's cgroup goes, and whatever is still in it (a process that
 * escaped Slurm's tracking by setsid or a double fork) is killed first:
 * moved anywhere else, it would keep reserving pages after its grant is
 * released.  Tried for every job, isolated or not (a cgroup left by a
 * damaged record must not outlive its job); audited when there was one.
 * 0, or -1 (why: the reason) when a cgroup may be left with a limit. */
static int end_isolation(const struct reserve_caller *who, uint32_t job, char *why, size_t whylen) {
  struct cg_hier h;
  char buf[700];
  int killed = 0, isolated = jobfile_read(job, ".iso", buf, sizeof buf) == 0 && strncmp(buf, "isolated ", 9) == 0;
  if (cg_detect(&h, why, whylen) != 0) {
    if (!isolated) return 0;
    reserve_audit(who, "action=isolate-end outcome=error reason=\"%s\"", why);
    return -1;
  }
  if (cgjob_remove(&h, job, &killed, why, whylen) != 0) {
    reserve_audit(who, "action=isolate-end cgroup=%s/hugepool/job_%u killed=%d outcome=error reason=\"%s\"", h.mnt,
                  (unsigned)job, killed, why);
    return -1;
  }
  if (isolated || killed > 0)
    reserve_audit(who, "action=isolate-end cgroup=%s/hugepool/job_%u killed=%d outcome=ok", h.mnt, (unsigned)job,
                  killed);
  return 0;
}

/* The job's cgroup outlived it: its limit (what it still reserves) must stay
 * covered by a grant, and counted by limits.c, so the job stays registered
 * (with its .iso) and nothing is released now.  Marked .kept: it no longer
 * runs, so the user's later epilogs release (other_jobs_running), keeping
 * what its cgroup still reserves (release.c: what the user's jobs have
 * reserved is kept). */
static void keep_job(const struct reserve_caller *who, uint32_t job, const char *why) {
  jobfile_write(job, ".kept", "kept\n"); /* if it cannot be written, it counts as running: nothing released */
  /* (why is in the isolate-end line just before, not repeated here) */
  reserve_audit(who,
                "action=release released=0 outcome=kept reason=\"the job's isolation could not be ended (isolate-end): "
                "it stays registered, its grant kept; an administrator must end what is left in its cgroup, remove "
                "the cgroup and " RESERVE_JOBS_DIR "/%u, %u.iso and %u.kept; the user's next epilog then releases\"",
                (unsigned)job, (unsigned)job, (unsigned)job);
  slurm_error(
      "hugepool: job %u: %s; the job stays registered and its grant is kept until an administrator "
      "removes the cgroup (see the audit log)",
      (unsigned)job, why);
}

/* Does another job of the user's still run on this node?  A job kept by an
 * epilog that could not end its isolation (.kept) does not: what its cgroup
 * reserves is kept by the release.  1, 0, or -1 (errno: the registry cannot
 * be read); more jobs than can be listed count as running (fail closed). */
static int other_jobs_running(uid_t uid, uint32_t job) {
  unsigned long jobs[RESERVE_MAX_JOBS];
  char buf[16];
  int i, n = state_registry_jobs(uid, job, jobs, RESERVE_MAX_JOBS);
  if (n < 0) return errno == E2BIG ? 1 : -1;
  for (i = 0; i < n; i++)
    if (jobs[i] > UINT32_MAX || jobfile_read((uint32_t)jobs[i], ".kept", buf, sizeof buf) != 0) return 1;
  return 0;
}

static void release_user(const struct reserve_caller *who, uint32_t job) {
  char msg[1024];
  int rc, tries = 0, others = other_jobs_running(who->uid, job);
  if (others != 0) {
    if (others < 0)
      reserve_audit(who, "action=release released=0 outcome=error reason=\"the job registry cannot be read: %s\"",
                    strerror(errno));
    return; /* another job of the user's still runs here, or it cannot be known */
  }
  /* The release must not be dropped because the lock was busy: retry (each
   * try waits for the lock and kills a stopped helper holding it). */
  while ((rc = reserve_release(who, msg, sizeof msg)) == RESERVE_BUSY && ++tries < 5) {
  }
  if (rc != RESERVE_OK) slurm_error("hugepool: release for job %u: %s", (unsigned)job, msg);
}

int slurm_spank_job_epilog(spank_t sp, int ac, char **av) {
  struct reserve_caller who;
  gid_t groups[RESERVE_MAX_GROUPS];
  char why[600];
  uint32_t job;
  (void)ac;
  (void)av;
  openlog("hugepool-spank", LOG_PID, LOG_AUTHPRIV);
  if (job_caller(sp, &who, groups, &job) != 0) return 0;
  jobfile_drop(job, (const char *const[]){".failed", NULL});
  if (jobfile_read(job, ".kept", why, sizeof why) == 0) return 0; /* the id is an earlier job's (register_job) */
  if (end_isolation(&who, job, why, sizeof why) != 0) {
    keep_job(&who, job, why);
    return 0;
  }
  reserve_job_unregister(job);
  jobfile_drop(job, (const char *const[]){".iso", NULL});
  release_user(&who, job);
  return 0;
}
