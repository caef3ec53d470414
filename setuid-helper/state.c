/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE /* flock, pwrite, pidfd_open */
/* hugepool-reserve: the lock, the grant table (its intent record: intent.c),
 * the Slurm job registry.  Rules kept:
 *
 *  1. No symlink is followed and no file is created in the state directory:
 *     the lock and the table are opened O_NOFOLLOW, made by the installer.
 *  2. One lock (flock on <state>/lock) serializes every change; a reader
 *     takes it shared.  A caller waits at most RESERVE_LOCK_WAIT_MS.
 *  3. How a lock holder is recovered: after the wait, the root side kills
 *     every holder in /proc/locks whose effective gid is the lock file's
 *     group (only the setgid helper runs with it), pinned by pidfd_open and
 *     signalled by pidfd_send_signal.  Name and state are not looked at,
 *     and its status is read whatever its length (any number of groups).
 *  4. The table is written whole (one pwrite, checked), truncated and
 *     synced; if any step fails, the previous table is written back.  Its
 *     end line's checksum makes a torn table corrupt, and a corrupt table
 *     stops everything (fail closed).
 *  5. A grant's or a release's intent is in the table, synced, before the
 *     pool changes; the next exclusive open settles one left behind (intent.c: a
 *     grant's pages charged or given back; a release's shrink finished
 *     where the pool has room, and pages that still cannot go charged
 *     again: every page in the pool stays someone's) and audits it, before
 *     anything else is done.
 *  6. Resource limits are checked before the lock is taken: RLIMIT_FSIZE
 *     (a short write would tear the table) and RLIMIT_NOFILE (EMFILE must
 *     not hide a process from the in-use count).
 *  7. The job registry is read fail closed: a registry that exists but
 *     cannot be listed, or an entry that cannot be read or parsed, is an
 *     error, never "no jobs".  An entry is written whole (a rename).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/pidfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "helper.h"

/* ---- resource limits ---- */

/* The soft limit raised to the hard one if it is below min; 1 if the
 * limit is then at least min, else 0. */
static int rlimit_at_least(int resource, rlim_t min) {
  struct rlimit rl;
  if (getrlimit(resource, &rl) != 0) return 0;
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < min) {
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(resource, &rl) != 0 || getrlimit(resource, &rl) != 0) return 0;
  }
  return rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= min;
}

/* Linux cuts a write at the caller's RLIMIT_FSIZE even when it overwrites
 * existing bytes (with SIGXFSZ blocked the write is just short), so a caller
 * could tear the table at an offset of its choosing. */
int reserve_fsize_ok(void) { return rlimit_at_least(RLIMIT_FSIZE, RESERVE_GRANTS_MAX); }

/* Every file open at once (stdio, lock, table, /proc and one of its
 * entries, a pool file, syslog, a pidfd) with room to spare.  With fewer,
 * opens fail with EMFILE; that must never read as "nothing". */
#define RESERVE_MIN_NOFILE 32

int reserve_nofile_ok(void) { return rlimit_at_least(RLIMIT_NOFILE, RESERVE_MIN_NOFILE); }

/* ---- the lock ---- */

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
    char type[16], id[16], dev[64], path[64];
    struct proc_status ps;
    unsigned long long pid;
    int pidfd, fd;
    /* "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; waiters have "->" */
    if (sscanf(line, "%15s %15s %*s %*s %20s %63s", id, type, path, dev) != 4) continue;
    if (strcmp(type, "FLOCK") != 0 || strcmp(dev, want) != 0) continue;
    if (reserve_parse_count(path, 1ULL << 31, &pid) != 0 || pid == (unsigned long long)getpid()) continue;
    pidfd = pidfd_open((pid_t)pid, 0);
    if (pidfd < 0) continue;
    snprintf(path, sizeof path, "/proc/%llu/status", pid);
    fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
    /* read whole, however many groups its caller has (sysfs_proc_status_read) */
    if (fd >= 0 && sysfs_proc_status_read(fd, &ps) == 0 && ps.egid == st.st_gid &&
        pidfd_send_signal(pidfd, 0, NULL, 0) == 0 && pidfd_send_signal(pidfd, SIGKILL, NULL, 0) == 0) {
      killed++;
      reserve_audit(who, "action=recover pid=%llu outcome=killed reason=\"a hugepool-reserve held the lock for %d s\"",
                    pid, RESERVE_LOCK_WAIT_MS / 1000);
    }
    if (fd >= 0) close(fd);
    close(pidfd);
  }
  (void)fclose(f);
  return killed;
}

int state_open(const struct reserve_caller *who, struct state *s, int exclusive, char *err, size_t errlen) {
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
  if (sysfs_read_fd(s->grants_fd, s->text, sizeof s->text, &len) != 0 ||
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

/* ---- the grant table ---- */

#ifndef HUGEPOOL_RESERVE_TEST_ROOT /* the test build can make it fail (fake.c) */
int state_table_sync(int fd) { return fsync(fd); }
#endif

/* One pwrite of the whole table, checked for its full length, then
 * truncate and fsync.  If any of the three fails, the previous table is
 * written back (so what is read next is what was there before, and the
 * pool can be put back to agree with it) and -1 returned with errno.
 * Whatever happens in between (a kill, a failed undo), the end line's
 * checksum makes a mix of new and old bytes a corrupt table, never a
 * different valid one; a new table followed by an old tail is the new table. */
int state_write(struct state *s) {
  static char buf[RESERVE_GRANTS_MAX];
  size_t len = reserve_format_grants(&s->gs, buf, sizeof buf);
  ssize_t w;
  int e;
  if (len == 0) {
    errno = ENOSPC;
    return -1;
  }
  w = pwrite(s->grants_fd, buf, len, 0);
  if (w == (ssize_t)len && ftruncate(s->grants_fd, (off_t)len) == 0 && state_table_sync(s->grants_fd) == 0) {
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

void state_close(struct state *s) {
  close(s->grants_fd);
  close(s->lock_fd); /* drops the flock */
}

struct reserve_grant_entry *state_grant_find(struct reserve_grants *gs, uid_t uid, int node, unsigned size_kb) {
  size_t i;
  for (i = 0; i < gs->n; i++)
    if (gs->g[i].uid == uid && gs->g[i].node == node && gs->g[i].size_kb == size_kb) return &gs->g[i];
  return NULL;
}

/* ---- Slurm job registry ---- */

/* The registry directory, open, if it is one only root can change: a
 * directory (not a link to one) owned by root, writable by nobody else.
 * Anyone else could remove entries (their jobs' limits would no longer be
 * counted) or plant links: -1 with EPERM (ENOENT: there is none). */
static int registry_dir(void) {
  struct stat st;
  int dfd = open(RESERVE_JOBS_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) return -1;
  if (fstat(dfd, &st) != 0 || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    close(dfd);
    errno = EPERM;
    return -1;
  }
  return dfd;
}

/* Written to a temporary name (not a number: never read as an entry) and
 * renamed, so a reader sees a whole entry or none, never an empty one. */
int reserve_job_register(unsigned long job, uid_t uid) {
  char name[32], tmp[32], buf[32];
  int dfd, fd, n, e;
  ssize_t w;
  (void)mkdir(RESERVE_JOBS_DIR, 0755); /* parent made at boot (tmpfiles); EEXIST is fine */
  if ((dfd = registry_dir()) < 0) return -1;
  snprintf(name, sizeof name, "%lu", job);
  snprintf(tmp, sizeof tmp, ".%lu.new", job);
  fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0644);
  if (fd < 0) {
    e = errno;
    close(dfd);
    errno = e;
    return -1;
  }
  n = snprintf(buf, sizeof buf, "%lu\n", (unsigned long)uid);
  w = write(fd, buf, (size_t)n);
  if (close(fd) != 0) w = -1;
  if (w == n && renameat(dfd, tmp, dfd, name) == 0) {
    close(dfd);
    return 0;
  }
  e = w == n || w < 0 ? errno : EIO;
  (void)unlinkat(dfd, tmp, 0);
  close(dfd);
  errno = e;
  return -1;
}

int reserve_job_unregister(unsigned long job) {
  char path[256];
  snprintf(path, sizeof path, RESERVE_JOBS_DIR "/%lu", job);
  return unlink(path) == 0 || errno == ENOENT ? 0 : -1;
}

/* Only root-owned regular files count: the registry is written by the
 * plugin.  1: an entry (*owner), 0: not one (gone meanwhile, not a root-owned
 * regular file), -1: unreadable or damaged (errno). */
static int registry_owner(int dir, const char *name, unsigned long long *owner) {
  char buf[32];
  size_t len;
  struct stat st;
  int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK), rc = 0;
  if (fd < 0) return errno == ENOENT ? 0 : -1; /* ENOENT: its job ended while we read */
  if (fstat(fd, &st) != 0 || sysfs_read_fd(fd, buf, sizeof buf, &len) != 0) {
    rc = -1;
  } else if (S_ISREG(st.st_mode) && st.st_uid == 0) {
    if (len > 0 && buf[len - 1] == '\n') buf[--len] = '\0';
    rc = reserve_parse_count(buf, 0xfffffffeULL, owner) == 0 ? 1 : -1;
    if (rc < 0) errno = EUCLEAN; /* a damaged entry: whose job it is cannot be known */
  }
  close(fd);
  return rc;
}

/* Fail closed: a registry that cannot be listed (other than absent), or an
 * entry that cannot be read, is an error, never "no jobs". */
int state_registry_jobs(uid_t uid, unsigned long except_job, unsigned long *jobs, size_t cap) {
  int dfd = registry_dir(), n = 0, r;
  DIR *d;
  struct dirent *e;
  if (dfd < 0) return errno == ENOENT ? 0 : -1; /* no registry: no jobs; one anyone may change: an error */
  if ((d = fdopendir(dfd)) == NULL) {
    r = errno;
    close(dfd);
    errno = r;
    return -1;
  }
  for (errno = 0; (e = readdir(d)) != NULL; errno = 0) {
    unsigned long long job, owner;
    if (reserve_parse_count(e->d_name, 1ULL << 40, &job) != 0 || job == except_job) continue;
    if ((r = registry_owner(dirfd(d), e->d_name, &owner)) < 0) break;
    if (r == 0 || owner != uid) continue;
    if ((size_t)n == cap) {
      errno = E2BIG;
      break;
    }
    jobs[n++] = (unsigned long)job;
  }
  r = errno;
  closedir(d);
  errno = r;
  return r != 0 ? -1 : n;
}

int reserve_user_has_job(uid_t uid, unsigned long except_job) {
  unsigned long one;
  int n = state_registry_jobs(uid, except_job, &one, 1);
  return n < 0 && errno == E2BIG ? 1 : n; /* E2BIG: more than one */
}
