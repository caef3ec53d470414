/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool-reserve: the intent record a grant or a release leaves in the
 * table before the pool changes (state.c, rule 5), and how the next locked
 * call settles one its helper left behind: a grant's pages charged or given
 * back; a release's shrink finished where the pool has room
 * (release_finish), what still cannot go charged back.  Either way every
 * page in the pool stays someone's, and the settlement is audited. */
#include <errno.h>
#include <string.h>

#include "helper.h"

/* ---- the intent record ---- */

/* A grant's intent: the pages the pool gained over "before" are charged
 * if all of them came; if only some came they are given back, and whatever
 * cannot be given back is charged. */
static void settle_grant(const struct reserve_intent *in, unsigned long long now, struct settled *out) {
  out->came = now > in->before ? now - in->before : 0;
  if (out->came > in->delta) out->came = in->delta;
  out->charged = out->came;
  if (out->came > 0 && out->came < in->delta) {
    (void)sysfs_pool_write_nr(in->node, in->size_kb, in->before);
    if (sysfs_pool_file_read(in->node, in->size_kb, "nr_hugepages", &now) == 0)
      out->charged = now > in->before ? (now - in->before < in->delta ? now - in->before : in->delta) : 0;
  }
  out->now = now;
}

/* The pages a release's intent gave up so far: before - now, at most delta. */
static unsigned long long release_went(const struct reserve_intent *in, unsigned long long now) {
  unsigned long long went = in->before > now ? in->before - now : 0;
  return went < in->delta ? went : in->delta;
}

/* A release's intent: the table already charges the user what they keep;
 * the pages the pool did not give up (before - now short of delta) are
 * charged to them again, so every page in the pool stays someone's. */
static void settle_release(const struct reserve_intent *in, unsigned long long now, struct settled *out) {
  out->came = release_went(in, now); /* pages that went */
  out->charged = in->delta - out->came;
  out->now = now;
}

/* Adds pages to the intent's user's grant of its pool (a new entry if
 * needed); -1 with ENOSPC when the table is full. */
static int settle_charge(struct reserve_grants *gs, const struct reserve_intent *in, unsigned long long pages) {
  struct reserve_grant_entry *g;
  if (pages == 0) return 0;
  if ((g = state_grant_find(gs, in->uid, in->node, in->size_kb)) == NULL) {
    if (gs->n >= RESERVE_MAX_GRANTS) {
      errno = ENOSPC;
      return -1;
    }
    g = &gs->g[gs->n++];
    *g = (struct reserve_grant_entry){in->uid, in->node, in->size_kb, 0};
  }
  g->pages += pages;
  return 0;
}

/* Settles the table's intent (settle_grant, settle_release).  The intent is
 * cleared in the same table write that records the charge.  Returns 0, or
 * -1 with errno (the pool unreadable, the table full or not written: the
 * intent then stays for the next call). */
int intent_settle(struct state *s, struct settled *out) {
  struct reserve_intent *in = &s->gs.intent;
  unsigned long long now;
  if (sysfs_pool_file_read(in->node, in->size_kb, "nr_hugepages", &now) != 0) return -1;
  if (in->active == RESERVE_INTENT_RELEASE)
    settle_release(in, now, out);
  else
    settle_grant(in, now, out);
  if (settle_charge(&s->gs, in, out->charged) != 0) return -1;
  in->active = 0;
  return state_write(s);
}

/* What a settled intent came to: a grant's pages charged, undone (given
 * back) or partly; a release's pages all gone, all charged again (the pool
 * did not shrink) or partly. */
static const char *reconcile_outcome(const struct reserve_intent *in, const struct settled *r) {
  if (in->active == RESERVE_INTENT_RELEASE)
    return r->charged == 0 ? "released" : r->charged == in->delta ? "recharged" : "partial";
  return r->charged == in->delta ? "charged" : r->charged == 0 ? "undone" : "partial";
}

/* An intent found by a locked call: its helper was killed (or could not
 * write the table) between recording the intent and recording what the
 * pool did (a grant grown, a release shrunk). */
int intent_reconcile(const struct reserve_caller *who, struct state *s) {
  struct reserve_intent in = s->gs.intent;
  struct settled r;
  unsigned long long now, finished = 0;
  char node[16];
  reserve_node_name(node, sizeof node, in.node);
  /* A release's pages that did not go: the shrink is finished first, within
   * the release's rules; settle_release then charges back what still stays. */
  if (in.active == RESERVE_INTENT_RELEASE && sysfs_pool_file_read(in.node, in.size_kb, "nr_hugepages", &now) == 0) {
    unsigned long long went = release_went(&in, now);
    if (went < in.delta) finished = release_finish(&s->gs, in.node, in.size_kb, in.delta - went);
  }
  if (intent_settle(s, &r) != 0) {
    int e = errno;
    reserve_audit(who,
                  "action=reconcile for_uid=%lu size=%ukB node=%s before=%llu delta=%llu finished=%llu outcome=error "
                  "reason=\"%s\"",
                  (unsigned long)in.uid, in.size_kb, node, in.before, in.delta, finished, strerror(e));
    errno = e;
    return -1;
  }
  if (in.active == RESERVE_INTENT_RELEASE)
    reserve_audit(who,
                  "action=reconcile for_uid=%lu size=%ukB node=%s before=%llu delta=%llu finished=%llu after=%llu "
                  "charged=%llu outcome=%s of=release",
                  (unsigned long)in.uid, in.size_kb, node, in.before, in.delta, finished, r.now, r.charged,
                  reconcile_outcome(&in, &r));
  else
    reserve_audit(who,
                  "action=reconcile for_uid=%lu size=%ukB node=%s before=%llu delta=%llu after=%llu charged=%llu "
                  "outcome=%s",
                  (unsigned long)in.uid, in.size_kb, node, in.before, in.delta, r.now, r.charged,
                  reconcile_outcome(&in, &r));
  return 0;
}
