/* SPDX-License-Identifier: BSD-3-Clause */
/* The OS layer, continued: what the kernel says of its hugepage pool
 * (sysfs counts per page size and NUMA node) and which nodes have memory.
 * Same contract as os.c (os.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "os-kernel.h"
#include "os.h"

static const char *const kSysfsPool = "/sys/kernel/mm/hugepages/hugepages-";
static const char *const kSysfsNode = "/sys/devices/system/node/node";

static size_t pool_dir(char *buf, size_t len, size_t page_size, int node, const char *file) {
  int n;
  if (node < 0) {
    n = snprintf(buf, len, "%s%zukB/%s", kSysfsPool, page_size >> 10, file);
  } else {
    n = snprintf(buf, len, "%s%d/hugepages/hugepages-%zukB/%s", kSysfsNode, node, page_size >> 10, file);
  }
  return n < 0 || (size_t)n >= len ? 0 : (size_t)n;
}

static long read_long(const char *path) {
  char buf[64];
  if (os_read_file(path, buf, sizeof(buf)) < 0) return -1;
  char *end = NULL;
  long v = strtol(buf, &end, 10);
  if (end == buf || v < 0) {
    errno = EINVAL;
    return -1;
  }
  return v;
}

long os_pool_available(size_t page_size, int node) {
  char path[160];
  if (!pool_dir(path, sizeof(path), page_size, node, "free_hugepages")) return -1;
  long free_pages = read_long(path);
  if (free_pages < 0 || node >= 0) return free_pages; /* per node: no reserved count */
  if (!pool_dir(path, sizeof(path), page_size, node, "resv_hugepages")) return -1;
  long resv = read_long(path);
  return resv < 0 ? free_pages : free_pages - resv;
}

long os_pool_total(size_t page_size, int node) {
  char path[160];
  if (!pool_dir(path, sizeof(path), page_size, node, "nr_hugepages")) return -1;
  return read_long(path);
}

long os_pool_overcommit(size_t page_size) {
  char path[160];
  if (!pool_dir(path, sizeof(path), page_size, -1, "nr_overcommit_hugepages")) return -1;
  return read_long(path);
}

bool os_page_size_supported(size_t page_size) {
  char path[160];
  struct stat st;
  return pool_dir(path, sizeof(path), page_size, -1, "") && sys_stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Nodes with memory, read once from /sys/devices/system/node/has_memory
 * ("0", "0-3,6") so node-bound cache hits make no system call; and how many
 * of them this process places pages on by first touch (os_node_count). */
#define HP_MAX_NODES 1024
#define HP_NODE_WORDS (HP_MAX_NODES / (8 * sizeof(unsigned long)))
typedef unsigned long node_mask[HP_NODE_WORDS];
static node_mask nodes_with_memory;
static int first_touch_nodes;

/* A list of the kernel's ("0", "0-3,6": nodes, CPUs): add(n, set) for each
 * n in it below limit; false if there is none. */
static bool parse_list(const char *p, long limit, void (*add)(long n, void *set), void *set) {
  bool any = false;
  while (*p >= '0' && *p <= '9') {
    char *end = NULL;
    long lo = strtol(p, &end, 10), hi = lo;
    if (*end == '-') hi = strtol(end + 1, &end, 10);
    for (long n = lo; n <= hi && n < limit; n++) {
      add(n, set);
      any = true;
    }
    p = *end == ',' ? end + 1 : end;
  }
  return any;
}

static void add_node(long n, void *set) {
  unsigned long *mask = set;
  mask[n / (long)(8 * sizeof(unsigned long))] |= 1UL << (n % (long)(8 * sizeof(unsigned long)));
}

/* A node list into mask; false if there is none. */
static bool parse_nodes(const char *p, node_mask mask) { return parse_list(p, HP_MAX_NODES, add_node, mask); }

/* A node list from a file, or the line of /proc/self/status that starts
 * with `key`; false if it cannot be read. */
static bool read_nodes(const char *path, const char *key, node_mask mask) {
  char buf[4096];
  if (os_read_file(path, buf, sizeof(buf)) < 0) return false;
  const char *p = buf;
  if (key) {
    p = strstr(buf, key);
    if (!p) return false;
    p += strlen(key);
    while (*p == ' ' || *p == '\t') p++;
  }
  return parse_nodes(p, mask);
}

/* Read at the first question, not at start: a process that never asks
 * (one that makes no hugepool allocation: most under a site's module) reads
 * none of the three files. */
static void nodes_init(void) {
  (void)read_nodes("/sys/devices/system/node/has_memory", NULL, nodes_with_memory);
  /* First touch chooses between the nodes that have both CPUs and memory
   * (a memory-only node, CXL or HBM, gets pages only by policy) and that
   * this process may use (a cpuset or numactl --membind narrows them). */
  node_mask cpu = {0}, allowed = {0};
  bool have_cpu = read_nodes("/sys/devices/system/node/has_cpu", NULL, cpu);
  bool have_allowed = read_nodes("/proc/self/status", "\nMems_allowed_list:", allowed);
  int n = 0;
  for (size_t i = 0; i < HP_NODE_WORDS; i++) {
    unsigned long m = nodes_with_memory[i] & (have_cpu ? cpu[i] : ~0UL) & (have_allowed ? allowed[i] : ~0UL);
    n += __builtin_popcountl(m);
  }
  first_touch_nodes = n;
}

static pthread_once_t nodes_once = PTHREAD_ONCE_INIT;

int os_node_count(void) {
  pthread_once(&nodes_once, nodes_init);
  return first_touch_nodes;
}

bool os_node_has_memory(int node) {
  if (node < 0 || node >= HP_MAX_NODES) return false;
  pthread_once(&nodes_once, nodes_init);
  return (nodes_with_memory[(unsigned)node / (8 * sizeof(unsigned long))] >>
          ((unsigned)node % (8 * sizeof(unsigned long)))) &
         1UL;
}

static void add_cpu(long n, void *set) { CPU_SET((int)n, (cpu_set_t *)set); }

bool os_node_cpus(cpu_set_t *set) {
  unsigned cpu, node; /* the system call: getcpu() is glibc 2.29 (libc-floor.h) */
  if (syscall(SYS_getcpu, &cpu, &node, NULL) != 0) return false;
  char path[80], buf[4096];
  (void)snprintf(path, sizeof(path), "%s%u/cpulist", kSysfsNode, node);
  if (os_read_file(path, buf, sizeof(buf)) < 0) return false;
  CPU_ZERO(set);
  return parse_list(buf, CPU_SETSIZE, add_cpu, set);
}
