/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE /* dprintf */
/* hugepool-reserve: granting pages (who may ask: authorize.c; --status: status.c).
 * Shared by the helper and the Slurm plugin; it never execs, never uses a
 * shell.  Rules kept:
 *
 *  1. The config is the one config.c loaded under its rules (no symlink,
 *     root-owned, not writable by group or others); anything else refuses
 *     everything.
 *  2. Only a caller authorize.c allowed gets here; others get --status's
 *     pool figures (world-readable sysfs numbers) and no more: no lock, no
 *     grant table, no cgroup.
 *  3. Every limit is computed from the kernel's numbers at the time of the
 *     request, under the lock: max_pages per user, max_fraction and
 *     min_free_mb for the machine and for a --node grant's node.
 *  4. The intent is in the table before the pool grows, the grant after
 *     the pool is read back; a shortfall is given back, never recorded.
 *  5. Every request ends in exactly one audit line (grant_audit), on
 *     every path, with what was asked, what changed and why.
 *  6. Status output (status.c) is written after the lock is dropped.
 *  7. A new Slurm job's pages are added to its user's grant, so that the
 *     reservation limits of a user's jobs never add up to more than the
 *     user holds (limits.c).  Inside a job whose hugetlb cgroup the helper
 *     verified (cgroup.c), PAGES is what the job may reserve: under the lock,
 *     limits above the user's grants are lowered first, the grant grows by
 *     what the jobs' limits would exceed it by, and the job's limit is set
 *     to PAGES (never raised by a sum) only after the pool has grown.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helper.h"

/* ---- grant ---- */

/* What one grant did, for its audit line. */
struct grant_log {
  const char *outcome; /* ok, unchanged, refused, error, shortfall */
  int pool_known;      /* before/after are meaningful */
  unsigned long long before, after, granted, holds;
  const char *restored; /* shortfall only: "yes" or "no" */
  int reason;           /* msg is the reason */
};

static void grant_audit(const struct reserve_caller *who, const struct reserve_request *rq, const struct grant_log *l,
                        const char *msg) {
  char node[16], pool[64] = "", holds[32] = "", tail[600] = "";
  reserve_node_name(node, sizeof node, rq->node);
  if (l->pool_known) snprintf(pool, sizeof pool, " before=%llu after=%llu", l->before, l->after);
  if (l->holds != 0) snprintf(holds, sizeof holds, " holds=%llu", l->holds);
  if (l->restored != NULL)
    snprintf(tail, sizeof tail, " restored=%s", l->restored);
  else if (l->reason)
    snprintf(tail, sizeof tail, " reason=\"%s\"", msg);
  reserve_audit(who, "action=grant size=%ukB node=%s request=%llu%s granted=%llu%s outcome=%s%s", rq->size_kb, node,
                rq->pages, pool, l->granted, holds, l->outcome, tail);
}

/* max_fraction and min_free_mb for delta_kb more of hugetlb memory, against
 * the machine's meminfo (node < 0) or a NUMA node's.  0, or -1 with the reason. */
static int memory_limits(const struct reserve_config *c, int node, unsigned long long delta_kb, char *msg,
                         size_t msglen) {
  struct meminfo mi;
  char where[32] = "";
  if (node >= 0) {
    snprintf(where, sizeof where, " on node %d", node);
    if (sysfs_node_meminfo_read(node, &mi) != 0) {
      snprintf(msg, msglen, "cannot read the meminfo of node %d", node);
      return -1;
    }
  } else if (sysfs_meminfo_read(&mi) != 0) {
    snprintf(msg, msglen, "cannot read meminfo");
    return -1;
  }
  if ((mi.hugetlb_kb + delta_kb) * 1000 > mi.total_kb * c->max_permille) { /* both < 2^51: no overflow */
    snprintf(msg, msglen, "limit max_fraction%s: hugetlb memory would be %llu kB of %llu kB, the site allows %u/1000",
             where, mi.hugetlb_kb + delta_kb, mi.total_kb, c->max_permille);
    return -1;
  }
  if (mi.avail_kb < delta_kb || mi.avail_kb - delta_kb < c->min_free_mb * 1024) {
    snprintf(msg, msglen, "limit min_free_mb%s: only %llu MB %s, %llu MB must stay free", where, mi.avail_kb / 1024,
             node >= 0 ? "free there" : "available", c->min_free_mb);
    return -1;
  }
  return 0;
}

/* The site limits for delta more pages: max_pages, then the memory limits
 * of the machine and, for a --node grant, of the node's own memory (a node
 * pool must not take a whole node even when the machine has plenty). */
static int grant_limits(const struct reserve_config *c, const struct reserve_caller *who,
                        const struct reserve_request *rq, const struct reserve_grants *gs, unsigned long long delta,
                        char *msg, size_t msglen) {
  unsigned long long user_2m = 0, delta_kb = delta * rq->size_kb;
  size_t i;
  for (i = 0; i < gs->n; i++)
    if (gs->g[i].uid == who->uid) user_2m += gs->g[i].pages * (gs->g[i].size_kb / RESERVE_PAGE_2M);
  if (user_2m + delta * (rq->size_kb / RESERVE_PAGE_2M) > c->max_pages) {
    snprintf(msg, msglen, "limit max_pages: you would hold %llu 2 MB pages, the site allows %llu",
             user_2m + delta * (rq->size_kb / RESERVE_PAGE_2M), c->max_pages);
    return -1;
  }
  if (memory_limits(c, -1, delta_kb, msg, msglen) != 0) return -1;
  return rq->node >= 0 ? memory_limits(c, rq->node, delta_kb, msg, msglen) : 0;
}

/* What a grant will do, decided under the lock before anything changes. */
struct grant_plan {
  struct pool_state st;
  struct reserve_grant_entry *g;
  unsigned long long cur, want, delta;
  unsigned long long job_to; /* the caller's job's new limit; 0: no job */
  int done;                  /* nothing to do (the message says why) */
};

/* Inside an isolated job: PAGES is what the job may reserve.  The grant
 * grows by what the user's jobs' limits would then exceed the user's grants
 * by (limits.c), and the job's limit is set to PAGES, not raised by the
 * pages granted: a limit covered only by a grant already released (or one
 * that drifted) is lowered first, never counted as the job's. */
static int grant_plan_job(const struct reserve_caller *who, const struct reserve_request *rq, const struct cg_job *jc,
                          struct state *s, struct grant_plan *p, char *msg, size_t msglen) {
  struct user_jobs uj;
  unsigned long long held = limits_grants_of_size(&s->gs, who->uid, rq->size_kb), has, allow, need;
  char node[16];
  reserve_node_name(node, sizeof node, rq->node);
  if (limits_jobs_load(who->uid, rq->size_kb, &uj) != 0 || limits_jobs_fit(&uj, held, jc->job) != 0) {
    snprintf(msg, msglen, "the reservation limits of your jobs could not be %s (%s): nothing changed",
             errno == EBUSY ? "lowered to what you hold" : "read", strerror(errno));
    return RESERVE_FAIL;
  }
  has = limits_job_limit_of(&uj, jc->job, &allow);
  if (has == ~0ULL) return RESERVE_OK; /* not limited: a grant as outside a job */
  if (rq->pages <= has) {
    snprintf(msg, msglen, "your job %lu may already reserve %llu pages of %u kB (you hold %llu on node %s)", jc->job,
             has, rq->size_kb, p->cur, node);
    p->done = 1;
    return RESERVE_OK;
  }
  need = limits_jobs_charged(&uj, jc->job) + (rq->pages > allow ? rq->pages - allow : 0);
  p->want = p->cur + (need > held ? need - held : 0);
  p->job_to = rq->pages;
  return RESERVE_OK;
}

static int grant_plan(const struct reserve_config *c, const struct reserve_caller *who,
                      const struct reserve_request *rq, const struct cg_job *jc, struct state *s, struct grant_plan *p,
                      char *msg, size_t msglen) {
  char node[16];
  int rc;
  reserve_node_name(node, sizeof node, rq->node);
  memset(p, 0, sizeof *p);
  if (sysfs_pool_read(rq->node, rq->size_kb, &p->st) != 0) {
    snprintf(msg, msglen, "no %u kB pool on node %s", rq->size_kb, node);
    return RESERVE_FAIL;
  }
  p->g = state_grant_find(&s->gs, who->uid, rq->node, rq->size_kb);
  p->cur = p->want = p->g != NULL ? p->g->pages : 0;
  if (jc != NULL && cg_job_limit_ok(jc, rq->size_kb) != 0) { /* before anything changes */
    snprintf(msg, msglen, "the reservation limit of your job's cgroup %s is not one the helper may raise: %s", jc->path,
             strerror(errno));
    return RESERVE_FAIL;
  }
  if (jc != NULL && ((rc = grant_plan_job(who, rq, jc, s, p, msg, msglen)) != RESERVE_OK || p->done)) return rc;
  if (p->job_to == 0) p->want = rq->for_job ? p->cur + rq->pages : rq->pages;
  if (p->want <= p->cur && p->job_to == 0) {
    snprintf(msg, msglen, "you already hold %llu pages of %u kB on node %s", p->cur, rq->size_kb, node);
    p->done = 1;
    return RESERVE_OK;
  }
  p->delta = p->want - p->cur;
  if (p->delta > 0 && grant_limits(c, who, rq, &s->gs, p->delta, msg, msglen) != 0) return RESERVE_FAIL;
  if (p->delta > 0 && p->g == NULL && s->gs.n >= RESERVE_MAX_GRANTS) {
    snprintf(msg, msglen, "grant table full");
    return RESERVE_FAIL;
  }
  return RESERVE_OK;
}

/* Writes the intent, grows the pool, settles: RESERVE_OK once every page
 * asked for is charged; a shortfall is given back (or charged if it cannot be). */
static int grant_grow(const struct reserve_caller *who, const struct reserve_request *rq, struct state *s,
                      const struct grant_plan *p, struct grant_log *l, char *msg, size_t msglen) {
  struct settled r;
  int e;
  s->gs.intent = (struct reserve_intent){1, who->uid, rq->node, rq->size_kb, p->st.nr, p->delta, p->want};
  if (state_write(s) != 0) {
    snprintf(msg, msglen, "cannot record the grant (%s); nothing changed", strerror(errno));
    return RESERVE_FAIL;
  }
  (void)sysfs_pool_write_nr(rq->node, rq->size_kb, p->st.nr + p->delta); /* a short or failed write: settled below */
  if (intent_settle(s, &r) != 0) {
    e = errno;
    (void)sysfs_pool_write_nr(rq->node, rq->size_kb, p->st.nr); /* the intent stays: the next call settles the rest */
    snprintf(msg, msglen, "cannot record the grant (%s); pool restored", strerror(e));
    l->outcome = "error";
    return RESERVE_FAIL;
  }
  *l = (struct grant_log){"ok", 1, p->st.nr, r.now, r.charged, 0, NULL, 0};
  if (r.charged == p->delta) return RESERVE_OK;
  l->outcome = "shortfall";
  l->restored = r.charged == 0 ? "yes" : "no";
  if (r.charged == 0)
    snprintf(msg, msglen, "the kernel allocated only %llu of %llu pages; pool restored to %llu", r.came, p->delta,
             p->st.nr);
  else
    snprintf(msg, msglen,
             "the kernel allocated only %llu of %llu pages; pool COULD NOT BE RESTORED to %llu: you are charged "
             "for the %llu pages that stayed",
             r.came, p->delta, p->st.nr, r.charged);
  return RESERVE_FAIL;
}

/* With the lock held: decide, write the intent, grow the pool, settle, and
 * set the caller's job's limit (jc, NULL outside an isolated job) after the
 * pool has grown: a kill in between leaves the limit below the grant (the
 * safe direction), never above it; so does a limit that cannot be written
 * (the grant stays charged, the message says so). */
static int grant_locked(const struct reserve_config *c, const struct reserve_caller *who,
                        const struct reserve_request *rq, const struct cg_job *jc, struct state *s, struct grant_log *l,
                        char *msg, size_t msglen) {
  struct grant_plan p;
  unsigned long long holds;
  char node[16];
  int rc;
  reserve_node_name(node, sizeof node, rq->node);
  l->outcome = "refused";
  l->reason = 1;
  if ((rc = grant_plan(c, who, rq, jc, s, &p, msg, msglen)) != RESERVE_OK) return rc;
  if (p.done || p.delta == 0) *l = (struct grant_log){p.done ? "unchanged" : "ok", 1, p.st.nr, p.st.nr, 0, p.cur,
                                                      NULL, 0};
  if (p.done) return RESERVE_OK;
  if (p.delta > 0 && (rc = grant_grow(who, rq, s, &p, l, msg, msglen)) != RESERVE_OK) return rc;
  holds = limits_grants_of_size(&s->gs, who->uid, rq->size_kb);
  if (p.job_to == 0 || jc == NULL) {
    snprintf(msg, msglen, "granted: you hold %llu pages of %u kB on node %s (pool %llu -> %llu)", p.want, rq->size_kb,
             node, p.st.nr, l->after);
    return RESERVE_OK;
  }
  if (cg_job_limit_write(jc->fd, &jc->h, rq->size_kb, p.job_to, 1) != 0) {
    snprintf(msg, msglen,
             "granted %llu pages (you hold %llu), but the reservation limit of your job's cgroup %s could not be "
             "set: %s",
             p.delta, holds, jc->path, strerror(errno));
    l->outcome = "error";
    l->reason = 1;
    return RESERVE_FAIL;
  }
  snprintf(msg, msglen,
           "granted: your job %lu may reserve %llu pages of %u kB; you hold %llu on node %s (pool %llu -> %llu)",
           jc->job, p.job_to, rq->size_kb, p.want, node, p.st.nr, l->after);
  return RESERVE_OK;
}

int reserve_grant(const struct reserve_config *c, const struct reserve_caller *who, const struct reserve_request *rq,
                  char *msg, size_t msglen) {
  struct state s;
  struct cg_job jc;
  struct grant_log l = {"error", 0, 0, 0, 0, 0, NULL, 1};
  char why[512];
  int rc, in_job = 0;
  jc.fd = -1;
  /* The helper (never the plugin): is the caller in its job's hugetlb cgroup? */
  if (who->job == 0 && !rq->for_job) {
    in_job = cg_caller_job(who->uid, &jc, why, sizeof why);
    if (in_job < 0) {
      snprintf(msg, msglen, "%s", why);
      l.outcome = "refused";
      grant_audit(who, rq, &l, msg);
      return RESERVE_FAIL;
    }
  }
  rc = state_open(who, &s, 1, msg, msglen);
  if (rc == 0) {
    rc = grant_locked(c, who, rq, in_job == 1 ? &jc : NULL, &s, &l, msg, msglen);
    state_close(&s);
  } else {
    rc = rc == -2 ? RESERVE_BUSY : RESERVE_FAIL;
  }
  cg_job_close(&jc);
  grant_audit(who, rq, &l, msg);
  return rc;
}
