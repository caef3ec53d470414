/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool-reserve: giving pages back.  Rules kept:
 *
 *  1. The table is written before the pool shrinks, with the release's
 *     intent (pool, size before, pages to go): if it cannot be written,
 *     nothing changes (the other order could leave a user charged for pages
 *     already given back, and a second release would then take other
 *     users' pages); if the helper is killed after it, the next call
 *     finishes the shrink as far as rules 2 and 3 allow and charges again
 *     what still cannot go (state.c, release_finish), so no page is left in
 *     the pool charged to no one.
 *  2. Never shrink into pages in use or reserved: a pool shrinks by at
 *     most free - resv.
 *  3. Never shrink into pages promised to others: free - resv - shrink must
 *     still cover every other user's grants less what their processes map,
 *     machine-wide and on each NUMA node the pages may come from.
 *  4. The caller's own mapped pages stay charged to them.
 *  5. Fail closed: if /proc or a pool cannot be read, everything is kept.
 *  6. A pool that shrank by less than planned keeps the rest charged.
 *  7. The caller's jobs keep what they have reserved, and their limits are
 *     lowered to what the caller keeps before the table is written
 *     (limits.c): a released page is in no job's limit.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helper.h"

/* ---- what other users were promised ---- */

/* Pages of size_kb that other users' grants may still need in one pool:
 * node -2 means every pool of that size (the machine-wide count), else one
 * NUMA node's pool (-1: grants on any node).  A user's unmapped memory is
 * their grants less what their processes surely map (usage.c: each page
 * once, nothing it cannot read); that is one total for every size and node,
 * so each pool is assumed to hold all of it, up to the user's grants there
 * (the safe direction). */
static unsigned long long promised(const struct reserve_grants *gs, const struct usage *u, uid_t caller, int node,
                                   unsigned size_kb) {
  unsigned long long total = 0;
  size_t k, i;
  for (k = 0; k < u->n; k++) {
    unsigned long long granted_kb = 0, here_kb = 0, unmapped_kb;
    for (i = 0; i < gs->n; i++) {
      const struct reserve_grant_entry *g = &gs->g[i];
      if (g->uid != u->uid[k] || g->uid == caller) continue;
      granted_kb += g->pages * g->size_kb;
      if (g->size_kb == size_kb && (node == -2 || g->node == node)) here_kb += g->pages * g->size_kb;
    }
    unmapped_kb = granted_kb > u->kb[k] ? granted_kb - u->kb[k] : 0;
    if (here_kb > unmapped_kb) here_kb = unmapped_kb;
    total += (here_kb + size_kb - 1) / size_kb;
  }
  return total;
}

/* Does another user hold a grant of this size bound to a NUMA node?  Then a
 * shrink of the machine-wide pool (where the kernel picks the node) could
 * take that node's promised pages: it goes node by node instead. */
static int node_promises(const struct reserve_grants *gs, uid_t caller, unsigned size_kb) {
  size_t i;
  for (i = 0; i < gs->n; i++)
    if (gs->g[i].uid != caller && gs->g[i].node >= 0 && gs->g[i].size_kb == size_kb) return 1;
  return 0;
}

/* Pages one NUMA node's pool may give up without its promises: 0 if unreadable. */
static unsigned long long node_room(const struct reserve_grants *gs, const struct usage *u, uid_t caller, int node,
                                    unsigned size_kb) {
  struct pool_state st;
  unsigned long long need;
  if (sysfs_pool_read(node, size_kb, &st) != 0) return 0;
  need = promised(gs, u, caller, node, size_kb);
  return sysfs_pool_spare(&st) > need ? sysfs_pool_spare(&st) - need : 0;
}

/* How many pages one of the caller's pools (node, or -1: any) may shrink by
 * now: the free pages nobody reserved must still cover every other user's
 * promise, machine-wide and on each NUMA node the pages may come from.
 * 0 when a pool cannot be read (fail closed). */
static unsigned long long shrink_allowed(const struct reserve_grants *gs, const struct usage *u, uid_t caller, int node,
                                         unsigned size_kb) {
  struct pool_state st;
  unsigned long long ok, need, room = 0;
  int nodes[RESERVE_MAX_NODE + 1];
  size_t n, i;
  if (sysfs_pool_read(-1, size_kb, &st) != 0) return 0;
  need = promised(gs, u, caller, -2, size_kb);
  ok = sysfs_pool_spare(&st) > need ? sysfs_pool_spare(&st) - need : 0;
  if (node >= 0) {
    room = node_room(gs, u, caller, node, size_kb);
  } else if (node_promises(gs, caller, size_kb)) {
    n = sysfs_node_list(nodes, sizeof nodes / sizeof nodes[0]);
    for (i = 0; i < n; i++) room += node_room(gs, u, caller, nodes[i], size_kb);
  } else {
    return ok;
  }
  return room < ok ? room : ok;
}

/* Shrinks one of the caller's pools by up to want pages, within
 * shrink_allowed, and returns how many went (read back from the kernel);
 * *before and *after: the pool's nr_hugepages (machine-wide for node -1). */
static unsigned long long shrink_pool(const struct reserve_grants *gs, const struct usage *u, uid_t caller, int node,
                                      unsigned size_kb, unsigned long long want, unsigned long long *before,
                                      unsigned long long *after) {
  struct pool_state st;
  int nodes[RESERVE_MAX_NODE + 1];
  size_t n, i;
  unsigned long long left;
  *before = *after = 0;
  if (sysfs_pool_read(node, size_kb, &st) != 0) return 0;
  *before = *after = st.nr;
  if (shrink_allowed(gs, u, caller, node, size_kb) < want || st.nr < want) return 0;
  if (node >= 0 || !node_promises(gs, caller, size_kb)) {
    (void)sysfs_pool_write_nr(node, size_kb, st.nr - want);
  } else { /* node by node, each within its own promises */
    n = sysfs_node_list(nodes, sizeof nodes / sizeof nodes[0]);
    for (i = 0, left = want; i < n && left > 0; i++) {
      unsigned long long room = node_room(gs, u, caller, nodes[i], size_kb), nnr;
      if (room > left) room = left;
      if (room == 0 || sysfs_pool_file_read(nodes[i], size_kb, "nr_hugepages", &nnr) != 0 || nnr < room) continue;
      if (sysfs_pool_write_nr(nodes[i], size_kb, nnr - room) == 0) left -= room;
    }
  }
  if (sysfs_pool_file_read(node, size_kb, "nr_hugepages", after) != 0) *after = st.nr;
  return st.nr > *after ? (st.nr - *after < want ? st.nr - *after : want) : 0;
}

/* A release killed between its intent and its shrink (state.c settles it
 * at the next locked call): the pool shrinks now by up to want of the pages
 * that did not go, under rules 2 and 3 with no caller: the released user's
 * remaining grant is promised like everyone else's.  Returns how many went
 * (0 when /proc or the pool cannot be read: fail closed, they are charged
 * back instead). */
unsigned long long release_finish(const struct reserve_grants *gs, int node, unsigned size_kb,
                                  unsigned long long want) {
  const uid_t nobody_caller = (uid_t)-1;
  struct usage *u = calloc(1, sizeof *u);
  unsigned long long room, before, after, went = 0;
  if (u == NULL) return 0;
  if (usage_read(gs, nobody_caller, u) == 0) {
    room = shrink_allowed(gs, u, nobody_caller, node, size_kb);
    if (room > want) room = want;
    if (room > 0) went = shrink_pool(gs, u, nobody_caller, node, size_kb, room, &before, &after);
  }
  free(u);
  return went;
}

/* ---- release ---- */

static void append(char *msg, size_t msglen, size_t *used, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void append(char *msg, size_t msglen, size_t *used, const char *fmt, ...) {
  va_list ap;
  int w;
  if (*used >= msglen) return;
  va_start(ap, fmt);
  w = vsnprintf(msg + *used, msglen - *used, fmt, ap);
  va_end(ap);
  if (w > 0) *used = (size_t)w < msglen - *used ? *used + (size_t)w : msglen;
}

/* One release, decided and done under the lock. */
struct release {
  const struct reserve_caller *who;
  struct state s;
  struct usage u;
  struct user_jobs uj[2]; /* the caller's jobs' limits: 2 MB, 1 GB pages */
  int procs_err, jobs_err; /* 0: read */
  unsigned long long plan[RESERVE_MAX_GRANTS];
  char *msg;
  size_t msglen, used;
  int rc;
};

static const struct user_jobs *jobs_of(const struct release *r, unsigned size_kb) {
  return &r->uj[size_kb == RESERVE_PAGE_2M ? 0 : 1];
}

/* What one of the caller's pools keeps (still charged), and why: what the
 * caller's processes map or hold open (usage.c, counted high; one total for
 * every page size and node: each pool keeps enough to cover all of it, the
 * safe direction), at least what the
 * caller's jobs have reserved of that size; everything if either count
 * cannot be made (fail closed). */
static unsigned long long release_keep(const struct release *r, const struct reserve_grant_entry *g, char *why,
                                       size_t cap) {
  unsigned long long keep, jobs;
  if (r->procs_err == ETIMEDOUT) {
    snprintf(why, cap, "reading /proc took longer than %d s (too many processes) to see what your processes map",
             RESERVE_SCAN_MS / 1000);
    return g->pages;
  }
  if (r->procs_err != 0 || r->jobs_err != 0) {
    snprintf(why, cap, "cannot read %s (%s) to see what your %s", r->procs_err ? "/proc" : "your jobs' hugetlb cgroups",
             strerror(r->procs_err ? r->procs_err : r->jobs_err), r->procs_err ? "processes map" : "jobs reserve");
    return g->pages;
  }
  keep = (r->u.caller_kb + g->size_kb - 1) / g->size_kb;
  jobs = limits_jobs_reserved(jobs_of(r, g->size_kb));
  if (jobs > keep) {
    keep = jobs;
    snprintf(why, cap, "your jobs have reserved %llu pages of %u kB", jobs, g->size_kb);
  } else {
    snprintf(why, cap, "your processes still hold %llu kB of hugetlb memory", r->u.caller_kb);
  }
  return keep > g->pages ? g->pages : keep;
}

/* Decides, changes nothing but our copy of the table: each of the caller's
 * pools gives back what it does not keep, if shrink_allowed lets it.
 * Returns 1 if anything is to be given back. */
static int release_decide(struct release *r, int *any) {
  char node[16], why[160];
  size_t i;
  int planned = 0;
  for (i = 0; i < r->s.gs.n; i++) {
    struct reserve_grant_entry *g = &r->s.gs.g[i];
    unsigned long long keep, spare;
    r->plan[i] = 0;
    if (g->uid != r->who->uid || g->pages == 0) continue;
    *any = 1;
    reserve_node_name(node, sizeof node, g->node);
    if ((keep = release_keep(r, g, why, sizeof why)) > 0) {
      reserve_audit(r->who, "action=release size=%ukB node=%s request=%llu kept=%llu outcome=kept reason=\"%s\"",
                    g->size_kb, node, g->pages, keep, why);
      append(r->msg, r->msglen, &r->used, "kept %llu of %llu pages of %u kB on node %s: %s (release again when %s)\n",
             keep, g->pages, g->size_kb, node, why, r->procs_err || r->jobs_err ? "it can be read" : "they have ended");
      r->rc = RESERVE_FAIL;
      if (keep == g->pages) continue;
    }
    if ((spare = shrink_allowed(&r->s.gs, &r->u, r->who->uid, g->node, g->size_kb)) < g->pages - keep) {
      reserve_audit(r->who,
                    "action=release size=%ukB node=%s request=%llu released=0 outcome=refused reason=\"only %llu free "
                    "pages not reserved or promised to other users\"",
                    g->size_kb, node, g->pages - keep, spare);
      append(r->msg, r->msglen, &r->used,
             "kept %llu pages of %u kB on node %s: pages are in use or reserved, or promised to other users' "
             "grants (only %llu spare)\n",
             g->pages - keep, g->size_kb, node, spare);
      r->rc = RESERVE_FAIL;
    } else {
      r->plan[i] = g->pages - keep;
      g->pages = keep;
      planned = 1;
    }
  }
  return planned;
}

/* Before the table is written: the caller's jobs' limits lowered to what
 * the caller keeps (limits.c).  0, or -1: nothing may be released. */
static int release_fit(struct release *r) {
  size_t i;
  for (i = 0; i < 2; i++) {
    struct user_jobs *uj = &r->uj[i];
    if (uj->n > 0 && limits_jobs_fit(uj, limits_grants_of_size(&r->s.gs, r->who->uid, uj->size_kb), 0) != 0) {
      int e = errno;
      append(r->msg, r->msglen, &r->used,
             "nothing released: the reservation limits of your jobs could not be lowered to what you keep: %s\n",
             strerror(e));
      reserve_audit(r->who, "action=release released=0 outcome=error reason=\"job limits not lowered: %s\"",
                    strerror(e));
      return -1;
    }
  }
  return 0;
}

/* Records the intent of one pool's release with the grant lowered, before
 * the pool shrinks (rule 1): a kill after this write leaves the intent for
 * the next call, which charges again whatever did not go.  0, or -1 with
 * the reason in the message (nothing of this pool changed). */
static int release_intent(struct release *r, size_t i, const char *node) {
  struct reserve_grant_entry *g = &r->s.gs.g[i];
  unsigned long long before;
  if (sysfs_pool_file_read(g->node, g->size_kb, "nr_hugepages", &before) != 0) {
    append(r->msg, r->msglen, &r->used, "kept %llu pages of %u kB on node %s: cannot read the pool: %s\n", r->plan[i],
           g->size_kb, node, strerror(errno));
    return -1;
  }
  if (before < r->plan[i]) { /* (resized from outside: the intent could not even be a valid record) */
    append(r->msg, r->msglen, &r->used, "kept %llu pages of %u kB on node %s: the pool holds only %llu pages\n",
           r->plan[i], g->size_kb, node, before);
    return -1;
  }
  g->pages -= r->plan[i];
  r->s.gs.intent = (struct reserve_intent){RESERVE_INTENT_RELEASE, r->who->uid, g->node, g->size_kb, before,
                                           r->plan[i], g->pages};
  if (state_write(&r->s) == 0) return 0;
  append(r->msg, r->msglen, &r->used, "kept %llu pages of %u kB on node %s: cannot record the release: %s\n",
         r->plan[i], g->size_kb, node, strerror(errno));
  reserve_audit(r->who, "action=release size=%ukB node=%s request=%llu released=0 outcome=error reason=\"cannot write "
                "the grant table\"", g->size_kb, node, r->plan[i]);
  return -1;
}

/* Says why a pool gave up fewer pages than planned: between the decision
 * and the shrink, pages were mapped or reserved (the kernel gives up only
 * free ones) or promised to other users' grants; or, with room enough, the
 * kernel did not take the write. */
static void release_short(struct release *r, size_t i, unsigned long long released) {
  const struct reserve_grant_entry *g = &r->s.gs.g[i];
  unsigned long long spare = shrink_allowed(&r->s.gs, &r->u, r->who->uid, g->node, g->size_kb);
  if (spare >= r->plan[i] - released)
    append(r->msg, r->msglen, &r->used,
           "kept %llu of those %llu pages (still yours): the kernel did not give them up (the pool file could not "
           "be written, or its pages were in use); release again later\n",
           r->plan[i] - released, r->plan[i]);
  else
    append(r->msg, r->msglen, &r->used,
           "kept %llu of those %llu pages (still yours): when the pool shrank, only %llu free pages were not in use, "
           "reserved or promised to other users' grants; release again later\n",
           r->plan[i] - released, r->plan[i], spare);
}

/* Shrinks one planned pool after recording its intent, then records what
 * went (what did not go stays the caller's) and clears the intent in the
 * same write.  0, or -1: stop (the table was not written as planned). */
static int release_one(struct release *r, size_t i) {
  struct reserve_grant_entry *g = &r->s.gs.g[i];
  unsigned long long before, after, released;
  char node[16];
  reserve_node_name(node, sizeof node, g->node);
  if (release_intent(r, i, node) != 0) return -1;
  /* Decided again inside: a node's pool and the global one are the same
   * pages, so an earlier shrink in this call changed both. */
  released = shrink_pool(&r->s.gs, &r->u, r->who->uid, g->node, g->size_kb, r->plan[i], &before, &after);
  reserve_audit(r->who, "action=release size=%ukB node=%s request=%llu before=%llu after=%llu released=%llu outcome=%s",
                g->size_kb, node, r->plan[i], before, after, released, released == r->plan[i] ? "ok" : "partial");
  append(r->msg, r->msglen, &r->used, "released %llu pages of %u kB on node %s (pool %llu -> %llu)\n", released,
         g->size_kb, node, before, after);
  if (released != r->plan[i]) {
    release_short(r, i, released);
    r->rc = RESERVE_FAIL;
  }
  g->pages += r->plan[i] - released; /* what did not go is still the caller's */
  r->s.gs.intent.active = 0;
  if (state_write(&r->s) == 0) return 0;
  append(r->msg, r->msglen, &r->used, "cannot record the release (%s): the next call settles it\n", strerror(errno));
  r->rc = RESERVE_FAIL;
  return -1;
}

/* Shrinks each planned pool, one at a time, each with its own intent.  A
 * failed table write stops the loop: the table read back no longer matches
 * our plan's indexes, and the pools not reached stay charged. */
static void release_shrink(struct release *r) {
  size_t i;
  for (i = 0; i < r->s.gs.n; i++) {
    if (r->plan[i] == 0) continue;
    if (release_one(r, i) != 0) {
      r->rc = RESERVE_FAIL;
      return;
    }
  }
}

/* Each pool's release is recorded (its intent, the grant lowered) before
 * the pool shrinks, and what went after (release_one): a kill at any point
 * leaves a table the next call settles, every page in the pool charged to
 * someone.  If the table cannot be written, nothing changes.  The other
 * order could leave the user charged for pages already given back, and a
 * second release would then take other users' pages.  The caller's jobs'
 * limits are lowered before either.
 *
 * The pool only knows how many pages are free, not whose.  Two rules keep a
 * release from taking pages promised to someone else:
 *  - each of the caller's pools keeps (still charged) as many pages as the
 *    caller's processes map, and as its jobs have reserved (release_keep);
 *  - a pool shrinks only while its free unreserved pages, less the shrink,
 *    still cover every other user's grants less what their processes map
 *    (shrink_allowed), machine-wide and per NUMA node.  That also covers
 *    pages the caller holds without a mapping (a hugetlb memfd).
 * All are computed fail closed: if /proc cannot be read, everything is kept. */
static int release_locked(struct release *r) {
  int any = 0, planned = release_decide(r, &any);
  size_t i;
  if (!any) {
    snprintf(r->msg, r->msglen, "you hold no pages\n");
    reserve_audit(r->who, "action=release released=0 outcome=unchanged");
  }
  if (r->jobs_err == 0 && release_fit(r) != 0) return RESERVE_FAIL;
  for (i = 0; i < r->s.gs.n; i++) r->s.gs.g[i].pages += r->plan[i]; /* charged until its own intent is written */
  if (planned) release_shrink(r);
  return r->rc;
}

int reserve_release(const struct reserve_caller *who, char *msg, size_t msglen) {
  struct release *r = calloc(1, sizeof *r); /* ~60 kB: not on a plugin thread's stack */
  int rc;
  msg[0] = '\0';
  if (r == NULL) {
    snprintf(msg, msglen, "out of memory");
    reserve_audit(who, "action=release outcome=error reason=\"out of memory\"");
    return RESERVE_FAIL;
  }
  r->who = who;
  r->msg = msg;
  r->msglen = msglen;
  if ((rc = state_open(who, &r->s, 1, msg, msglen)) != 0) {
    reserve_audit(who, "action=release outcome=error reason=\"%s\"", msg);
    free(r);
    return rc == -2 ? RESERVE_BUSY : RESERVE_FAIL;
  }
  if (usage_read(&r->s.gs, who->uid, &r->u) != 0) r->procs_err = errno != 0 ? errno : EIO;
  if (limits_jobs_load(who->uid, RESERVE_PAGE_2M, &r->uj[0]) != 0 ||
      limits_jobs_load(who->uid, RESERVE_PAGE_1G, &r->uj[1]) != 0)
    r->jobs_err = errno != 0 ? errno : EIO;
  rc = release_locked(r);
  state_close(&r->s);
  free(r);
  return rc;
}
