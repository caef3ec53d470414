/* hugepool-reserve: giving pages back.  Rules kept:
 *
 *  1. The table is written before the pool shrinks: if it cannot be
 *     written, nothing changes (the other order could leave a user charged
 *     for pages already given back, and a second release would then take
 *     other users' pages).
 *  2. Never shrink into pages in use or reserved: a pool shrinks by at
 *     most free - resv.
 *  3. Never shrink into pages promised to others: free - resv - shrink must
 *     still cover every other user's grants less what their processes map,
 *     machine-wide and on each NUMA node the pages may come from.
 *  4. The caller's own mapped pages stay charged to them.
 *  5. Fail closed: if /proc or a pool cannot be read, everything is kept.
 *  6. A pool that shrank by less than planned keeps the rest charged.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* ---- what other users were promised ---- */

/* Pages of size_kb that other users' grants may still need in one pool:
 * node -2 means every pool of that size (the machine-wide count), else one
 * NUMA node's pool (-1: grants on any node).  A user's unmapped memory is
 * their grants less what their processes map; the kernel reports one
 * HugetlbPages total for every size and node, so each pool is assumed to
 * hold all of it, up to the user's grants there (the safe direction). */
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
  if (pool_read(node, size_kb, &st) != 0) return 0;
  need = promised(gs, u, caller, node, size_kb);
  return pool_spare(&st) > need ? pool_spare(&st) - need : 0;
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
  if (pool_read(-1, size_kb, &st) != 0) return 0;
  need = promised(gs, u, caller, -2, size_kb);
  ok = pool_spare(&st) > need ? pool_spare(&st) - need : 0;
  if (node >= 0) {
    room = node_room(gs, u, caller, node, size_kb);
  } else if (node_promises(gs, caller, size_kb)) {
    n = node_list(nodes, sizeof nodes / sizeof nodes[0]);
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
  if (pool_read(node, size_kb, &st) != 0) return 0;
  *before = *after = st.nr;
  if (shrink_allowed(gs, u, caller, node, size_kb) < want || st.nr < want) return 0;
  if (node >= 0 || !node_promises(gs, caller, size_kb)) {
    (void)pool_write_nr(node, size_kb, st.nr - want);
  } else { /* node by node, each within its own promises */
    n = node_list(nodes, sizeof nodes / sizeof nodes[0]);
    for (i = 0, left = want; i < n && left > 0; i++) {
      unsigned long long room = node_room(gs, u, caller, nodes[i], size_kb), nnr;
      if (room > left) room = left;
      if (room == 0 || pool_file_read(nodes[i], size_kb, "nr_hugepages", &nnr) != 0 || nnr < room) continue;
      if (pool_write_nr(nodes[i], size_kb, nnr - room) == 0) left -= room;
    }
  }
  if (pool_file_read(node, size_kb, "nr_hugepages", after) != 0) *after = st.nr;
  return st.nr > *after ? (st.nr - *after < want ? st.nr - *after : want) : 0;
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

/* The table is written before the pool shrinks: if the table cannot be
 * written, nothing changes.  The other order could leave the user charged for
 * pages already given back, and a second release would then take other
 * users' pages.
 *
 * The pool only knows how many pages are free, not whose.  Two rules keep a
 * release from taking pages promised to someone else:
 *  - each of the caller's pools keeps (still charged) as many pages as the
 *    caller's processes map in hugetlb memory, up to the grant (one total
 *    for every page size and node: each pool keeps enough to cover all of
 *    it, the safe direction);
 *  - a pool shrinks only while its free unreserved pages, less the shrink,
 *    still cover every other user's grants less what their processes map
 *    (shrink_allowed), machine-wide and per NUMA node.  That also covers
 *    pages the caller holds without a mapping (a hugetlb memfd).
 * Both are computed fail closed: if /proc cannot be read, everything is kept. */
int reserve_release(const struct reserve_caller *who, char *msg, size_t msglen) {
  struct state s;
  struct usage u;
  unsigned long long plan[RESERVE_MAX_GRANTS] = {0};
  char node[16], why[96];
  size_t i, used = 0;
  int rc = RESERVE_OK, any = 0, planned = 0, short_release = 0, procs_ok;
  msg[0] = '\0';
  if ((rc = state_open(who, &s, 1, msg, msglen)) != 0) {
    reserve_audit(who, "action=release outcome=error reason=\"%s\"", msg);
    return rc == -2 ? RESERVE_BUSY : RESERVE_FAIL;
  }
  procs_ok = procs_hugetlb(&s.gs, who->uid, &u) == 0;
  if (!procs_ok)
    snprintf(why, sizeof why, "cannot read /proc (%s) to see what your processes map", strerror(errno));
  else
    snprintf(why, sizeof why, "your processes still map %llu kB of hugetlb memory", u.caller_kb);
  for (i = 0; i < s.gs.n; i++) { /* decide, change nothing */
    struct reserve_grant_entry *g = &s.gs.g[i];
    unsigned long long keep, spare;
    plan[i] = 0;
    if (g->uid != who->uid || g->pages == 0) continue;
    any = 1;
    reserve_node_name(node, sizeof node, g->node);
    keep = !procs_ok ? g->pages : (u.caller_kb + g->size_kb - 1) / g->size_kb;
    if (keep > g->pages) keep = g->pages;
    if (keep > 0) {
      reserve_audit(who, "action=release size=%ukB node=%s request=%llu kept=%llu outcome=kept reason=\"%s\"",
                    g->size_kb, node, g->pages, keep, why);
      append(msg, msglen, &used, "kept %llu of %llu pages of %u kB on node %s: %s (release again when %s)\n", keep,
             g->pages, g->size_kb, node, why, procs_ok ? "they have ended" : "it can be read");
      rc = RESERVE_FAIL;
      if (keep == g->pages) continue;
    }
    if ((spare = shrink_allowed(&s.gs, &u, who->uid, g->node, g->size_kb)) < g->pages - keep) {
      reserve_audit(who,
                    "action=release size=%ukB node=%s request=%llu released=0 outcome=refused reason=\"only %llu free "
                    "pages not reserved or promised to other users\"",
                    g->size_kb, node, g->pages - keep, spare);
      append(msg, msglen, &used,
             "kept %llu pages of %u kB on node %s: pages are in use or reserved, or promised to other users' "
             "grants (only %llu spare)\n",
             g->pages - keep, g->size_kb, node, spare);
      rc = RESERVE_FAIL;
    } else {
      plan[i] = g->pages - keep;
      g->pages = keep;
      planned = 1;
    }
  }
  if (!any) {
    snprintf(msg, msglen, "you hold no pages\n");
    reserve_audit(who, "action=release released=0 outcome=unchanged");
  }
  if (planned && state_write(&s) != 0) {
    append(msg, msglen, &used, "nothing released: cannot record the release: %s\n", strerror(errno));
    reserve_audit(who, "action=release released=0 outcome=error reason=\"cannot write the grant table\"");
    state_close(&s);
    return RESERVE_FAIL;
  }
  for (i = 0; i < s.gs.n; i++) { /* now shrink */
    struct reserve_grant_entry *g = &s.gs.g[i];
    unsigned long long before, after, released;
    if (plan[i] == 0) continue;
    reserve_node_name(node, sizeof node, g->node);
    /* Decided again inside: a node's pool and the global one are the same
     * pages, so an earlier shrink in this loop changed both. */
    released = shrink_pool(&s.gs, &u, who->uid, g->node, g->size_kb, plan[i], &before, &after);
    reserve_audit(who, "action=release size=%ukB node=%s request=%llu before=%llu after=%llu released=%llu outcome=%s",
                  g->size_kb, node, plan[i], before, after, released, released == plan[i] ? "ok" : "partial");
    append(msg, msglen, &used, "released %llu pages of %u kB on node %s (pool %llu -> %llu)\n", released, g->size_kb,
           node, before, after);
    if (released != plan[i]) {
      g->pages += plan[i] - released; /* still the user's */
      short_release = 1;
      rc = RESERVE_FAIL;
    }
  }
  if (short_release && state_write(&s) != 0)
    append(msg, msglen, &used, "cannot record the pages still held: %s\n", strerror(errno));
  state_close(&s);
  return rc;
}
