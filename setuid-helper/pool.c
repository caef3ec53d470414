#define _DEFAULT_SOURCE /* dirfd, flock, dprintf, pwrite */
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
#include <stdbool.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
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
    /* Fake tree only: play the kernel.  Free pages follow the pool size, and
     * a "capacity" file caps what can be allocated (memory running out). */
    unsigned long long old = 0, fr = 0, cap;
    char p2[512];
    if (read_ull(path, &old) != 0) return -1;
    if (pool_path(p2, sizeof p2, node, size_kb, "capacity") == 0 && read_ull(p2, &cap) == 0 && nr > cap) nr = cap;
    if (pool_path(p2, sizeof p2, node, size_kb, "free_hugepages") != 0 || read_ull(p2, &fr) != 0) return -1;
    fr = nr >= old ? fr + (nr - old) : (fr > old - nr ? fr - (old - nr) : 0);
    if (write_ull(p2, fr) != 0) return -1;
  }
#endif
  return write_ull(path, nr);
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

/* Hugetlb memory (kB, every page size) mapped by processes whose real or
 * effective uid is the caller's: "HugetlbPages:" of /proc/<pid>/status, which
 * every user may read.  Processes that end while we look are skipped.
 * Returns 0, or -1 if /proc cannot be read (the release then keeps all). */
static int caller_hugetlb_kb(uid_t uid, unsigned long long *kb) {
  DIR *d = opendir(SYS_ROOT "/proc");
  struct dirent *e;
  *kb = 0;
  if (d == NULL) return -1;
  while ((e = readdir(d)) != NULL) {
    char path[64], buf[8192];
    unsigned long long pid, ruid, euid, use;
    const char *p;
    size_t len;
    int fd, rc;
    if (reserve_parse_count(e->d_name, 1ULL << 31, &pid) != 0) continue;
    snprintf(path, sizeof path, "%llu/status", pid);
    fd = openat(dirfd(d), path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) continue;
    rc = read_fd_all(fd, buf, sizeof buf, &len);
    close(fd);
    if (rc != 0) continue;
    p = status_line(buf, "Uid:");
    if (p == NULL || status_number(&p, 0xffffffffULL, &ruid) != 0 || status_number(&p, 0xffffffffULL, &euid) != 0)
      continue;
    if (ruid != uid && euid != uid) continue;
    p = status_line(buf, "HugetlbPages:");
    if (p == NULL || status_number(&p, 1ULL << 50, &use) != 0) continue;
    *kb += use;
  }
  closedir(d);
  return 0;
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

/* Root side (the Slurm prolog/epilog, or root running the helper) only.
 * A user may SIGSTOP their own helper while it holds the lock (it keeps the
 * caller's real uid, so the caller may signal it) and so block everybody.
 * The kernel lists every flock holder's pid in /proc/locks; a holder that is
 * a helper process (name, and the lock file's group as its effective gid) and
 * is stopped (state T) is killed.  That is safe at any point: a stopped
 * process is never inside a write (it stops on its way back to user space),
 * and the helper's order of operations tolerates a kill between any two
 * steps (see README.md).  Only helpers can hold the lock: the lock file is
 * root:<group> 0660 and the helper never forks or execs.
 * The real /proc even in a test build: these are real processes. */
static int kill_stopped_holders(const struct reserve_caller *who, int lock_fd) {
  char want[64], line[256];
  struct stat st;
  FILE *f;
  int killed = 0;
  if (fstat(lock_fd, &st) != 0) return 0;
  snprintf(want, sizeof want, "%02x:%02x:%lu", major(st.st_dev), minor(st.st_dev), (unsigned long)st.st_ino);
  f = fopen("/proc/locks", "re");
  if (f == NULL) return 0;
  while (fgets(line, sizeof line, f) != NULL) {
    char type[16], id[16], dev[64], stat_path[64], buf[2048], *p;
    unsigned long long pid, egid = ~0ULL, dummy;
    const char *q;
    size_t len;
    /* "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; waiters have "->" */
    if (sscanf(line, "%15s %15s %*s %*s %20s %63s", id, type, stat_path, dev) != 4) continue;
    if (strcmp(type, "FLOCK") != 0 || strcmp(dev, want) != 0) continue;
    if (reserve_parse_count(stat_path, 1ULL << 31, &pid) != 0 || pid == (unsigned long long)getpid()) continue;
    snprintf(stat_path, sizeof stat_path, "/proc/%llu/stat", pid);
    if (read_small(stat_path, buf, sizeof buf, &len) != 0) continue;
    p = strrchr(buf, ')'); /* "pid (comm) T ...": comm may hold anything, the state follows the last ')' */
    if (p == NULL || strstr(buf, " (hugepool-reserv) ") != strchr(buf, ' ') || p[1] != ' ' || p[2] != 'T') continue;
    snprintf(stat_path, sizeof stat_path, "/proc/%llu/status", pid);
    if (read_small(stat_path, buf, sizeof buf, &len) != 0) continue;
    q = status_line(buf, "Gid:");
    if (q == NULL || status_number(&q, 0xffffffffULL, &dummy) != 0 || status_number(&q, 0xffffffffULL, &egid) != 0 ||
        egid != st.st_gid)
      continue;
    if (kill((pid_t)pid, SIGKILL) == 0) {
      killed++;
      reserve_audit(who, "action=recover pid=%llu outcome=killed reason=\"a stopped hugepool-reserve held the lock\"",
                    pid);
    }
  }
  (void)fclose(f);
  return killed;
}

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
  s->lock_fd = open(RESERVE_STATE_DIR "/lock", O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
  if (s->lock_fd < 0) {
    snprintf(err, errlen, "cannot open %s/lock: %s (is the helper installed?)", RESERVE_STATE_DIR, strerror(errno));
    return -1;
  }
  while (flock(s->lock_fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) goto fail_errno;
    if (waited >= RESERVE_LOCK_WAIT_MS) {
      /* Root: kill a stopped helper holding the lock and wait once more. */
      if (geteuid() == 0 && rounds < 3 && kill_stopped_holders(who, s->lock_fd) > 0) {
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
  return 0;
fail_errno:
  snprintf(err, errlen, "state %s: %s", RESERVE_STATE_DIR, strerror(errno));
fail:
  if (s->grants_fd >= 0) close(s->grants_fd);
  close(s->lock_fd);
  return -1;
}

/* One pwrite of the whole table, checked for its full length, then truncate.
 * A write that comes up short is undone by writing the previous table back.
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
  if (w != (ssize_t)len) {
    e = w < 0 ? errno : EIO;
    if (w > 0 && pwrite(s->grants_fd, s->text, s->text_len, 0) == (ssize_t)s->text_len)
      (void)!ftruncate(s->grants_fd, (off_t)s->text_len);
    errno = e;
    return -1;
  }
  memcpy(s->text, buf, len); /* what a later undo in this call goes back to */
  s->text_len = len;
  if (ftruncate(s->grants_fd, (off_t)len) != 0) return -1;
  return fsync(s->grants_fd);
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

static void node_name(char *buf, size_t cap, int node) {
  if (node < 0)
    snprintf(buf, cap, "any");
  else
    snprintf(buf, cap, "%d", node);
}

/* ---- grant ---- */

int reserve_grant(const struct reserve_config *c, const struct reserve_caller *who, const struct reserve_request *rq,
                  char *msg, size_t msglen) {
  struct state s;
  struct pool_state st;
  struct meminfo mi;
  struct reserve_grant_entry *g;
  unsigned long long cur, delta, user_2m = 0, delta_kb, target, got, back;
  char node[16], err[256];
  size_t i;
  int rc;
  node_name(node, sizeof node, rq->node);
#define REFUSE(...)                                                                                           \
  do {                                                                                                        \
    snprintf(msg, msglen, __VA_ARGS__);                                                                       \
    reserve_audit(who, "action=grant size=%ukB node=%s request=%llu granted=0 outcome=refused reason=\"%s\"", \
                  rq->size_kb, node, rq->pages, msg);                                                         \
    state_close(&s);                                                                                          \
    return RESERVE_FAIL;                                                                                      \
  } while (0)
  if ((rc = state_open(who, &s, 1, err, sizeof err)) != 0) {
    snprintf(msg, msglen, "%s", err);
    reserve_audit(who, "action=grant size=%ukB node=%s request=%llu granted=0 outcome=error reason=\"%s\"", rq->size_kb,
                  node, rq->pages, msg);
    return rc == -2 ? RESERVE_BUSY : RESERVE_FAIL;
  }
  if (pool_read(rq->node, rq->size_kb, &st) != 0) REFUSE("no %u kB pool on node %s", rq->size_kb, node);
  g = grant_find(&s.gs, who->uid, rq->node, rq->size_kb);
  cur = g != NULL ? g->pages : 0;
  if (rq->pages <= cur) {
    snprintf(msg, msglen, "you already hold %llu pages of %u kB on node %s", cur, rq->size_kb, node);
    reserve_audit(who,
                  "action=grant size=%ukB node=%s request=%llu before=%llu after=%llu granted=0 holds=%llu "
                  "outcome=unchanged",
                  rq->size_kb, node, rq->pages, st.nr, st.nr, cur);
    state_close(&s);
    return RESERVE_OK;
  }
  delta = rq->pages - cur;
  delta_kb = delta * rq->size_kb;
  for (i = 0; i < s.gs.n; i++)
    if (s.gs.g[i].uid == who->uid) user_2m += s.gs.g[i].pages * (s.gs.g[i].size_kb / RESERVE_PAGE_2M);
  if (user_2m + delta * (rq->size_kb / RESERVE_PAGE_2M) > c->max_pages)
    REFUSE("limit max_pages: you would hold %llu 2 MB pages, the site allows %llu",
           user_2m + delta * (rq->size_kb / RESERVE_PAGE_2M), c->max_pages);
  if (meminfo_read(&mi) != 0) REFUSE("cannot read meminfo");
  if ((mi.hugetlb_kb + delta_kb) * 1000 > mi.total_kb * c->max_permille) /* both < 2^51: no overflow */
    REFUSE("limit max_fraction: hugetlb memory would be %llu kB of %llu kB, the site allows %u/1000",
           mi.hugetlb_kb + delta_kb, mi.total_kb, c->max_permille);
  if (mi.avail_kb < delta_kb || mi.avail_kb - delta_kb < c->min_free_mb * 1024)
    REFUSE("limit min_free_mb: only %llu MB available, %llu MB must stay free", mi.avail_kb / 1024, c->min_free_mb);
  if (rq->node >= 0) {
    /* The same limits for the node's own memory: a node pool must not take
     * a whole node's memory even when the machine as a whole has plenty. */
    if (node_meminfo_read(rq->node, &mi) != 0) REFUSE("cannot read the meminfo of node %s", node);
    if ((mi.hugetlb_kb + delta_kb) * 1000 > mi.total_kb * c->max_permille)
      REFUSE("limit max_fraction on node %s: its hugetlb memory would be %llu kB of %llu kB, the site allows %u/1000",
             node, mi.hugetlb_kb + delta_kb, mi.total_kb, c->max_permille);
    if (mi.avail_kb < delta_kb || mi.avail_kb - delta_kb < c->min_free_mb * 1024)
      REFUSE("limit min_free_mb on node %s: only %llu MB free there, %llu MB must stay free", node, mi.avail_kb / 1024,
             c->min_free_mb);
  }

  target = st.nr + delta;
  if (pool_write_nr(rq->node, rq->size_kb, target) != 0 ||
      pool_file_read(rq->node, rq->size_kb, "nr_hugepages", &got) != 0)
    got = 0; /* treated as a shortfall: restore below */
  if (got < target) {
    int restored = pool_write_nr(rq->node, rq->size_kb, st.nr) == 0 &&
                   pool_file_read(rq->node, rq->size_kb, "nr_hugepages", &back) == 0 && back == st.nr;
    snprintf(msg, msglen, "the kernel allocated only %llu of %llu pages; pool %s to %llu",
             got > st.nr ? got - st.nr : 0, delta, restored ? "restored" : "COULD NOT BE RESTORED", st.nr);
    reserve_audit(who,
                  "action=grant size=%ukB node=%s request=%llu before=%llu after=%llu granted=0 outcome=shortfall "
                  "restored=%s",
                  rq->size_kb, node, rq->pages, st.nr, restored ? st.nr : got, restored ? "yes" : "no");
    state_close(&s);
    return RESERVE_FAIL;
  }
  if (g == NULL) {
    if (s.gs.n >= RESERVE_MAX_GRANTS) {
      pool_write_nr(rq->node, rq->size_kb, st.nr);
      REFUSE("grant table full");
    }
    g = &s.gs.g[s.gs.n++];
    g->uid = who->uid;
    g->node = rq->node;
    g->size_kb = rq->size_kb;
  }
  g->pages = rq->pages;
  if (state_write(&s) != 0) {
    pool_write_nr(rq->node, rq->size_kb, st.nr);
    REFUSE("cannot record the grant (%s); pool restored", strerror(errno));
  }
  snprintf(msg, msglen, "granted: you hold %llu pages of %u kB on node %s (pool %llu -> %llu)", rq->pages, rq->size_kb,
           node, st.nr, got);
  reserve_audit(who, "action=grant size=%ukB node=%s request=%llu before=%llu after=%llu granted=%llu outcome=ok",
                rq->size_kb, node, rq->pages, st.nr, got, delta);
  state_close(&s);
  return RESERVE_OK;
#undef REFUSE
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
 * The pool only knows how many pages are free, not whose: a release must not
 * shrink it by pages the caller's own processes still map, or those would be
 * taken out of other users' granted-but-unmapped pages while the caller keeps
 * its own, uncharged.  So each of the caller's pools keeps (still charged) as
 * many pages as the caller's processes map in hugetlb memory, up to the grant
 * (the kernel reports one total for every page size and node: each pool
 * keeps enough to cover all of it, the safe direction). */
int reserve_release(const struct reserve_caller *who, char *msg, size_t msglen) {
  struct state s;
  struct pool_state st[RESERVE_MAX_GRANTS];
  unsigned long long plan[RESERVE_MAX_GRANTS], in_use_kb = 0;
  char err[256], node[16];
  size_t i, used = 0;
  int rc = RESERVE_OK, any = 0, planned = 0, short_release = 0, procs_ok;
  msg[0] = '\0';
  if ((rc = state_open(who, &s, 1, err, sizeof err)) != 0) {
    snprintf(msg, msglen, "%s", err);
    reserve_audit(who, "action=release outcome=error reason=\"%s\"", msg);
    return rc == -2 ? RESERVE_BUSY : RESERVE_FAIL;
  }
  procs_ok = caller_hugetlb_kb(who->uid, &in_use_kb) == 0;
  for (i = 0; i < s.gs.n; i++) { /* decide, change nothing */
    struct reserve_grant_entry *g = &s.gs.g[i];
    unsigned long long keep;
    plan[i] = 0;
    if (g->uid != who->uid || g->pages == 0) continue;
    any = 1;
    node_name(node, sizeof node, g->node);
    keep = !procs_ok ? g->pages : (in_use_kb + g->size_kb - 1) / g->size_kb;
    if (keep > g->pages) keep = g->pages;
    if (keep > 0) {
      reserve_audit(who,
                    "action=release size=%ukB node=%s request=%llu kept=%llu outcome=kept reason=\"%s %llu kB of "
                    "hugetlb memory\"",
                    g->size_kb, node, g->pages, keep, procs_ok ? "your processes map" : "cannot read /proc; assumed",
                    in_use_kb);
      append(msg, msglen, &used,
             "kept %llu of %llu pages of %u kB on node %s: your processes still map %llu kB of "
             "hugetlb memory (release again when they have ended)\n",
             keep, g->pages, g->size_kb, node, in_use_kb);
      rc = RESERVE_FAIL;
      if (keep == g->pages) continue;
    }
    if (pool_read(g->node, g->size_kb, &st[i]) != 0) {
      reserve_audit(who, "action=release size=%ukB node=%s request=%llu outcome=error reason=\"pool unreadable\"",
                    g->size_kb, node, g->pages);
      append(msg, msglen, &used, "kept %llu pages of %u kB on node %s: pool unreadable\n", g->pages, g->size_kb, node);
      rc = RESERVE_FAIL;
    } else if (pool_spare(&st[i]) < g->pages - keep || st[i].nr < g->pages - keep) {
      /* Never shrink below what is in use or reserved. */
      reserve_audit(who,
                    "action=release size=%ukB node=%s request=%llu before=%llu after=%llu released=0 "
                    "outcome=refused reason=\"only %llu free unreserved pages\"",
                    g->size_kb, node, g->pages - keep, st[i].nr, st[i].nr, pool_spare(&st[i]));
      append(msg, msglen, &used,
             "kept %llu pages of %u kB on node %s: pages are in use or reserved (only %llu spare)\n", g->pages - keep,
             g->size_kb, node, pool_spare(&st[i]));
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
    unsigned long long got, released;
    if (plan[i] == 0) continue;
    node_name(node, sizeof node, g->node);
    /* Read again: a node's pool and the global one are the same pages, so
     * an earlier shrink in this loop changed both. */
    bool shrunk = pool_read(g->node, g->size_kb, &st[i]) == 0 && pool_spare(&st[i]) >= plan[i] &&
                  st[i].nr >= plan[i] && pool_write_nr(g->node, g->size_kb, st[i].nr - plan[i]) == 0 &&
                  pool_file_read(g->node, g->size_kb, "nr_hugepages", &got) == 0;
    if (!shrunk) got = st[i].nr;
    released = st[i].nr > got ? st[i].nr - got : 0;
    if (released > plan[i]) released = plan[i];
    reserve_audit(who, "action=release size=%ukB node=%s request=%llu before=%llu after=%llu released=%llu outcome=%s",
                  g->size_kb, node, plan[i], st[i].nr, got, released, released == plan[i] ? "ok" : "partial");
    append(msg, msglen, &used, "released %llu pages of %u kB on node %s (pool %llu -> %llu)\n", released, g->size_kb,
           node, st[i].nr, got);
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
  DIR *d;
  struct dirent *e;
  if (pool_read(-1, size_kb, &st) != 0) return;
  dprintf(fd, "%u kB pages, all nodes: total %llu free %llu reserved %llu surplus %llu\n", size_kb, st.nr, st.free,
          st.resv, st.surplus);
  d = opendir(SYS_ROOT "/sys/devices/system/node");
  if (d == NULL) return;
  while ((e = readdir(d)) != NULL) {
    unsigned long long node;
    if (strncmp(e->d_name, "node", 4) != 0 || reserve_parse_count(e->d_name + 4, RESERVE_MAX_NODE, &node) != 0)
      continue;
    if (pool_read((int)node, size_kb, &st) != 0) continue;
    dprintf(fd, "  node %llu: total %llu free %llu surplus %llu\n", node, st.nr, st.free, st.surplus);
  }
  closedir(d);
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
    node_name(node, sizeof node, g->node);
    dprintf(fd, "  %llu pages of %u kB on node %s\n", g->pages, g->size_kb, node);
    any = 1;
  }
  if (!any) dprintf(fd, "  none\n");
  return RESERVE_OK;
}
