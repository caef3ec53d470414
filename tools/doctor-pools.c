/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool doctor: what the kernel says about this node's pools.  Pools per
 * page size and NUMA node, pages that could still be reserved (free memory
 * in blocks of the page's order), hugetlbfs mounts and THP. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"
#include "doctor-util.h"

#define MB (1ULL << 20)

static const char *size_label(unsigned long long kb, char *buf, size_t len) {
  if (kb >= (1ULL << 20) && kb % (1ULL << 20) == 0)
    (void)snprintf(buf, len, "%llu GB", kb >> 20);
  else if (kb >= 1024 && kb % 1024 == 0)
    (void)snprintf(buf, len, "%llu MB", kb >> 10);
  else
    (void)snprintf(buf, len, "%llu kB", kb);
  return buf;
}

int dr_parse_pool_dir(const char *name, unsigned long long *kb) {
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
    if (dr_parse_pool_dir(e->d_name, &kb[n]) == 0) n++;
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
  unsigned long long now_total = 0, max_total = 0, nodes_kb = 0;
  int nodes_known = 1;
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
    nodes_known = nodes_known && have_free;
    nodes_kb += memfree_kb;
    now_total += have_buddy ? blocks : 0;
    max_total += max2;
  }
  /* Free memory that no node shows yet.  Some virtual machines' kernels
   * boot with most of their memory outside the zones' free lists and add it
   * as a zone runs short (seen: /proc/meminfo's MemFree 23 GiB, the one
   * node's 4 GiB, and a pool of 8000 pages granted).  /proc/meminfo counts
   * it; a node's meminfo and buddyinfo do not.  The sums agree to a few
   * pages elsewhere (read a moment apart), hence the margin. */
  unsigned long long all_kb = 0;
  if (nnodes && nodes_known && dr_read("/proc/meminfo", meminfo, sizeof meminfo) > 0 &&
      meminfo_kb(meminfo, "MemFree:", &all_kb) == 0 && all_kb > nodes_kb &&
      all_kb - nodes_kb >= (256ULL << 10) && all_kb - nodes_kb >= all_kb / 32) {
    unsigned long long extra_kb = all_kb - nodes_kb, extra2 = extra_kb / 2048;
    dr_row("not yet in any node: %llu MiB that /proc/meminfo counts free and no node's meminfo shows (the kernel adds "
           "it to a node as it runs short): up to %llu more 2 MB pages",
           extra_kb >> 10, extra2);
    dr_kv_str("node", "none");
    dr_kv_num("pages_2m_max", (long long)extra2);
    dr_kv_num("memfree_kb", (long long)extra_kb);
    max_total += extra2;
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
