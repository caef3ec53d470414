/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool doctor: this process's limits and environment: HUGEPOOL_*
 * variables, RLIMIT_MEMLOCK and the MPI transport variables that decide
 * whether hugetlb pages help. */
#define _GNU_SOURCE
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

/* Under the preload (a site's module, hugepool-run) every fork() gives the
 * child private copies of the live hugetlb buffers, so that it never
 * SIGBUSes: Python's multiprocessing forks its workers by default and pays
 * that per worker (bench/RESULTS.md, "fork and Python's multiprocessing"). */
static void check_fork_copy(void) {
  const char *pre = getenv("LD_PRELOAD");
  const char *mode = getenv(option_desc(HP_OPT_FORK)->name);
  long long v = HP_FORK_COPY;
  char expected[96];
  if (!pre || !strstr(pre, "hugepool_preload")) return;
  if (mode && (option_parse(HP_OPT_FORK, mode, true, &v, expected, sizeof expected) != 0 || v != HP_FORK_COPY)) return;
  dr_problem(DR_INFO,
             "multiprocessing.set_start_method('forkserver')   (Python; or export HUGEPOOL_FORK=keep where the free "
             "pool covers every page parent and children write)",
             "a forked child copies every live hugetlb buffer at fork (HUGEPOOL_FORK=copy): Python's multiprocessing "
             "forks each worker, measured 3x the start of Pool(4) over a 400 MB array");
}

/* HUGEPOOL_SMALL_HEAP under the preload: the interposer loads the heap
 * from its own directory, links resolved (preload/dlopen.c); a partial copy
 * of the interposer elsewhere leaves every small request to glibc. */
static void check_small_heap_object(void) {
  static const char heap[] = "libhugepool_small_heap.so";
  const char *pre = getenv("LD_PRELOAD");
  const char *on = getenv(option_desc(HP_OPT_SMALL_HEAP)->name);
  long long v = 0;
  char expected[96], entry[PATH_MAX], real[PATH_MAX];
  if (!pre || !on || option_parse(HP_OPT_SMALL_HEAP, on, true, &v, expected, sizeof expected) != 0 || !v) return;
  for (const char *p = pre; *p;) { /* entries: separated by spaces or colons */
    size_t n = strcspn(p, " :");
    if (n > 0 && n < sizeof entry) {
      memcpy(entry, p, n);
      entry[n] = '\0';
      char *slash = strrchr(entry, '/');
      if (slash && strcmp(slash + 1, "libhugepool_preload.so") == 0) {
        char *path = realpath(entry, real) ? real : entry; /* where the interposer looks: links resolved */
        char *cut = strrchr(path, '/');
        if (!cut || (size_t)(cut + 1 - path) + sizeof(heap) > PATH_MAX) return;
        memcpy(cut + 1, heap, sizeof(heap));
        if (access(path, R_OK) != 0)
          dr_problem(DR_WARNING, "install hugepool whole (cmake --install, or the hugepool-tools package)",
                     "%s is set, but %s is missing beside the interposer: every small request stays with glibc",
                     option_desc(HP_OPT_SMALL_HEAP)->name, path);
        else
          dr_row("small heap: %s", path);
        return;
      }
    }
    p += n + (p[n] != '\0');
  }
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
  check_fork_copy();
  check_small_heap_object();
}
