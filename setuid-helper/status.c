/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE /* dprintf */
/* hugepool-reserve --status [--json]: the pool per page size and node, the
 * caller's grants and job.  Rules kept:
 *  1. Written after the lock is dropped: a caller that stops reading its
 *     output must not hold up everybody else.
 *  2. A caller authorize.c refused gets the pool figures alone (what sysfs
 *     shows everyone) and why: no grant table, no cgroup.
 *  3. --json prints one object with the same figures; every string in it is
 *     escaped (a cgroup path is the kernel's, not ours to trust). */
#include <stdio.h>

#include "helper.h"

static const unsigned page_sizes[] = {RESERVE_PAGE_2M, RESERVE_PAGE_1G};
#define N_SIZES (sizeof page_sizes / sizeof page_sizes[0])

/* A JSON string: quotes, backslashes and control bytes escaped. */
static void json_str(int fd, const char *s) {
  dprintf(fd, "\"");
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      dprintf(fd, "\\%c", c);
    else if (c < 0x20 || c == 0x7f)
      dprintf(fd, "\\u%04x", c);
    else
      dprintf(fd, "%c", c);
  }
  dprintf(fd, "\"");
}

static void pool_row(int fd, int json, unsigned size_kb, int node, const struct pool_state *st, int *first) {
  if (json) {
    dprintf(fd, "%s{\"page_kb\": %u, \"node\": %d, \"total\": %llu, \"free\": %llu, \"surplus\": %llu", *first ? "" : ", ",
            size_kb, node, st->nr, st->free, st->surplus);
    if (node < 0) dprintf(fd, ", \"reserved\": %llu", st->resv);
    dprintf(fd, "}");
  } else if (node < 0) {
    dprintf(fd, "%u kB pages, all nodes: total %llu free %llu reserved %llu surplus %llu\n", size_kb, st->nr, st->free,
            st->resv, st->surplus);
  } else {
    dprintf(fd, "  node %d: total %llu free %llu surplus %llu\n", node, st->nr, st->free, st->surplus);
  }
  *first = 0;
}

static void status_pools(int fd, int json) {
  struct pool_state st;
  int nodes[RESERVE_MAX_NODE + 1], first = 1;
  size_t n = sysfs_node_list(nodes, sizeof nodes / sizeof nodes[0]);
  if (json) dprintf(fd, "{\"pools\": [");
  for (size_t k = 0; k < N_SIZES; k++) {
    if (sysfs_pool_read(-1, page_sizes[k], &st) != 0) continue;
    pool_row(fd, json, page_sizes[k], -1, &st, &first);
    for (size_t i = 0; i < n; i++)
      if (sysfs_pool_read(nodes[i], page_sizes[k], &st) == 0) pool_row(fd, json, page_sizes[k], nodes[i], &st, &first);
  }
  if (json) dprintf(fd, "]");
}

/* The job's hugetlb cgroup figures of one page size. */
static void job_size(int fd, int json, const struct cg_job *jc, unsigned size_kb, int *first) {
  unsigned long long lim, rsvd, used, page = (unsigned long long)size_kb * 1024;
  if (cg_job_limit_read(jc->fd, &jc->h, size_kb, 0, "max", &lim) != 0 ||
      cg_job_limit_read(jc->fd, &jc->h, size_kb, 0, "current", &rsvd) != 0 ||
      cg_job_limit_read(jc->fd, &jc->h, size_kb, 1, "current", &used) != 0)
    return;
  if (json) {
    dprintf(fd, "%s{\"page_kb\": %u, \"limit\": ", *first ? "" : ", ", size_kb);
    if (lim == ~0ULL)
      dprintf(fd, "null");
    else
      dprintf(fd, "%llu", lim / page);
    dprintf(fd, ", \"reserved\": %llu, \"in_use\": %llu}", rsvd / page, used / page);
  } else if (lim == ~0ULL) {
    dprintf(fd, "  %u kB pages: limit none, reserved %llu, in use %llu\n", size_kb, rsvd / page, used / page);
  } else {
    dprintf(fd, "  %u kB pages: limit %llu, reserved %llu, in use %llu\n", size_kb, lim / page, rsvd / page,
            used / page);
  }
  *first = 0;
}

/* The caller's job: its hugetlb cgroup's reservation limit and use. */
static void status_job(const struct reserve_caller *who, int fd, int json) {
  struct cg_job jc;
  char why[512];
  int first = 1;
  jc.fd = -1;
  int r = cg_caller_job(who->uid, &jc, why, sizeof why);
  if (r <= 0) {
    const char *text = r == 0 ? "this process is in no job's hugetlb cgroup" : why;
    if (!json) {
      dprintf(fd, "job isolation: %s\n", text);
      return;
    }
    dprintf(fd, ", \"job\": null, \"job_note\": ");
    json_str(fd, text);
    return;
  }
  if (json) {
    dprintf(fd, ", \"job\": {\"id\": %lu, \"cgroup\": ", jc.job);
    json_str(fd, jc.path);
    dprintf(fd, ", \"cgroup_version\": %d, \"pages\": [", jc.h.v2 ? 2 : 1);
  } else {
    dprintf(fd, "your job %lu: hugetlb cgroup %s (cgroup %s)\n", jc.job, jc.path, jc.h.v2 ? "v2" : "v1");
  }
  for (size_t i = 0; i < N_SIZES; i++) job_size(fd, json, &jc, page_sizes[i], &first);
  if (json) dprintf(fd, "]}");
  cg_job_close(&jc);
}

static void grant_row(int fd, int json, const struct reserve_grant_entry *g, int *first) {
  char node[16];
  if (json) {
    dprintf(fd, "%s{\"pages\": %llu, \"page_kb\": %u, \"node\": %d}", *first ? "" : ", ", g->pages, g->size_kb,
            g->node);
  } else {
    reserve_node_name(node, sizeof node, g->node);
    dprintf(fd, "  %llu pages of %u kB on node %s\n", g->pages, g->size_kb, node);
  }
  *first = 0;
}

int reserve_status(const struct reserve_caller *who, int fd, int json) {
  struct state s;
  char err[256];
  int first = 1;
  status_pools(fd, json);
  if (state_open(who, &s, 0, err, sizeof err) != 0) {
    if (json) {
      dprintf(fd, ", \"grants\": null, \"grants_error\": ");
      json_str(fd, err);
      dprintf(fd, "}\n");
    } else {
      dprintf(fd, "grants: %s\n", err);
    }
    return RESERVE_FAIL;
  }
  state_close(&s); /* s.gs is our copy */
  if (json)
    dprintf(fd, ", \"uid\": %lu, \"grants\": [", (unsigned long)who->uid);
  else
    dprintf(fd, "your grants (uid %lu):\n", (unsigned long)who->uid);
  for (size_t i = 0; i < s.gs.n; i++)
    if (s.gs.g[i].uid == who->uid && s.gs.g[i].pages != 0) grant_row(fd, json, &s.gs.g[i], &first);
  if (json)
    dprintf(fd, "]");
  else if (first)
    dprintf(fd, "  none\n");
  status_job(who, fd, json);
  if (json) dprintf(fd, "}\n");
  return RESERVE_OK;
}

int reserve_status_pool(int fd, const char *why, int json) {
  status_pools(fd, json);
  if (!json) {
    dprintf(fd, "your grants: not shown: %s\n", why);
    return RESERVE_OK;
  }
  dprintf(fd, ", \"grants\": null, \"grants_hidden\": ");
  json_str(fd, why);
  dprintf(fd, "}\n");
  return RESERVE_OK;
}
