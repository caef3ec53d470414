#define _GNU_SOURCE /* dirfd, flock, dprintf, pwrite, pidfd_open */
/* The privileged core of hugepool-reserve: pool files, site limits, the
 * lock, the grant table and the audit log.  Shared by the helper and the
 * Slurm plugin; it never execs, never uses a shell, and opens every file
 * with O_NOFOLLOW so a symlink planted anywhere we write is refused.
 *
 * All paths are fixed at build time.  A test build (HUGEPOOL_RESERVE_TEST_ROOT)
 * reads a fake /sys and /proc below that directory instead of the real ones.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/pidfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "reserve.h"

#ifdef HUGEPOOL_RESERVE_TEST_ROOT
#define SYS_ROOT HUGEPOOL_RESERVE_TEST_ROOT
#else
#define SYS_ROOT ""
#endif
#ifndef RESERVE_CONF_FILE
#define RESERVE_CONF_FILE "/etc/hugepool/reserve.conf"
#endif
#ifndef RESERVE_STATE_DIR
#define RESERVE_STATE_DIR "/var/lib/hugepool"
#endif
#ifndef RESERVE_JOBS_DIR
#define RESERVE_JOBS_DIR "/run/hugepool/jobs"
#endif
#ifndef RESERVE_LOCK_WAIT_MS
#define RESERVE_LOCK_WAIT_MS 30000 /* a stopped caller must not block the others forever */
#endif

/* ---- small file primitives ---- */

static int read_fd_all(int fd, char *buf, size_t cap, size_t *len) {
  size_t n = 0;
  while (n + 1 < cap) {
    ssize_t r = read(fd, buf + n, cap - 1 - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    n += (size_t)r;
  }
  if (n + 1 >= cap) return -1; /* larger than we accept */
  buf[n] = '\0';
  *len = n;
  return 0;
}

static int read_small(const char *path, char *buf, size_t cap, size_t *len) {
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
  int rc;
  if (fd < 0) return -1;
  rc = read_fd_all(fd, buf, cap, len);
  close(fd);
  return rc;
}

static int read_ull(const char *path, unsigned long long *v) {
  char buf[32];
  size_t len;
  if (read_small(path, buf, sizeof buf, &len) != 0) return -1;
  if (len > 0 && buf[len - 1] == '\n') buf[--len] = '\0';
  return reserve_parse_count(buf, 1ULL << 50, v);
}

static int write_ull(const char *path, unsigned long long v) {
  char buf[32];
  int n = snprintf(buf, sizeof buf, "%llu\n", v);
  int fd = open(path, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
  ssize_t w;
  if (fd < 0) return -1;
  w = write(fd, buf, (size_t)n);
  if (close(fd) != 0) w = -1;
  return w == n ? 0 : -1;
}

/* ---- pools ---- */

struct pool_state {
  unsigned long long nr, free, resv, surplus;
};

/* Pool paths are built only from a validated node number and page size and
 * a compile-time prefix; a path that would not fit is an error, not cut. */
static int pool_path(char *buf, size_t cap, int node, unsigned size_kb, const char *what) {
  int n;
  if (node < 0)
    n = snprintf(buf, cap, SYS_ROOT "/sys/kernel/mm/hugepages/hugepages-%ukB/%s", size_kb, what);
  else
    n = snprintf(buf, cap, SYS_ROOT "/sys/devices/system/node/node%d/hugepages/hugepages-%ukB/%s", node, size_kb, what);
  return n > 0 && (size_t)n < cap ? 0 : -1;
}

static int pool_file_read(int node, unsigned size_kb, const char *what, unsigned long long *v) {
  char path[512];
  if (pool_path(path, sizeof path, node, size_kb, what) != 0) return -1;
  return read_ull(path, v);
}

/* Per-node directories have no resv_hugepages: use the global count, which
 * can only overstate what is reserved on the node (the safe direction). */
static int pool_read(int node, unsigned size_kb, struct pool_state *st) {
  if (pool_file_read(node, size_kb, "nr_hugepages", &st->nr) != 0 ||
      pool_file_read(node, size_kb, "free_hugepages", &st->free) != 0 ||
      pool_file_read(node, size_kb, "surplus_hugepages", &st->surplus) != 0 ||
      pool_file_read(-1, size_kb, "resv_hugepages", &st->resv) != 0)
    return -1;
  return 0;
}

/* Free pages nobody has reserved: the most the pool may shrink by. */
static unsigned long long pool_spare(const struct pool_state *st) {
  return st->free > st->resv ? st->free - st->resv : 0;
}

static int pool_write_nr(int node, unsigned size_kb, unsigned long long nr) {
  char path[512];
  if (pool_path(path, sizeof path, node, size_kb, "nr_hugepages") != 0) return -1;
#ifdef HUGEPOOL_RESERVE_TEST_ROOT
  {
    /* Fake tree only: play the kernel.  Free pages follow the pool size, a
     * "capacity" file caps what can be allocated (memory running out), and
     * a node's pages are pages of the machine-wide pool too. */
    unsigned long long old = 0, fr = 0, cap, gnr, gfr;
    char p2[512], g[512];
    if (read_ull(path, &old) != 0) return -1;
    if (pool_path(p2, sizeof p2, node, size_kb, "capacity") == 0 && read_ull(p2, &cap) == 0 && nr > cap) nr = cap;
    if (pool_path(p2, sizeof p2, node, size_kb, "free_hugepages") != 0 || read_ull(p2, &fr) != 0) return -1;
    if (nr < old && old - nr > fr) nr = old - fr; /* only free pages can go */
    fr = fr + nr - old;
    if (pool_path(p2, sizeof p2, node, size_kb, "free_hugepages") != 0 || write_ull(p2, fr) != 0) return -1;
    if (node < 0) { /* the pages a grant on any node gets land on node 0; a shrink takes free ones in node order */
      unsigned long long left = old > nr ? old - nr : nr - old, nnr, nfr, take;
      int n;
      for (n = 0; n <= 1 && left > 0; n++) {
        if (pool_path(g, sizeof g, n, size_kb, "nr_hugepages") != 0 || read_ull(g, &nnr) != 0 ||
            pool_path(p2, sizeof p2, n, size_kb, "free_hugepages") != 0 || read_ull(p2, &nfr) != 0)
          continue;
        take = nr > old ? left : (nfr < left ? nfr : left);
        if (nr > old ? write_ull(g, nnr + take) != 0 || write_ull(p2, nfr + take) != 0
                     : write_ull(g, nnr - take) != 0 || write_ull(p2, nfr - take) != 0)
          return -1;
        left -= take;
      }
    } else {
      if (pool_path(g, sizeof g, -1, size_kb, "nr_hugepages") != 0 || read_ull(g, &gnr) != 0 ||
          write_ull(g, gnr + nr > old ? gnr + nr - old : 0) != 0 ||
          pool_path(g, sizeof g, -1, size_kb, "free_hugepages") != 0 || read_ull(g, &gfr) != 0 ||
          write_ull(g, gfr + nr > old ? gfr + nr - old : 0) != 0)
        return -1;
    }
  }
#endif
  return write_ull(path, nr);
}

/* fsync of the grant table.  The test build can be told to fail the
 * (N+1)th call with EIO: a file "fail-fsync" holding N in the fake root. */
static int table_sync(int fd) {
#ifdef HUGEPOOL_RESERVE_TEST_ROOT
  static unsigned long long calls;
  unsigned long long fail_at;
  if (read_ull(SYS_ROOT "/fail-fsync", &fail_at) == 0 && calls++ == fail_at) {
    errno = EIO;
    return -1;
  }
#endif
  return fsync(fd);
}

struct meminfo {
  unsigned long long total_kb, avail_kb, hugetlb_kb;
};

static int meminfo_field(const char *text, const char *key, unsigned long long *v) {
  const char *p = strstr(text, key);
  char num[24];
  size_t n = 0;
  if (p == NULL || (p != text && p[-1] != '\n')) return -1;
  p += strlen(key);
  while (*p == ' ') p++;
  while (*p >= '0' && *p <= '9' && n + 1 < sizeof num) num[n++] = *p++;
  num[n] = '\0';
  if (strncmp(p, " kB\n", 4) != 0) return -1;
  return reserve_parse_count(num, 1ULL << 50, v);
}

static int meminfo_read(struct meminfo *m) {
  char buf[8192];
  size_t len;
  if (read_small(SYS_ROOT "/proc/meminfo", buf, sizeof buf, &len) != 0) return -1;
  if (meminfo_field(buf, "MemTotal:", &m->total_kb) != 0 || meminfo_field(buf, "MemAvailable:", &m->avail_kb) != 0 ||
      meminfo_field(buf, "Hugetlb:", &m->hugetlb_kb) != 0)
    return -1;
  return 0;
}

/* A NUMA node's own memory: "Node N MemTotal:" and "Node N MemFree:" of
 * /sys/devices/system/node/nodeN/meminfo (a node has no MemAvailable), and
 * its hugetlb memory from its pools of every page size. */
static int node_meminfo_read(int node, struct meminfo *m) {
  char path[512], buf[8192], key[48];
  size_t len;
  unsigned long long nr;
  static const unsigned sizes[] = {RESERVE_PAGE_2M, RESERVE_PAGE_1G};
  size_t i;
  if (snprintf(path, sizeof path, SYS_ROOT "/sys/devices/system/node/node%d/meminfo", node) >= (int)sizeof path ||
      read_small(path, buf, sizeof buf, &len) != 0)
    return -1;
  snprintf(key, sizeof key, "Node %d MemTotal:", node);
  if (meminfo_field(buf, key, &m->total_kb) != 0) return -1;
  snprintf(key, sizeof key, "Node %d MemFree:", node);
  if (meminfo_field(buf, key, &m->avail_kb) != 0) return -1;
  m->hugetlb_kb = 0;
  for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    if (pool_file_read(node, sizes[i], "nr_hugepages", &nr) == 0) m->hugetlb_kb += nr * sizes[i];
  return 0;
}

/* ---- the caller's own hugetlb use ---- */

/* One "Key:\tvalue..." line of a /proc/<pid>/status text. */
static const char *status_line(const char *text, const char *key) {
  const char *p = text;
  size_t kl = strlen(key);
  while (p != NULL && *p != '\0') {
    if (strncmp(p, key, kl) == 0) return p + kl;
    p = strchr(p, '\n');
    if (p != NULL) p++;
  }
  return NULL;
}

static int status_number(const char **p, unsigned long long max, unsigned long long *v) {
  char num[24];
  size_t n = 0;
  while (**p == ' ' || **p == '\t') (*p)++;
  while (**p >= '0' && **p <= '9' && n + 1 < sizeof num) num[n++] = *(*p)++;
  num[n] = '\0';
  return reserve_parse_count(num, max, v);
}

/* Hugetlb memory (kB, every page size and node) mapped by processes, from
 * "HugetlbPages:" of /proc/<pid>/status, which every user may read: for the
 * caller, every process whose real or effective uid is theirs; for each other
 * user with a grant, the processes whose real and effective uids are both
 * theirs (a mapping lowers what is promised to them only if it is surely
 * theirs).  Fail closed: a process that is gone (ENOENT, ESRCH) is skipped;
 * any other error (EMFILE, EACCES, a status we cannot parse) makes the count
 * unknown and returns -1 with errno set.  Kernel threads and zombies have no
 * HugetlbPages line: they map nothing. */
struct usage {
  size_t n;
  uid_t uid[RESERVE_MAX_GRANTS];
  unsigned long long kb[RESERVE_MAX_GRANTS];
  unsigned long long caller_kb;
};

static int usage_index(const struct usage *u, uid_t uid) {
  size_t i;
  for (i = 0; i < u->n; i++)
    if (u->uid[i] == uid) return (int)i;
  return -1;
}

static int procs_hugetlb(const struct reserve_grants *gs, uid_t caller, struct usage *u) {
  DIR *d;
  struct dirent *e;
  size_t i;
  int rc = 0, err = 0;
  memset(u, 0, sizeof *u);
  for (i = 0; i < gs->n; i++)
    if (gs->g[i].uid != caller && usage_index(u, gs->g[i].uid) < 0) u->uid[u->n++] = gs->g[i].uid;
  d = opendir(SYS_ROOT "/proc");
  if (d == NULL) return -1;
  errno = 0;
  while (rc == 0 && (e = readdir(d)) != NULL) {
    char path[64], buf[8192];
    unsigned long long pid, ruid, euid, use = 0;
    const char *p;
    size_t len;
    int fd, k;
    if (reserve_parse_count(e->d_name, 1ULL << 31, &pid) != 0) continue;
    snprintf(path, sizeof path, "%llu/status", pid);
    fd = openat(dirfd(d), path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
    if (fd < 0 || read_fd_all(fd, buf, sizeof buf, &len) != 0) {
      err = errno;
      if (fd >= 0) close(fd);
      if (err == ENOENT || err == ESRCH) continue; /* ended while we looked */
      rc = -1;
      break;
    }
    close(fd);
    p = status_line(buf, "Uid:");
    if (p == NULL || status_number(&p, 0xffffffffULL, &ruid) != 0 || status_number(&p, 0xffffffffULL, &euid) != 0) {
      err = EPROTO;
      rc = -1;
      break;
    }
    p = status_line(buf, "HugetlbPages:");
    if (p != NULL && status_number(&p, 1ULL << 50, &use) != 0) {
      err = EPROTO;
      rc = -1;
      break;
    }
    if (ruid == caller || euid == caller) u->caller_kb += use;
    if (ruid == euid && (k = usage_index(u, (uid_t)ruid)) >= 0) u->kb[k] += use;
    errno = 0;
  }
  if (rc == 0 && errno != 0) { /* readdir failed */
    err = errno;
    rc = -1;
  }
  closedir(d);
  errno = err;
  return rc;
}

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

/* The NUMA nodes of the machine (nodeN directories), in order. */
static size_t node_list(int *nodes, size_t cap) {
  DIR *d = opendir(SYS_ROOT "/sys/devices/system/node");
  struct dirent *e;
  size_t n = 0, i;
  if (d == NULL) return 0;
  while ((e = readdir(d)) != NULL && n < cap) {
    unsigned long long v;
    if (strncmp(e->d_name, "node", 4) != 0 || reserve_parse_count(e->d_name + 4, RESERVE_MAX_NODE, &v) != 0) continue;
    for (i = n; i > 0 && nodes[i - 1] > (int)v; i--) nodes[i] = nodes[i - 1];
    nodes[i] = (int)v;
    n++;
  }
  closedir(d);
  return n;
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

/* ---- audit ---- */

void reserve_audit(const struct reserve_caller *who, const char *fmt, ...) {
  char msg[512];
  const struct passwd *pw = getpwuid(who->uid);
  int n = snprintf(msg, sizeof msg, "uid=%lu user=%s source=%s job=%lu ", (unsigned long)who->uid,
                   pw != NULL ? pw->pw_name : "?", who->source, who->job);
  va_list ap;
  if (n < 0 || (size_t)n >= sizeof msg) n = 0;
  va_start(ap, fmt);
  (void)vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
  va_end(ap);
  syslog(LOG_AUTHPRIV | LOG_NOTICE, "%s", msg);
}

/* ---- config ---- */

static int owned_by_root_not_writable(const struct stat *st) {
  return st->st_uid == 0 && (st->st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

int reserve_load_config(struct reserve_config *c, char *err, size_t errlen) {
  char buf[RESERVE_CONF_MAX + 2], perr[160], dir[sizeof RESERVE_CONF_FILE];
  struct stat st;
  size_t len;
  char *slash;
  int fd, rc;
  memcpy(dir, RESERVE_CONF_FILE, sizeof dir);
  slash = strrchr(dir, '/');
  if (slash != NULL && slash != dir) *slash = '\0';
  if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || !owned_by_root_not_writable(&st)) {
    snprintf(err, errlen, "config directory %s must be a root-owned directory not writable by group or others", dir);
    return -1;
  }
  fd = open(RESERVE_CONF_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    snprintf(err, errlen, "cannot open config %s: %s", RESERVE_CONF_FILE, strerror(errno));
    return -1;
  }
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !owned_by_root_not_writable(&st)) {
    close(fd);
    snprintf(err, errlen, "config %s must be a regular file owned by root and not writable by group or others",
             RESERVE_CONF_FILE);
    return -1;
  }
  rc = read_fd_all(fd, buf, sizeof buf, &len);
  close(fd);
  if (rc != 0) {
    snprintf(err, errlen, "cannot read config %s (at most %d bytes)", RESERVE_CONF_FILE, RESERVE_CONF_MAX);
    return -1;
  }
  if (reserve_parse_config(buf, len, c, perr, sizeof perr) != 0) {
    snprintf(err, errlen, "config %s: %s", RESERVE_CONF_FILE, perr);
    return -1;
  }
  return 0;
}

/* ---- Slurm job registry ---- */

int reserve_job_register(unsigned long job, uid_t uid) {
  char path[256], buf[32];
  int fd, n;
  ssize_t w;
  mkdir(RESERVE_JOBS_DIR, 0755); /* parent made at boot (tmpfiles); EEXIST is fine */
  snprintf(path, sizeof path, RESERVE_JOBS_DIR "/%lu", job);
  fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0644);
  if (fd < 0) return -1;
  n = snprintf(buf, sizeof buf, "%lu\n", (unsigned long)uid);
  w = write(fd, buf, (size_t)n);
  if (close(fd) != 0) w = -1;
  return w == n ? 0 : -1;
}

int reserve_job_unregister(unsigned long job) {
  char path[256];
  snprintf(path, sizeof path, RESERVE_JOBS_DIR "/%lu", job);
  return unlink(path) == 0 || errno == ENOENT ? 0 : -1;
}

/* Only root-owned regular files count: the registry is written by the plugin. */
int reserve_user_has_job(uid_t uid, unsigned long except_job) {
  DIR *d = opendir(RESERVE_JOBS_DIR);
  struct dirent *e;
  int found = 0;
  if (d == NULL) return 0;
  while (!found && (e = readdir(d)) != NULL) {
    unsigned long long job, owner;
    char buf[32];
    size_t len;
    struct stat st;
    int fd;
    if (reserve_parse_count(e->d_name, 1ULL << 40, &job) != 0 || job == except_job) continue;
    fd = openat(dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) continue;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 && read_fd_all(fd, buf, sizeof buf, &len) == 0) {
      if (len > 0 && buf[len - 1] == '\n') buf[--len] = '\0';
      if (reserve_parse_count(buf, 0xfffffffeULL, &owner) == 0 && owner == uid) found = 1;
    }
    close(fd);
  }
  closedir(d);
  return found;
}

/* ---- authorization ---- */

int reserve_authorize(const struct reserve_config *c, const struct reserve_caller *who, char *err, size_t errlen) {
  const struct group *gr;
  int i, member = 0;
  if (who->uid == 0) return 0;
  gr = getgrnam(c->group);
  if (gr == NULL) {
    snprintf(err, errlen, "group '%s' from the config does not exist", c->group);
    return -1;
  }
  member = who->gid == gr->gr_gid;
  for (i = 0; i < who->ngroups && !member; i++) member = who->groups[i] == gr->gr_gid;
  if (!member) {
    snprintf(err, errlen, "you are not in group '%s'", c->group);
    return -1;
  }
  if (c->require_job && !reserve_user_has_job(who->uid, 0)) {
    snprintf(err, errlen, "you have no Slurm job running on this node");
    return -1;
  }
  return 0;
}

/* ---- lock and grant table ---- */

struct state {
  int lock_fd, grants_fd;
  struct reserve_grants gs;
  char text[RESERVE_GRANTS_MAX + 2]; /* the table as it is on disk */
  size_t text_len;
};

/* Linux cuts a write at the caller's RLIMIT_FSIZE even when it overwrites
 * existing bytes (with SIGXFSZ blocked the write is just short), so a caller
 * could tear the table at an offset of its choosing.  Raise the soft limit to
 * the hard one; if the hard one is still below the table's largest size,
 * refuse before anything changes. */
int reserve_fsize_ok(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_FSIZE, &rl) != 0) return 0;
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < RESERVE_GRANTS_MAX) {
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0 || getrlimit(RLIMIT_FSIZE, &rl) != 0) return 0;
  }
  return rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= RESERVE_GRANTS_MAX;
}

/* Every file the helper has open at once (stdio, lock, table, /proc and
 * one of its entries, a pool file, syslog, a pidfd) with room to spare.
 * With fewer, opens fail with EMFILE; that must never read as "nothing". */
#define RESERVE_MIN_NOFILE 32

/* The soft RLIMIT_NOFILE raised to the hard one if it is below what we
 * need; 1 if enough descriptors can be opened, else 0. */
int reserve_nofile_ok(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < RESERVE_MIN_NOFILE) {
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0 || getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
  }
  return rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= RESERVE_MIN_NOFILE;
}

/* Root side (the Slurm prolog/epilog, or root running the helper) only.
 * A user can keep their own helper from ever dropping the lock: SIGSTOP it
 * (it keeps the caller's real uid, so the caller may signal it), freeze its
 * cgroup, run it under any name through a symlink.  What the user cannot
 * choose is the helper's effective gid: the lock file is root:<group> 0660,
 * so only a process running with that group, i.e. a helper, can hold it.
 * After the wait, every holder listed in /proc/locks whose effective gid
 * (the second field of the "Gid:" line of /proc/<pid>/status) is the lock
 * file's group is killed, whatever it is doing: a kill is safe at any point
 * (an unfinished grant is settled by the next call, see the rules above).
 * The pid is pinned with pidfd_open before its status is read, and the
 * process is still alive after the read, so the status was its own and
 * the signal cannot reach a process that reused the pid.
 * The real /proc even in a test build: these are real processes. */
static int kill_lock_holders(const struct reserve_caller *who, int lock_fd) {
  char want[64], line[256];
  struct stat st;
  FILE *f;
  int killed = 0;
  if (fstat(lock_fd, &st) != 0) return 0;
  snprintf(want, sizeof want, "%02x:%02x:%lu", major(st.st_dev), minor(st.st_dev), (unsigned long)st.st_ino);
  f = fopen("/proc/locks", "re");
  if (f == NULL) return 0;
  while (fgets(line, sizeof line, f) != NULL) {
    char type[16], id[16], dev[64], path[64], buf[2048];
    unsigned long long pid, egid = ~0ULL, rgid;
    const char *q;
    size_t len;
    int pidfd;
    /* "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; waiters have "->" */
    if (sscanf(line, "%15s %15s %*s %*s %20s %63s", id, type, path, dev) != 4) continue;
    if (strcmp(type, "FLOCK") != 0 || strcmp(dev, want) != 0) continue;
    if (reserve_parse_count(path, 1ULL << 31, &pid) != 0 || pid == (unsigned long long)getpid()) continue;
    pidfd = pidfd_open((pid_t)pid, 0);
    if (pidfd < 0) continue;
    snprintf(path, sizeof path, "/proc/%llu/status", pid);
    if (read_small(path, buf, sizeof buf, &len) == 0 && (q = status_line(buf, "Gid:")) != NULL &&
        status_number(&q, 0xffffffffULL, &rgid) == 0 && status_number(&q, 0xffffffffULL, &egid) == 0 &&
        egid == st.st_gid && pidfd_send_signal(pidfd, 0, NULL, 0) == 0 &&
        pidfd_send_signal(pidfd, SIGKILL, NULL, 0) == 0) {
      killed++;
      reserve_audit(who, "action=recover pid=%llu outcome=killed reason=\"a hugepool-reserve held the lock for %d s\"",
                    pid, RESERVE_LOCK_WAIT_MS / 1000);
    }
    close(pidfd);
  }
  (void)fclose(f);
  return killed;
}

static int intent_reconcile(const struct reserve_caller *who, struct state *s);

/* Returns 0, -1 (error, message in err) or -2 (the lock stayed busy). */
static int state_open(const struct reserve_caller *who, struct state *s, int exclusive, char *err, size_t errlen) {
  size_t len;
  int waited = 0, rounds = 0;
  struct timespec ts = {0, 20L * 1000 * 1000};
  s->grants_fd = -1;
  if (exclusive && !reserve_fsize_ok()) {
    snprintf(err, errlen,
             "your file size limit (RLIMIT_FSIZE, ulimit -f) is below %d bytes: the grant table could "
             "not be written safely; raise it",
             RESERVE_GRANTS_MAX);
    return -1;
  }
  if (exclusive && !reserve_nofile_ok()) {
    snprintf(err, errlen,
             "your open-file limit (RLIMIT_NOFILE, ulimit -n) is below %d: the pages your processes map could "
             "not be counted safely; raise it",
             RESERVE_MIN_NOFILE);
    return -1;
  }
  s->lock_fd = open(RESERVE_STATE_DIR "/lock", O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
  if (s->lock_fd < 0) {
    snprintf(err, errlen, "cannot open %s/lock: %s (is the helper installed?)", RESERVE_STATE_DIR, strerror(errno));
    return -1;
  }
  while (flock(s->lock_fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) goto fail_errno;
    if (waited >= RESERVE_LOCK_WAIT_MS) {
      /* Root: kill the helper holding the lock and wait once more. */
      if (geteuid() == 0 && rounds < 3 && kill_lock_holders(who, s->lock_fd) > 0) {
        rounds++;
        waited = 0;
        continue;
      }
      snprintf(err, errlen, "another reservation held the lock for %d s; try again", RESERVE_LOCK_WAIT_MS / 1000);
      close(s->lock_fd);
      return -2;
    }
    nanosleep(&ts, NULL);
    waited += 20;
  }
  s->grants_fd = open(RESERVE_STATE_DIR "/grants", O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
  if (s->grants_fd < 0) goto fail_errno;
  if (read_fd_all(s->grants_fd, s->text, sizeof s->text, &len) != 0 ||
      reserve_parse_grants(s->text, len, &s->gs) != 0) {
    snprintf(err, errlen, "grant table %s/grants is corrupt; an administrator must repair it", RESERVE_STATE_DIR);
    goto fail;
  }
  s->text_len = len;
  if (exclusive && s->gs.intent.active && intent_reconcile(who, s) != 0) {
    snprintf(err, errlen, "an unfinished grant could not be settled (%s); try again", strerror(errno));
    goto fail;
  }
  return 0;
fail_errno:
  snprintf(err, errlen, "state %s: %s", RESERVE_STATE_DIR, strerror(errno));
fail:
  if (s->grants_fd >= 0) close(s->grants_fd);
  close(s->lock_fd);
  return -1;
}

/* One pwrite of the whole table, checked for its full length, then
 * truncate and fsync.  If any of the three fails, the previous table is
 * written back (so what is read next is what was there before, and the
 * pool can be put back to agree with it) and -1 returned with errno.
 * Whatever happens in between (a kill, a failed undo), the end line's
 * checksum makes a mix of new and old bytes a corrupt table, never a
 * different valid one; a new table followed by an old tail is the new table. */
static int state_write(struct state *s) {
  static char buf[RESERVE_GRANTS_MAX];
  size_t len = reserve_format_grants(&s->gs, buf, sizeof buf);
  ssize_t w;
  int e;
  if (len == 0) {
    errno = ENOSPC;
    return -1;
  }
  w = pwrite(s->grants_fd, buf, len, 0);
  if (w == (ssize_t)len && ftruncate(s->grants_fd, (off_t)len) == 0 && table_sync(s->grants_fd) == 0) {
    memcpy(s->text, buf, len); /* what a later undo in this call goes back to */
    s->text_len = len;
    return 0;
  }
  e = w < 0 || w == (ssize_t)len ? errno : EIO;
  if (w > 0 && pwrite(s->grants_fd, s->text, s->text_len, 0) == (ssize_t)s->text_len)
    (void)!ftruncate(s->grants_fd, (off_t)s->text_len);
  (void)reserve_parse_grants(s->text, s->text_len, &s->gs); /* our copy agrees with the file again */
  errno = e;
  return -1;
}

static void state_close(struct state *s) {
  close(s->grants_fd);
  close(s->lock_fd); /* drops the flock */
}

static struct reserve_grant_entry *grant_find(struct reserve_grants *gs, uid_t uid, int node, unsigned size_kb) {
  size_t i;
  for (i = 0; i < gs->n; i++)
    if (gs->g[i].uid == uid && gs->g[i].node == node && gs->g[i].size_kb == size_kb) return &gs->g[i];
  return NULL;
}

/* ---- the intent record ---- */

struct settled {
  unsigned long long came;    /* pages the pool had gained */
  unsigned long long now;     /* nr_hugepages at the end */
  unsigned long long charged; /* pages charged to the intent's user */
};

/* Settles the table's intent: the pages the pool gained over the intent's
 * "before" are charged to its user if all of them came; if only some came
 * they are given back, and whatever cannot be given back is charged.  The
 * intent is cleared in the same table write that records the charge.
 * Returns 0, or -1 with errno (the pool unreadable, the table full or not
 * written: the intent then stays for the next call). */
static int intent_settle(struct state *s, struct settled *out) {
  struct reserve_intent *in = &s->gs.intent;
  struct reserve_grant_entry *g;
  unsigned long long now;
  if (pool_file_read(in->node, in->size_kb, "nr_hugepages", &now) != 0) return -1;
  out->came = now > in->before ? now - in->before : 0;
  if (out->came > in->delta) out->came = in->delta;
  out->charged = out->came;
  if (out->came > 0 && out->came < in->delta) {
    (void)pool_write_nr(in->node, in->size_kb, in->before);
    if (pool_file_read(in->node, in->size_kb, "nr_hugepages", &now) == 0)
      out->charged = now > in->before ? (now - in->before < in->delta ? now - in->before : in->delta) : 0;
  }
  out->now = now;
  if (out->charged > 0) {
    g = grant_find(&s->gs, in->uid, in->node, in->size_kb);
    if (g == NULL) {
      if (s->gs.n >= RESERVE_MAX_GRANTS) {
        errno = ENOSPC;
        return -1;
      }
      g = &s->gs.g[s->gs.n++];
      g->uid = in->uid;
      g->node = in->node;
      g->size_kb = in->size_kb;
      g->pages = 0;
    }
    g->pages += out->charged;
  }
  in->active = 0;
  return state_write(s);
}

/* An intent found by a locked call: its helper was killed (or could not
 * write the table) between growing the pool and recording the grant. */
static int intent_reconcile(const struct reserve_caller *who, struct state *s) {
  struct reserve_intent in = s->gs.intent;
  struct settled r;
  char node[16];
  reserve_node_name(node, sizeof node, in.node);
  if (intent_settle(s, &r) != 0) {
    int e = errno;
    reserve_audit(who,
                  "action=reconcile for_uid=%lu size=%ukB node=%s before=%llu delta=%llu outcome=error reason=\"%s\"",
                  (unsigned long)in.uid, in.size_kb, node, in.before, in.delta, strerror(e));
    errno = e;
    return -1;
  }
  reserve_audit(who,
                "action=reconcile for_uid=%lu size=%ukB node=%s before=%llu delta=%llu after=%llu charged=%llu "
                "outcome=%s",
                (unsigned long)in.uid, in.size_kb, node, in.before, in.delta, r.now, r.charged,
                r.charged == in.delta ? "charged"
                : r.charged == 0      ? "undone"
                                      : "partial");
  return 0;
}

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

/* The site limits for delta more pages.  Returns 0, or -1 with the reason. */
static int grant_limits(const struct reserve_config *c, const struct reserve_caller *who,
                        const struct reserve_request *rq, const struct reserve_grants *gs, unsigned long long delta,
                        char *msg, size_t msglen) {
  struct meminfo mi;
  unsigned long long user_2m = 0, delta_kb = delta * rq->size_kb;
  char node[16];
  size_t i;
  reserve_node_name(node, sizeof node, rq->node);
  for (i = 0; i < gs->n; i++)
    if (gs->g[i].uid == who->uid) user_2m += gs->g[i].pages * (gs->g[i].size_kb / RESERVE_PAGE_2M);
  if (user_2m + delta * (rq->size_kb / RESERVE_PAGE_2M) > c->max_pages) {
    snprintf(msg, msglen, "limit max_pages: you would hold %llu 2 MB pages, the site allows %llu",
             user_2m + delta * (rq->size_kb / RESERVE_PAGE_2M), c->max_pages);
    return -1;
  }
  if (meminfo_read(&mi) != 0) {
    snprintf(msg, msglen, "cannot read meminfo");
    return -1;
  }
  if ((mi.hugetlb_kb + delta_kb) * 1000 > mi.total_kb * c->max_permille) { /* both < 2^51: no overflow */
    snprintf(msg, msglen, "limit max_fraction: hugetlb memory would be %llu kB of %llu kB, the site allows %u/1000",
             mi.hugetlb_kb + delta_kb, mi.total_kb, c->max_permille);
    return -1;
  }
  if (mi.avail_kb < delta_kb || mi.avail_kb - delta_kb < c->min_free_mb * 1024) {
    snprintf(msg, msglen, "limit min_free_mb: only %llu MB available, %llu MB must stay free", mi.avail_kb / 1024,
             c->min_free_mb);
    return -1;
  }
  if (rq->node < 0) return 0;
  /* The same limits for the node's own memory: a node pool must not take
   * a whole node's memory even when the machine as a whole has plenty. */
  if (node_meminfo_read(rq->node, &mi) != 0) {
    snprintf(msg, msglen, "cannot read the meminfo of node %s", node);
    return -1;
  }
  if ((mi.hugetlb_kb + delta_kb) * 1000 > mi.total_kb * c->max_permille) {
    snprintf(msg, msglen,
             "limit max_fraction on node %s: its hugetlb memory would be %llu kB of %llu kB, the site allows %u/1000",
             node, mi.hugetlb_kb + delta_kb, mi.total_kb, c->max_permille);
    return -1;
  }
  if (mi.avail_kb < delta_kb || mi.avail_kb - delta_kb < c->min_free_mb * 1024) {
    snprintf(msg, msglen, "limit min_free_mb on node %s: only %llu MB free there, %llu MB must stay free", node,
             mi.avail_kb / 1024, c->min_free_mb);
    return -1;
  }
  return 0;
}

/* With the lock held: decide, write the intent, grow the pool, settle. */
static int grant_locked(const struct reserve_config *c, const struct reserve_caller *who,
                        const struct reserve_request *rq, struct state *s, struct grant_log *l, char *msg,
                        size_t msglen) {
  struct pool_state st;
  struct reserve_grant_entry *g;
  struct settled r;
  unsigned long long cur, delta;
  char node[16];
  int e;
  reserve_node_name(node, sizeof node, rq->node);
  l->outcome = "refused";
  l->reason = 1;
  if (pool_read(rq->node, rq->size_kb, &st) != 0) {
    snprintf(msg, msglen, "no %u kB pool on node %s", rq->size_kb, node);
    return RESERVE_FAIL;
  }
  g = grant_find(&s->gs, who->uid, rq->node, rq->size_kb);
  cur = g != NULL ? g->pages : 0;
  if (rq->pages <= cur) {
    snprintf(msg, msglen, "you already hold %llu pages of %u kB on node %s", cur, rq->size_kb, node);
    *l = (struct grant_log){"unchanged", 1, st.nr, st.nr, 0, cur, NULL, 0};
    return RESERVE_OK;
  }
  delta = rq->pages - cur;
  if (grant_limits(c, who, rq, &s->gs, delta, msg, msglen) != 0) return RESERVE_FAIL;
  if (g == NULL && s->gs.n >= RESERVE_MAX_GRANTS) {
    snprintf(msg, msglen, "grant table full");
    return RESERVE_FAIL;
  }
  s->gs.intent = (struct reserve_intent){1, who->uid, rq->node, rq->size_kb, st.nr, delta, rq->pages};
  if (state_write(s) != 0) {
    snprintf(msg, msglen, "cannot record the grant (%s); nothing changed", strerror(errno));
    return RESERVE_FAIL;
  }
  (void)pool_write_nr(rq->node, rq->size_kb, st.nr + delta); /* a short or failed write: settled below */
  if (intent_settle(s, &r) != 0) {
    e = errno;
    (void)pool_write_nr(rq->node, rq->size_kb, st.nr); /* the intent stays: the next call settles the rest */
    snprintf(msg, msglen, "cannot record the grant (%s); pool restored", strerror(e));
    l->outcome = "error";
    return RESERVE_FAIL;
  }
  *l = (struct grant_log){"ok", 1, st.nr, r.now, r.charged, 0, NULL, 0};
  if (r.charged == delta) {
    snprintf(msg, msglen, "granted: you hold %llu pages of %u kB on node %s (pool %llu -> %llu)", rq->pages,
             rq->size_kb, node, st.nr, r.now);
    return RESERVE_OK;
  }
  l->outcome = "shortfall";
  l->restored = r.charged == 0 ? "yes" : "no";
  if (r.charged == 0)
    snprintf(msg, msglen, "the kernel allocated only %llu of %llu pages; pool restored to %llu", r.came, delta, st.nr);
  else
    snprintf(msg, msglen,
             "the kernel allocated only %llu of %llu pages; pool COULD NOT BE RESTORED to %llu: you are charged "
             "for the %llu pages that stayed",
             r.came, delta, st.nr, r.charged);
  return RESERVE_FAIL;
}

int reserve_grant(const struct reserve_config *c, const struct reserve_caller *who, const struct reserve_request *rq,
                  char *msg, size_t msglen) {
  struct state s;
  struct grant_log l = {"error", 0, 0, 0, 0, 0, NULL, 1};
  int rc;
  rc = state_open(who, &s, 1, msg, msglen);
  if (rc == 0) {
    rc = grant_locked(c, who, rq, &s, &l, msg, msglen);
    state_close(&s);
  } else {
    rc = rc == -2 ? RESERVE_BUSY : RESERVE_FAIL;
  }
  grant_audit(who, rq, &l, msg);
  return rc;
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
  unsigned long long plan[RESERVE_MAX_GRANTS];
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

/* ---- status ---- */

static void status_size(int fd, unsigned size_kb) {
  struct pool_state st;
  int nodes[RESERVE_MAX_NODE + 1];
  size_t n, i;
  if (pool_read(-1, size_kb, &st) != 0) return;
  dprintf(fd, "%u kB pages, all nodes: total %llu free %llu reserved %llu surplus %llu\n", size_kb, st.nr, st.free,
          st.resv, st.surplus);
  n = node_list(nodes, sizeof nodes / sizeof nodes[0]);
  for (i = 0; i < n; i++)
    if (pool_read(nodes[i], size_kb, &st) == 0)
      dprintf(fd, "  node %d: total %llu free %llu surplus %llu\n", nodes[i], st.nr, st.free, st.surplus);
}

/* Printed after the lock is dropped: a caller that stops reading its
 * output must not hold up everybody else. */
int reserve_status(const struct reserve_caller *who, int fd) {
  struct state s;
  char err[256], node[16];
  size_t i;
  int any = 0;
  status_size(fd, RESERVE_PAGE_2M);
  status_size(fd, RESERVE_PAGE_1G);
  if (state_open(who, &s, 0, err, sizeof err) != 0) {
    dprintf(fd, "grants: %s\n", err);
    return RESERVE_FAIL;
  }
  state_close(&s); /* s.gs is our copy */
  dprintf(fd, "your grants (uid %lu):\n", (unsigned long)who->uid);
  for (i = 0; i < s.gs.n; i++) {
    const struct reserve_grant_entry *g = &s.gs.g[i];
    if (g->uid != who->uid || g->pages == 0) continue;
    reserve_node_name(node, sizeof node, g->node);
    dprintf(fd, "  %llu pages of %u kB on node %s\n", g->pages, g->size_kb, node);
    any = 1;
  }
  if (!any) dprintf(fd, "  none\n");
  return RESERVE_OK;
}
