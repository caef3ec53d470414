/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool doctor: what the kernel says about this node and this process.
 * Pools per page size and NUMA node, pages that could still be reserved,
 * hugetlbfs mounts, THP, hugetlb cgroup limits, RLIMIT_MEMLOCK and the
 * MPI transport variables that decide whether hugetlb pages help. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h> /* environ */

#include "doctor.h"
#include "doctor-util.h"
/* The library's option table and parsers (lib/option-table.c, linked in). */
#include "../lib/options.h"

#define MB (1ULL << 20)
#define UNLIMITED_BYTES (1ULL << 62) /* cgroup v1 prints ~2^63 for "no limit" */

static const char *size_label(unsigned long long kb, char *buf, size_t len) {
  if (kb >= (1ULL << 20) && kb % (1ULL << 20) == 0)
    (void)snprintf(buf, len, "%llu GB", kb >> 20);
  else if (kb >= 1024 && kb % 1024 == 0)
    (void)snprintf(buf, len, "%llu MB", kb >> 10);
  else
    (void)snprintf(buf, len, "%llu kB", kb);
  return buf;
}

/* "hugepages-2048kB" -> 2048 */
static int parse_pool_dir(const char *name, unsigned long long *kb) {
  unsigned long long v;
  char tail[8];
  if (sscanf(name, "hugepages-%llu%7s", &v, tail) != 2 || strcmp(tail, "kB") != 0) return -1;
  *kb = v;
  return 0;
}

static int parse_node_dir(const char *name, int *node) {
  if (strncmp(name, "node", 4) != 0 || !isdigit((unsigned char)name[4])) return -1;
  char *end = NULL;
  long v = strtol(name + 4, &end, 10);
  if (*end != '\0' || v < 0 || v > 4095) return -1;
  *node = (int)v;
  return 0;
}

static int cmp_ull(const void *a, const void *b) {
  unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
  return (x > y) - (x < y);
}
static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

static size_t list_sizes(unsigned long long *kb, size_t max) {
  size_t n = 0;
  DIR *d = dr_opendir("/sys/kernel/mm/hugepages");
  if (!d) return 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL && n < max)
    if (parse_pool_dir(e->d_name, &kb[n]) == 0) n++;
  closedir(d);
  qsort(kb, n, sizeof kb[0], cmp_ull);
  return n;
}

static size_t list_nodes(int *nodes, size_t max) {
  size_t n = 0;
  DIR *d = dr_opendir("/sys/devices/system/node");
  if (!d) return 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL && n < max)
    if (parse_node_dir(e->d_name, &nodes[n]) == 0) n++;
  closedir(d);
  qsort(nodes, n, sizeof nodes[0], cmp_int);
  return n;
}

/* The value of "key" (e.g. "MemFree:") in a meminfo-style text, in kB. */
static int meminfo_kb(const char *text, const char *key, unsigned long long *kb) {
  const char *p = text;
  size_t klen = strlen(key);
  while ((p = strstr(p, key)) != NULL) {
    if (p == text || p[-1] == ' ' || p[-1] == '\n') {
      if (sscanf(p + klen, "%llu", kb) == 1) return 0;
    }
    p += klen;
  }
  return -1;
}

/* Free blocks of at least `order` pages in buddyinfo for `node`, counted in
 * blocks of that order.  The DMA zone is skipped (hugetlb never uses it). */
static int buddy_blocks(const char *buddy, int node, int order, unsigned long long *blocks) {
  int found = 0;
  unsigned long long total = 0;
  const char *line = buddy;
  while (line && *line) {
    const char *nl = strchr(line, '\n');
    char buf[512];
    size_t len = nl ? (size_t)(nl - line) : strlen(line);
    if (len >= sizeof buf) len = sizeof buf - 1;
    memcpy(buf, line, len);
    buf[len] = '\0';
    line = nl ? nl + 1 : NULL;
    int n = -1, off = 0;
    char zone[32];
    if (sscanf(buf, "Node %d, zone %31s%n", &n, zone, &off) != 2 || n != node) continue;
    found = 1;
    if (strcmp(zone, "DMA") == 0) continue;
    char *p = buf + off;
    for (int o = 0;; o++) {
      char *end = NULL;
      unsigned long long c = strtoull(p, &end, 10);
      if (end == p) break;
      if (o >= order && o - order < 60) total += c << (o - order);
      p = end;
    }
  }
  if (!found) return -1;
  *blocks = total;
  return 0;
}

/* One size's rows per NUMA node (nodes without its files are left out). */
static void pool_node_rows(unsigned long long kb, const char *label, const int *nodes, size_t nnodes) {
  char path[PATH_MAX];
  for (size_t j = 0; j < nnodes; j++) {
    unsigned long long nnr = 0, nfr = 0, nsp = 0;
    const char *nf[] = {"nr_hugepages", "free_hugepages", "surplus_hugepages"};
    unsigned long long *nv[] = {&nnr, &nfr, &nsp};
    int ok = 0;
    for (int k = 0; k < 3; k++) {
      (void)snprintf(path, sizeof path, "/sys/devices/system/node/node%d/hugepages/hugepages-%llukB/%s", nodes[j], kb,
                     nf[k]);
      ok += dr_read_ull(path, nv[k]) == 0;
    }
    if (!ok) continue;
    dr_row("%-6s node %d:    total %llu, free %llu, surplus %llu", label, nodes[j], nnr, nfr, nsp);
    dr_kv_num("page_kb", (long long)kb);
    dr_kv_num("node", nodes[j]);
    dr_kv_num("total", (long long)nnr);
    dr_kv_num("free", (long long)nfr);
    dr_kv_num("surplus", (long long)nsp);
  }
}

/* What the pools hold, machine-wide and per node. */
struct pool_sum {
  int have_2m, have_1g;
  unsigned long long nr_2m, usable_2m, over_2m, surplus_2m;
};

static void pool_rows(const int *nodes, size_t nnodes, struct pool_sum *sum) {
  unsigned long long sizes[8];
  size_t nsizes = list_sizes(sizes, 8);
  char label[32], path[PATH_MAX];
  int have_2m = 0, have_1g = 0;
  unsigned long long nr_2m = 0, usable_2m = 0, over_2m = 0, surplus_2m = 0;

  dr_section("pools", "hugetlb pools (total / free / reserved / surplus, overcommit)");
  for (size_t i = 0; i < nsizes; i++) {
    unsigned long long kb = sizes[i], nr = 0, fr = 0, rs = 0, sp = 0, oc = 0;
    const char *f[] = {"nr_hugepages", "free_hugepages", "resv_hugepages", "surplus_hugepages",
                       "nr_overcommit_hugepages"};
    unsigned long long *v[] = {&nr, &fr, &rs, &sp, &oc};
    for (int k = 0; k < 5; k++) {
      (void)snprintf(path, sizeof path, "/sys/kernel/mm/hugepages/hugepages-%llukB/%s", kb, f[k]);
      (void)dr_read_ull(path, v[k]);
    }
    size_label(kb, label, sizeof label);
    dr_row("%-6s all nodes: total %llu, free %llu, reserved %llu, surplus %llu, overcommit %llu", label, nr, fr, rs, sp,
           oc);
    dr_kv_num("page_kb", (long long)kb);
    dr_kv_str("node", "all");
    dr_kv_num("total", (long long)nr);
    dr_kv_num("free", (long long)fr);
    dr_kv_num("reserved", (long long)rs);
    dr_kv_num("surplus", (long long)sp);
    dr_kv_num("overcommit", (long long)oc);
    if (kb == 2048) {
      have_2m = 1;
      nr_2m = nr;
      usable_2m = fr > rs ? fr - rs : 0;
      over_2m = oc;
      surplus_2m = sp;
    }
    if (kb == 1048576) have_1g = 1;
    pool_node_rows(kb, label, nodes, nnodes);
  }
  *sum = (struct pool_sum){have_2m, have_1g, nr_2m, usable_2m, over_2m, surplus_2m};
}

/* The "reservable" section; *now_total: free order-9 blocks, *max_total:
 * what compaction could make, summed over the nodes. */
static void reservable_rows(const int *nodes, size_t nnodes, unsigned long long *now_total_out,
                            unsigned long long *max_total_out) {
  char path[PATH_MAX], meminfo[4096];
  /* What could still be added to the pools now.  2 MB pages need free blocks
   * of order 9 (buddyinfo); compaction can make more, never beyond MemFree.
   * 1 GB pages need contiguous 1 GB ranges the buddy lists do not show:
   * MemFree only bounds them. */
  char buddy[16384];
  long blen = dr_read("/proc/buddyinfo", buddy, sizeof buddy);
  unsigned long long now_total = 0, max_total = 0;
  dr_section("reservable", "pages that could still be added to the pools now (per NUMA node)");
  size_t rows = nnodes ? nnodes : 1;
  for (size_t j = 0; j < rows; j++) {
    int node = nnodes ? nodes[j] : 0;
    unsigned long long memfree_kb = 0, blocks = 0;
    int have_free;
    if (nnodes) {
      (void)snprintf(path, sizeof path, "/sys/devices/system/node/node%d/meminfo", node);
      have_free = dr_read(path, meminfo, sizeof meminfo) > 0 && meminfo_kb(meminfo, "MemFree:", &memfree_kb) == 0;
    } else {
      have_free =
          dr_read("/proc/meminfo", meminfo, sizeof meminfo) > 0 && meminfo_kb(meminfo, "MemFree:", &memfree_kb) == 0;
    }
    int have_buddy = blen > 0 && buddy_blocks(buddy, node, 9, &blocks) == 0;
    unsigned long long max2 = memfree_kb / 2048, max1 = memfree_kb / 1048576;
    if (have_buddy && blocks > max2) max2 = blocks;
    dr_row(
        "node %d: 2 MB: %s%llu free now (order-9 blocks), at most %llu after compaction; 1 GB: at most %llu (MemFree "
        "%llu MiB)",
        node, have_buddy ? "" : "? ", have_buddy ? blocks : 0, max2, max1, memfree_kb >> 10);
    dr_kv_num("node", node);
    dr_kv_num("pages_2m_now", have_buddy ? (long long)blocks : -1);
    dr_kv_num("pages_2m_max", (long long)max2);
    dr_kv_num("pages_1g_max", (long long)max1);
    dr_kv_num("memfree_kb", have_free ? (long long)memfree_kb : -1);
    now_total += have_buddy ? blocks : 0;
    max_total += max2;
  }
  *now_total_out = now_total;
  *max_total_out = max_total;
}

/* The problems: no 2 MB pool, no 1 GB pool, a pool short of the need. */
static void judge_pools(const struct dr_need *need, const struct pool_sum *sum, unsigned long long now_total,
                        unsigned long long max_total) {
  int have_2m = sum->have_2m, have_1g = sum->have_1g;
  unsigned long long nr_2m = sum->nr_2m, usable_2m = sum->usable_2m, over_2m = sum->over_2m,
                     surplus_2m = sum->surplus_2m;
  unsigned long long want = need->pages_2m ? need->pages_2m : 1;
  if (!have_2m) {
    dr_problem(DR_ERROR, "",
               "this kernel has no 2 MB hugetlb pool (/sys/kernel/mm/hugepages/hugepages-2048kB): "
               "it was built without CONFIG_HUGETLBFS, hugepool cannot work here");
    return;
  }
  if (!have_1g)
    dr_problem(DR_INFO, "", "no 1 GB pool on this node (CPU or kernel without gigantic pages): --page-size 1G fails");
  else if (dr_real_root()) {
    /* nothing more to say: 1 GB pools are sized at boot or by the helper */
  }
  if (usable_2m < want) {
    unsigned long long add = want - usable_2m;
    unsigned long long can_over = over_2m > surplus_2m ? over_2m - surplus_2m : 0;
    char fix[400];
    (void)snprintf(fix, sizeof fix,
                   "sysctl -w vm.nr_hugepages=%llu   (as root; or, where it is installed: "
                   "hugepool-reserve %llu)",
                   nr_2m + add, want);
    if (can_over >= add) {
      dr_problem(DR_WARNING, fix,
                 "the 2 MB pool has %llu free unreserved page%s and the job needs %llu; the kernel may add %llu "
                 "surplus pages at mmap time (overcommit), if memory allows at that moment",
                 usable_2m, usable_2m == 1 ? "" : "s", want, can_over);
    } else {
      dr_problem(DR_ERROR, fix,
                 "the 2 MB pool has %llu free unreserved page%s and the job needs %llu: hugepool_alloc fails with "
                 "ENOMEM (the preload falls back to glibc's 4 KB pages)",
                 usable_2m, usable_2m == 1 ? "" : "s", want);
    }
    if (max_total < add)
      dr_problem(DR_WARNING,
                 "sync; echo 3 > /proc/sys/vm/drop_caches; echo 1 > /proc/sys/vm/compact_memory   (as root)",
                 "this node has room for at most %llu more 2 MB pages now (%llu free order-9 blocks); growing "
                 "the pool by %llu will come up short",
                 max_total, now_total, add);
  }
}

void dr_check_pools(const struct dr_need *need, unsigned long long *free_2m, unsigned long long *reservable_2m) {
  int nodes[256];
  size_t nnodes = list_nodes(nodes, 256);
  struct pool_sum sum;
  unsigned long long now_total = 0, max_total = 0;
  pool_rows(nodes, nnodes, &sum);
  reservable_rows(nodes, nnodes, &now_total, &max_total);
  *free_2m = sum.usable_2m;
  *reservable_2m = now_total;
  judge_pools(need, &sum, now_total, max_total);
}

void dr_check_mounts_thp(void) {
  char mounts[65536];
  dr_section("mounts", "hugetlbfs mounts");
  if (dr_read("/proc/mounts", mounts, sizeof mounts) > 0) {
    char *save = NULL;
    for (char *line = strtok_r(mounts, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
      char dev[256], dir[1024], type[64], opts[512];
      if (sscanf(line, "%255s %1023s %63s %511s", dev, dir, type, opts) != 4 || strcmp(type, "hugetlbfs") != 0)
        continue;
      dr_row("%s (%s)", dir, opts);
      dr_kv_str("mount", dir);
      dr_kv_str("options", opts);
    }
  }
  if (dr_section_rows() == 0) {
    dr_problem(DR_INFO, "",
               "no hugetlbfs is mounted: hugepool does not need one (it maps MAP_HUGETLB); programs that create "
               "files on hugetlbfs (libhugetlbfs, some MPI shared-memory transports) do "
               "(hugeadm --create-global-mounts makes them)");
  }

  dr_section("thp", "transparent huge pages");
  const char *files[] = {"enabled", "defrag"};
  for (int i = 0; i < 2; i++) {
    char path[128], text[256], mode[64] = "?";
    (void)snprintf(path, sizeof path, "/sys/kernel/mm/transparent_hugepage/%s", files[i]);
    if (dr_read(path, text, sizeof text) > 0) {
      char *l = strchr(text, '['), *r = l ? strchr(l, ']') : NULL;
      if (l && r && r - l - 1 < (long)sizeof mode) {
        memcpy(mode, l + 1, (size_t)(r - l - 1));
        mode[r - l - 1] = '\0';
      }
    }
    dr_row("%-8s %s", files[i], mode);
    dr_kv_str("setting", files[i]);
    dr_kv_str("mode", mode);
    if (i == 0 && strcmp(mode, "never") == 0)
      dr_problem(DR_INFO, "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled   (as root)",
                 "THP is off: HUGEPOOL_POLICY=thp falls back to 4 KB pages, not huge ones");
  }
}

/* ---- cgroups ---- */

struct climit {
  unsigned long long limit, usage; /* bytes; limit UNLIMITED_BYTES when none */
  char where[PATH_MAX];            /* the cgroup file that sets it (real path) */
};

/* Mount point of the v2 hierarchy, or of the v1 one carrying "hugetlb". */
static int cgroup_mount(int v2, char *out, size_t len) {
  char mounts[65536];
  if (dr_read("/proc/mounts", mounts, sizeof mounts) <= 0) return -1;
  char *save = NULL;
  for (char *line = strtok_r(mounts, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    char dev[256], dir[1024], type[64], opts[512];
    if (sscanf(line, "%255s %1023s %63s %511s", dev, dir, type, opts) != 4) continue;
    if (v2 ? strcmp(type, "cgroup2") == 0 : (strcmp(type, "cgroup") == 0 && strstr(opts, "hugetlb"))) {
      (void)snprintf(out, len, "%s", dir);
      return 0;
    }
  }
  return -1;
}

/* Reads a limit file: "max" or a byte count.  Returns 0 when present. */
static int read_limit(const char *rel, unsigned long long *bytes) {
  char buf[64];
  if (dr_read(rel, buf, sizeof buf) <= 0) return -1;
  if (strncmp(buf, "max", 3) == 0) {
    *bytes = UNLIMITED_BYTES;
    return 0;
  }
  char *end = NULL;
  unsigned long long v = strtoull(buf, &end, 10);
  if (end == buf) return -1;
  *bytes = v >= UNLIMITED_BYTES ? UNLIMITED_BYTES : v;
  return 0;
}

/* Walks from the process's cgroup up to the hierarchy's root and keeps the
 * tightest room (limit - usage) of `limit_file`. */
static int tightest(const char *mnt, const char *cg, const char *limit_file, const char *usage_file,
                    struct climit *out) {
  char dir[PATH_MAX], path[PATH_MAX];
  int found = 0;
  (void)snprintf(dir, sizeof dir, "%s", cg);
  out->limit = UNLIMITED_BYTES;
  out->usage = 0;
  out->where[0] = '\0';
  for (;;) {
    unsigned long long lim, use = 0;
    (void)snprintf(path, sizeof path, "%s%s/%s", mnt, strcmp(dir, "/") == 0 ? "" : dir, limit_file);
    if (read_limit(path, &lim) == 0) {
      found = 1;
      char upath[PATH_MAX];
      (void)snprintf(upath, sizeof upath, "%s%s/%s", mnt, strcmp(dir, "/") == 0 ? "" : dir, usage_file);
      (void)dr_read_ull(upath, &use);
      unsigned long long room = lim > use ? lim - use : 0;
      unsigned long long best = out->limit > out->usage ? out->limit - out->usage : 0;
      if (lim != UNLIMITED_BYTES && (out->limit == UNLIMITED_BYTES || room < best)) {
        out->limit = lim;
        out->usage = use;
        (void)snprintf(out->where, sizeof out->where, "%s", path);
      }
    }
    if (strcmp(dir, "/") == 0 || dir[0] == '\0') break;
    char *slash = strrchr(dir, '/');
    if (!slash) break;
    if (slash == dir)
      slash[1] = '\0';
    else
      *slash = '\0';
  }
  return found ? 0 : -1;
}

static void fmt_bytes(unsigned long long b, char *buf, size_t len) {
  if (b >= UNLIMITED_BYTES)
    (void)snprintf(buf, len, "max");
  else
    (void)snprintf(buf, len, "%llu MiB", b / MB);
}

/* One line of /proc/self/cgroup ("ID:CONTROLLERS:PATH") a hugetlb controller
 * governs: the v2 line, or a v1 line naming hugetlb, whose hierarchy is
 * mounted.  Returns 0 with *v2, *cg (inside line) and the mount point. */
static int hugetlb_hierarchy(char *line, int *v2, const char **cg, char *mnt, size_t len) {
  char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
  if (!c2) return -1;
  *c1 = *c2 = '\0';
  const char *ctrl = c1 + 1;
  *v2 = strcmp(line, "0") == 0 && ctrl[0] == '\0';
  if (!*v2 && !strstr(ctrl, "hugetlb")) return -1;
  *cg = c2 + 1;
  return cgroup_mount(*v2, mnt, len);
}

/* The Slurm plugin's per-job cgroup (setuid-helper/cgroup.c): its
 * reservation limit is the job's grant, raised by hugepool-reserve.  Says so
 * and returns 1 when cg is one. */
static int hugepool_job_row(const char *cg, int v2) {
  unsigned long job = 0;
  char tail = 0;
  if (sscanf(cg, "/hugepool/job_%lu%c", &job, &tail) != 1) return 0;
  dr_row(
      "Slurm job %lu runs in its own hugetlb cgroup (hugepool job isolation, cgroup %s): its pages are its "
      "own, a mapping beyond its reservation limit fails with ENOMEM; hugepool-reserve PAGES raises it",
      job, v2 ? "v2" : "v1");
  dr_kv_num("job", (long long)job);
  dr_kv_str("isolation", "hugepool");
  return 1;
}

/* One page size's limits in one hierarchy. */
struct size_limits {
  struct climit fault, rsvd;
  int have_fault, have_rsvd; /* the files exist on the path to the root */
};

/* The tightest fault-time and reservation limits of one page size over cg
 * and its ancestors (v1 and v2 name the files differently).  Returns 0
 * when neither kind of file exists. */
static int read_size_limits(const char *mnt, const char *cg, int v2, const char *size, struct size_limits *out) {
  char lf[64], uf[64], rlf[64], ruf[64];
  (void)snprintf(lf, sizeof lf, "hugetlb.%s.%s", size, v2 ? "max" : "limit_in_bytes");
  (void)snprintf(uf, sizeof uf, "hugetlb.%s.%s", size, v2 ? "current" : "usage_in_bytes");
  (void)snprintf(rlf, sizeof rlf, "hugetlb.%s.rsvd.%s", size, v2 ? "max" : "limit_in_bytes");
  (void)snprintf(ruf, sizeof ruf, "hugetlb.%s.rsvd.%s", size, v2 ? "current" : "usage_in_bytes");
  out->have_fault = tightest(mnt, cg, lf, uf, &out->fault) == 0;
  out->have_rsvd = tightest(mnt, cg, rlf, ruf, &out->rsvd) == 0;
  return out->have_fault || out->have_rsvd;
}

/* The row of one page size's limits and use. */
static void size_limits_row(const char *cg, int v2, const char *size, const struct size_limits *l) {
  char a[32], b[32], c[32], d[32];
  fmt_bytes(l->fault.limit, a, sizeof a);
  fmt_bytes(l->fault.usage, b, sizeof b);
  fmt_bytes(l->rsvd.limit, c, sizeof c);
  fmt_bytes(l->rsvd.usage, d, sizeof d);
  dr_row("cgroup %s %s (%s): fault-time limit %s (used %s), reservation limit %s (used %s)", v2 ? "v2" : "v1", cg, size,
         a, b, l->have_rsvd ? c : "not supported", d);
  dr_kv_str("hierarchy", v2 ? "v2" : "v1");
  dr_kv_str("cgroup", cg);
  dr_kv_str("page", size);
  dr_kv_num("max_bytes", l->fault.limit >= UNLIMITED_BYTES ? -1 : (long long)l->fault.limit);
  dr_kv_num("current_bytes", (long long)l->fault.usage);
  dr_kv_num("rsvd_max_bytes", !l->have_rsvd || l->rsvd.limit >= UNLIMITED_BYTES ? -1 : (long long)l->rsvd.limit);
  dr_kv_num("rsvd_current_bytes", (long long)l->rsvd.usage);
}

/* The 2 MB reservation limit against the need: mmap fails with ENOMEM
 * beyond it.  In a hugepool job cgroup hugepool-reserve raises it. */
static void judge_rsvd_limit(const struct size_limits *l, int v2, int hp_job, unsigned long long want) {
  const struct climit *rsvd = &l->rsvd;
  if (!l->have_rsvd || rsvd->limit == UNLIMITED_BYTES) return;
  unsigned long long room = rsvd->limit - (rsvd->usage < rsvd->limit ? rsvd->usage : rsvd->limit);
  if (room >= want) return;
  char fix[PATH_MAX + 64];
  if (hp_job)
    (void)snprintf(fix, sizeof fix, "hugepool-reserve %llu   (inside the job: raises its limit with the pool)",
                   (rsvd->usage + want + 2 * MB - 1) / (2 * MB));
  else
    (void)snprintf(fix, sizeof fix, "echo %s > %s   (as root, or ask the batch system to raise it)", v2 ? "max" : "-1",
                   rsvd->where);
  dr_problem(DR_ERROR, fix,
             "hugetlb cgroup reservation limit: %s allows %llu more MiB of 2 MB pages, the job needs %llu MiB "
             "(mmap fails with ENOMEM)",
             rsvd->where, room / MB, want / MB);
}

/* The 2 MB fault-time limit: touching pages beyond it kills the process
 * with SIGBUS, so it must leave room for the need, and a reservation limit
 * no larger should turn that into ENOMEM at mmap. */
static void judge_fault_limit(const struct size_limits *l, int v2, unsigned long long want) {
  const struct climit *fault = &l->fault;
  if (!l->have_fault || fault->limit == UNLIMITED_BYTES) return;
  char fix[PATH_MAX + 64];
  (void)snprintf(fix, sizeof fix, "echo %s > %s   (as root; limit %s instead, which fails at mmap)", v2 ? "max" : "-1",
                 fault->where, v2 ? "hugetlb.2MB.rsvd.max" : "hugetlb.2MB.rsvd.limit_in_bytes");
  unsigned long long room = fault->limit > fault->usage ? fault->limit - fault->usage : 0;
  if (room < want)
    dr_problem(DR_ERROR, fix,
               "hugetlb cgroup fault-time limit: %s allows %llu more MiB of 2 MB pages, the job needs %llu "
               "MiB: touching the pages beyond it kills the process with SIGBUS",
               fault->where, room / MB, want / MB);
  else if (!l->have_rsvd || l->rsvd.limit > fault->limit)
    dr_problem(DR_WARNING, fix,
               "hugetlb cgroup fault-time limit %s (%llu MiB) is not matched by a reservation limit: a "
               "process that maps more than it allows is killed with SIGBUS at first touch instead of "
               "getting ENOMEM",
               fault->where, fault->limit / MB);
}

/* One hierarchy's limits for the process's cgroup: a row a page size, the
 * 2 MB ones judged against the need.  Returns 1 when any limit was found. */
static int check_hierarchy(int v2, const char *cg, const char *mnt, unsigned long long want) {
  int hp_job = hugepool_job_row(cg, v2);
  const char *sizes[] = {"2MB", "1GB"};
  int any = 0;
  for (int s = 0; s < 2; s++) {
    struct size_limits l;
    if (!read_size_limits(mnt, cg, v2, sizes[s], &l)) continue;
    any = 1;
    size_limits_row(cg, v2, sizes[s], &l);
    if (s != 0) continue; /* the job's need is counted in 2 MB pages */
    judge_rsvd_limit(&l, v2, hp_job, want);
    judge_fault_limit(&l, v2, want);
  }
  return any;
}

void dr_check_cgroups(const struct dr_need *need) {
  char self[4096];
  dr_section("cgroup", "hugetlb cgroup limits of this process (tightest over its cgroup and ancestors)");
  if (dr_read("/proc/self/cgroup", self, sizeof self) <= 0) {
    dr_row("(cannot read /proc/self/cgroup)");
    return;
  }
  unsigned long long want = (need->pages_2m ? need->pages_2m : 1) * 2 * MB;
  int any = 0;
  char *save = NULL;
  for (char *line = strtok_r(self, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    int v2 = 0;
    const char *cg = NULL;
    char mnt[1024];
    if (hugetlb_hierarchy(line, &v2, &cg, mnt, sizeof mnt) == 0 && check_hierarchy(v2, cg, mnt, want)) any = 1;
  }
  if (!any) dr_row("no hugetlb controller applies to this process: no limits");
}

/* ---- limits and environment ---- */

static int rdma_devices(void) {
  DIR *d = dr_opendir("/sys/class/infiniband");
  int n = 0;
  if (!d) return 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

static int has_cap_ipc_lock(void) {
  char status[8192];
  if (dr_read("/proc/self/status", status, sizeof status) <= 0) return 0;
  const char *p = strstr(status, "CapEff:");
  if (!p) return 0;
  unsigned long long caps = strtoull(p + 7, NULL, 16);
  return ((caps >> 14) & 1) != 0; /* CAP_IPC_LOCK */
}

static int yes(const char *v) {
  return v && (strcmp(v, "y") == 0 || strcmp(v, "yes") == 0 || strcmp(v, "1") == 0 || strcmp(v, "on") == 0 ||
               strcmp(v, "Y") == 0 || strcmp(v, "YES") == 0);
}

/* Every HUGEPOOL_* variable, judged by the library's own option table and
 * parsers: a name that is no option, or a value that will not parse, is
 * ignored by the library (with one warning at start) and the default used. */
static void check_hugepool_variables(void) {
  for (char **e = environ; e && *e; e++) {
    if (strncmp(*e, "HUGEPOOL_", 9) != 0) continue;
    size_t len = strcspn(*e, "=");
    const char *value = (*e)[len] ? *e + len + 1 : "";
    char fix[400];
    dr_row("%s", *e);
    dr_kv_str("value", value);
    hp_option_id id = option_find(*e, len);
    if (option_foreign(*e, len)) {
      dr_kv_str("name", "");
      continue;
    }
    if (id == HP_OPT_COUNT) {
      dr_kv_str("name", "");
      hp_option_id near = option_closest(*e, len);
      if (near != HP_OPT_COUNT) {
        (void)snprintf(fix, sizeof fix, "unset %.*s; export %s='%s'", (int)len, *e, option_desc(near)->name, value);
        dr_problem(DR_WARNING, fix, "%.*s is not a hugepool option (did you mean %s?): it is ignored", (int)len, *e,
                   option_desc(near)->name);
      } else {
        (void)snprintf(fix, sizeof fix, "unset %.*s   (the options: hugepool(3), hugepool-run --help)", (int)len, *e);
        dr_problem(DR_WARNING, fix, "%.*s is not a hugepool option: it is ignored", (int)len, *e);
      }
      continue;
    }
    const hp_option_desc *d = option_desc(id);
    dr_kv_str("name", d->name);
    char expected[96], def[48];
    long long v = 0;
    if (option_parse(id, value, true, &v, expected, sizeof expected) != 0) {
      option_format(id, d->default_value, def, sizeof def);
      (void)snprintf(fix, sizeof fix, "export %s=%s   (or unset %s)", d->name, def, d->name);
      dr_problem(DR_WARNING, fix, "%s='%s' is not valid (expected %s): the library ignores it and uses the default",
                 d->name, value, expected);
    } else if (option_parse(id, value, false, &v, expected, sizeof expected) != 0) {
      dr_problem(DR_INFO, "", "%s=%s applies under hugepool-run only; a program linked with the library accepts %s",
                 d->name, value, expected);
    }
  }
}

/* RLIMIT_MEMLOCK bounds what the NIC may register (pin); CAP_IPC_LOCK
 * lifts it.  Nothing but a NIC needs more, so without one it is a note. */
static void check_memlock(void) {
  char limits[8192];
  int cap = has_cap_ipc_lock(), nics = rdma_devices();
  if (dr_read("/proc/self/limits", limits, sizeof limits) <= 0) return;
  const char *p = strstr(limits, "Max locked memory");
  char soft[32] = "?", hard[32] = "?";
  if (p) (void)sscanf(p + strlen("Max locked memory"), "%31s %31s", soft, hard);
  dr_row("soft %s, hard %s (bytes)%s; %d RDMA device%s", soft, hard, cap ? "; CAP_IPC_LOCK: not enforced" : "", nics,
         nics == 1 ? "" : "s");
  dr_kv_str("soft", soft);
  dr_kv_str("hard", hard);
  dr_kv_num("cap_ipc_lock", cap);
  dr_kv_num("rdma_devices", nics);
  if (cap || strcmp(soft, "unlimited") == 0) return;
  const char *fix = strcmp(hard, "unlimited") == 0
                        ? "ulimit -l unlimited"
                        : "echo '* - memlock unlimited' > /etc/security/limits.d/memlock.conf   (as root; "
                          "for Slurm jobs also LimitMEMLOCK=infinity in slurmd's unit)";
  if (nics)
    dr_problem(DR_WARNING, fix,
               "RLIMIT_MEMLOCK is %s bytes: the NIC can register (pin) no more than that; MPI over "
               "InfiniBand/RoCE needs it unlimited",
               soft);
  else
    dr_problem(DR_INFO, "", "RLIMIT_MEMLOCK is %s bytes (no RDMA device here, so nothing needs more)", soft);
}

/* The MPI transport variables that are set, as they are. */
static void transport_variable_rows(void) {
  static const char *const vars[] = {"LD_PRELOAD",
                                     "UCX_MEM_MALLOC_HOOKS",
                                     "UCX_MEM_MALLOC_RELOC",
                                     "UCX_MEM_EVENTS",
                                     "UCX_TLS",
                                     "UCX_IB_REG_METHODS",
                                     "UCX_RCACHE_CHECK_PFN",
                                     "UCX_IB_RCACHE_MAX_REGIONS",
                                     "UCX_MEMTYPE_CACHE",
                                     "UCX_POSIX_USE_PROC_LINK",
                                     "FI_PROVIDER",
                                     "FI_MR_CACHE_MONITOR",
                                     "FI_MR_CACHE_MAX_SIZE",
                                     "FI_MR_CACHE_MAX_COUNT"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (!v) continue;
    dr_row("%s=%s", vars[i], v);
    dr_kv_str("name", vars[i]);
    dr_kv_str("value", v);
  }
}

/* UCX's malloc hooks, on or (under the preload) left unset: UCX then
 * replaces malloc and large buffers stop landing on hugetlb pages. */
static void check_ucx_malloc_hooks(void) {
  const char *pre = getenv("LD_PRELOAD");
  const char *hooks = getenv("UCX_MEM_MALLOC_HOOKS");
  int preloaded = pre && strstr(pre, "hugepool_preload");
  if (yes(hooks) || (preloaded && !hooks))
    dr_problem(DR_WARNING, "export UCX_MEM_MALLOC_HOOKS=n UCX_MEM_MALLOC_RELOC=n   (hugepool-run sets both)",
               "UCX_MEM_MALLOC_HOOKS is %s: under hugepool's preload UCX replaces malloc (a caching allocator does not "
               "unmap freed memory), and large buffers stop landing on hugetlb pages",
               hooks ? hooks : "unset");
}

/* UCX_TLS that leaves out or excludes CMA, where hugetlb pages gain most. */
static void check_ucx_tls(void) {
  const char *tls = getenv("UCX_TLS");
  if (tls && !strstr(tls, "cma") && !strstr(tls, "all") && tls[0] != '^')
    dr_problem(DR_INFO, "unset UCX_TLS   (or include cma)",
               "UCX_TLS=%s leaves out CMA, the single-copy path for large intra-node messages whose per-message "
               "pinning is where hugetlb pages gain most",
               tls);
  else if (tls && tls[0] == '^' && strstr(tls, "cma"))
    dr_problem(DR_INFO, "unset UCX_TLS", "UCX_TLS=%s excludes CMA, where hugetlb pages gain most", tls);
}

/* libfabric's registration cache without a monitor: it registers buffers
 * on every transfer, so hugepool's reused buffers gain nothing. */
static void check_fi_mr_cache_monitor(void) {
  const char *mon = getenv("FI_MR_CACHE_MONITOR");
  if (mon && strcmp(mon, "disabled") == 0)
    dr_problem(DR_INFO, "unset FI_MR_CACHE_MONITOR",
               "FI_MR_CACHE_MONITOR=disabled: libfabric registers buffers on every transfer; hugepool's reused "
               "buffers would stay registered with a monitor (memhooks sees hugepool's munmap)");
}

void dr_check_limits_env(void) {
  dr_section("limits", "RLIMIT_MEMLOCK (what NIC memory registration needs)");
  check_memlock();
  dr_section("environment", "MPI transport and hugepool variables in this environment");
  transport_variable_rows();
  check_hugepool_variables();
  check_ucx_malloc_hooks();
  check_ucx_tls();
  check_fi_mr_cache_monitor();
}
