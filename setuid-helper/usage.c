/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE /* dirfd, setfsgid */
/* hugepool-reserve: what users' processes hold of the pool, for a release.
 * The kernel's HugetlbPages counts a page once per process that maps it: a
 * 2-page segment mapped by two processes, or by a process and its vfork
 * child (one mm, two /proc entries), reads as 4 pages.  Rules kept:
 *
 *  1. Another user's pages lower what is promised to them only when they
 *     are surely theirs, each counted once (a lower bound: counting more
 *     would let a release take pages promised to them):
 *     - only processes whose real and effective uids are both theirs, with
 *       HugetlbPages, read per mapping from /proc/<pid>/smaps; one whose
 *       smaps does not parse counts nothing;
 *     - if another user's smaps cannot be read (the setgid helper reads
 *       none), no smaps count, only the reservation counters of every other
 *       user's isolated Slurm jobs' cgroups (the kernel charges a page once,
 *       to one cgroup): nothing for what runs outside such jobs;
 *     - a shared mapping holds pages of its file (memfd, SysV SHM_HUGETLB
 *       segment, hugetlbfs file, MAP_SHARED anonymous memory), named by
 *       device and inode: mappings of one file whose offsets overlap count
 *       as the largest of them, however many processes map it; a file
 *       mapped by two users' processes counts for neither;
 *     - a private mapping counts only its pages mapped once
 *       (Private_Hugetlb: a page a fork shares until it is written counts
 *       for nobody);
 *     - one smaps is read per mm: a process that shares it with one read
 *       before (vfork, posix_spawn, CLONE_VM; kcmp KCMP_VM), or whose mm
 *       cannot be compared, is not read at all (its mappings are that mm's);
 *     - other users' smaps are read for at most RESERVE_SCAN_OTHERS_MS in
 *       all (checked at every 4 kB read): past it nothing more counts, and
 *       a file cut short counts nothing.  So no user can make a release,
 *       root's included, hold the lock longer by what they map.
 *  2. The caller's pages are counted over, never under (what they keep
 *     charged): HugetlbPages of every process whose real or effective uid
 *     is theirs, however shared, plus the blocks of every hugetlb memfd
 *     such a process holds open (usage-files.c).
 *  3. Fail closed: /proc that cannot be listed, or a status that cannot be
 *     read, is an error (the release keeps everything); only a process that
 *     ended while it was read is skipped.  So is a walk that passes
 *     RESERVE_SCAN_MS (ETIMEDOUT): the caller's count is never cut short.
 *  4. Nothing the caller controls can block us or be opened: smaps is
 *     opened O_NOFOLLOW below /proc/<pid>; descriptors are read as
 *     usage-files.c says.  The setgid helper reads its caller's descriptors
 *     with the caller's gid as its file-system gid (the kernel's ptrace
 *     rule), restored before it returns.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "helper.h"

#define USAGE_MAX_MAPS 8192 /* shared mappings recorded; more are dropped (a lower bound stays one) */
#define USAGE_MAX_MMS 1024  /* processes whose mm is remembered; more count no private pages */

/* A shared hugetlb mapping of another user's: file, offsets, pages in it. */
struct map_rec {
  unsigned long long dev, ino, off, end, kb;
  uid_t uid;
};

struct scan {
  struct usage *u;
  uid_t caller;
  size_t nmaps, nmms, nfiles;
  struct map_rec maps[USAGE_MAX_MAPS];
  pid_t mm_pid[USAGE_MAX_MMS];
  uid_t mm_uid[USAGE_MAX_MMS];
  struct usage_files files; /* the caller's open hugetlb memfds (usage-files.c) */
  int unread; /* another user's process could not be read */
  long long others_until, until; /* CLOCK_MONOTONIC ms: the budgets (helper.h) */
};

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#ifndef HUGEPOOL_RESERVE_TEST_ROOT /* the test build's fake kernel (fake.c) plays this part */
int usage_mm_compare(pid_t a, pid_t b) { return (int)syscall(SYS_kcmp, a, b, KCMP_VM, 0UL, 0UL); }
#endif

static int usage_index(const struct usage *u, uid_t uid) {
  size_t i;
  for (i = 0; i < u->n; i++)
    if (u->uid[i] == uid) return (int)i;
  return -1;
}

/* ---- smaps, one mapping at a time ---- */

struct vma {
  int open, shared;
  unsigned long long start, end, off, dev, ino, kb_shared, kb_private;
};

/* Lowercase hex digits up to `stop`, which is passed. */
static int hex_field(const char **p, char stop, unsigned long long *v) {
  unsigned long long x = 0;
  int n = 0;
  for (; **p != stop; (*p)++, n++) {
    char c = **p;
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0 || n >= 16) return -1;
    x = x << 4 | (unsigned)d;
  }
  (*p)++;
  *v = x;
  return n > 0 ? 0 : -1;
}

/* "start-end perms offset major:minor inode [path]" */
static int vma_header(const char *p, struct vma *m) {
  unsigned long long major, minor;
  char num[24];
  size_t n = 0;
  memset(m, 0, sizeof *m);
  if (hex_field(&p, '-', &m->start) != 0 || hex_field(&p, ' ', &m->end) != 0 || m->end <= m->start) return -1;
  if (strlen(p) < 5 || p[4] != ' ' || (p[3] != 's' && p[3] != 'p')) return -1;
  m->shared = p[3] == 's';
  p += 5;
  if (hex_field(&p, ' ', &m->off) != 0 || hex_field(&p, ':', &major) != 0 || hex_field(&p, ' ', &minor) != 0) return -1;
  while (*p >= '0' && *p <= '9' && n + 1 < sizeof num) num[n++] = *p++;
  num[n] = '\0';
  if ((*p != ' ' && *p != '\0') || reserve_parse_count(num, ~0ULL, &m->ino) != 0) return -1;
  m->dev = major << 32 | minor;
  m->open = 1;
  return 0;
}

/* "Key:   N kB" of the keys we need; 0 if the line is another. */
static int vma_field(const char *line, struct vma *m) {
  static const char *const keys[] = {"Shared_Hugetlb:", "Private_Hugetlb:"};
  char num[24];
  size_t i, n = 0;
  for (i = 0; i < 2; i++) {
    const char *p = line + strlen(keys[i]);
    if (strncmp(line, keys[i], strlen(keys[i])) != 0) continue;
    while (*p == ' ') p++;
    while (*p >= '0' && *p <= '9' && n + 1 < sizeof num) num[n++] = *p++;
    num[n] = '\0';
    if (strcmp(p, " kB") != 0 || reserve_parse_count(num, 1ULL << 50, i ? &m->kb_private : &m->kb_shared) != 0)
      return -1;
  }
  return 0;
}

/* One process of another user, as far as it is read: its shared mappings
 * go to the table, its private pages mapped once to *private_kb. */
struct proc_read {
  struct scan *sc;
  uid_t uid;
  unsigned long long private_kb;
  struct vma m;
};

static void vma_done(struct proc_read *r) {
  struct vma *m = &r->m;
  struct scan *sc = r->sc;
  if (!m->open) return;
  m->open = 0;
  if (!m->shared) {
    r->private_kb += m->kb_private;
  } else if (m->kb_shared + m->kb_private > 0 && sc->nmaps < USAGE_MAX_MAPS) {
    struct map_rec x = {m->dev, m->ino, m->off, m->off + (m->end - m->start), m->kb_shared + m->kb_private, r->uid};
    sc->maps[sc->nmaps++] = x;
  }
}

/* A header starts with a hex digit, a field with an uppercase letter. */
static int smaps_line(const char *line, int over, struct proc_read *r) {
  int header = (line[0] >= '0' && line[0] <= '9') || (line[0] >= 'a' && line[0] <= 'f');
  if (header) {
    vma_done(r);
    return vma_header(line, &r->m);
  }
  return over || !r->m.open ? 0 : vma_field(line, &r->m);
}

/* Reads fd line by line (a line longer than the buffer keeps its head:
 * a long path after a header's fields, which are all that is needed). */
static int smaps_read(int fd, struct proc_read *r) {
  char chunk[4096], line[256];
  size_t n = 0;
  int over = 0;
  for (;;) {
    ssize_t got = read(fd, chunk, sizeof chunk), i;
    if (now_ms() > r->sc->others_until) return -1; /* over budget: what was read is dropped */
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return -1;
    if (got == 0) break;
    for (i = 0; i < got; i++) {
      if (chunk[i] != '\n') {
        if (n + 1 < sizeof line)
          line[n++] = chunk[i];
        else
          over = 1;
        continue;
      }
      line[n] = '\0';
      if (smaps_line(line, over, r) != 0) return -1;
      n = 0;
      over = 0;
    }
  }
  if (n != 0) return -1; /* cut short */
  vma_done(r);
  return 0;
}

/* ---- processes that share an mm ---- */

/* 1 if pid shares its mm with a process of uid counted before, or that
 * cannot be told (an earlier one ended: its mm may live on in pid); else 0,
 * and pid is remembered. */
static int mm_seen(struct scan *sc, pid_t pid, uid_t uid) {
  size_t i;
  for (i = 0; i < sc->nmms; i++) {
    int order = sc->mm_uid[i] == uid ? usage_mm_compare(sc->mm_pid[i], pid) : 1;
    if (order != 1 && order != 2) return 1; /* 0: the same mm; -1: cannot tell */
  }
  if (sc->nmms == USAGE_MAX_MMS) return 1;
  sc->mm_pid[sc->nmms] = pid;
  sc->mm_uid[sc->nmms++] = uid;
  return 0;
}

/* Another user's process (rule 1): nothing if it cannot be read. */
static void other_read(struct scan *sc, int procfd, pid_t pid, uid_t uid, int k) {
  struct proc_read r;
  char path[64];
  size_t mark = sc->nmaps;
  int fd;
  memset(&r, 0, sizeof r);
  r.sc = sc;
  r.uid = uid;
  snprintf(path, sizeof path, "%ld/smaps", (long)pid);
  if (now_ms() > sc->others_until) return; /* over budget: counts nothing */
  if ((fd = openat(procfd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY)) < 0) {
    sc->unread |= errno != ENOENT && errno != ESRCH; /* (not ended: not ours to read) */
    return;
  }
  if (mm_seen(sc, pid, uid)) { /* its mm's mappings are read (or not to be counted) */
    close(fd);
    return;
  }
  if (smaps_read(fd, &r) != 0) {
    sc->nmaps = mark; /* what it had added is not sure */
    r.private_kb = 0;
  }
  close(fd);
  sc->u->kb[k] += r.private_kb;
}

/* ---- jobs' cgroups: what the setgid helper can read of other users ---- */

/* Pages a user's registered jobs hold: each job cgroup's reservation
 * counter (rsvd.current, every page size), which the kernel charges once a
 * page, to one cgroup, whatever maps it.  Anything unreadable counts 0. */
static unsigned long long jobs_kb(const struct cg_hier *h, uid_t uid) {
  static const unsigned sizes[] = {RESERVE_PAGE_2M, RESERVE_PAGE_1G};
  unsigned long jobs[RESERVE_MAX_JOBS];
  unsigned long long kb = 0, bytes;
  int n = state_registry_jobs(uid, 0, jobs, RESERVE_MAX_JOBS), i, fd;
  size_t s;
  for (i = 0; i < n; i++) {
    if ((fd = cg_job_open(h, jobs[i])) < 0) continue;
    for (s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
      if (cg_job_limit_read(fd, h, sizes[s], 0, "current", &bytes) == 0 && bytes != ~0ULL) kb += bytes >> 10;
    close(fd);
  }
  return kb;
}

/* Where another user's process could not be read (the setgid helper reads
 * none), no user's smaps count: their isolated jobs' cgroups do (a page
 * read in one user's smaps may be charged to another's job). */
static void jobs_sum(struct scan *sc) {
  struct cg_hier h;
  char why[256];
  size_t k;
  for (k = 0; k < sc->u->n; k++) sc->u->kb[k] = 0;
  if (cg_detect(&h, why, sizeof why) != 0) return;
  for (k = 0; k < sc->u->n; k++) sc->u->kb[k] = jobs_kb(&h, sc->u->uid[k]);
}

/* ---- the sum ---- */

static int rec_order(const void *a, const void *b) {
  const struct map_rec *x = a, *y = b;
  if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
  if (x->ino != y->ino) return x->ino < y->ino ? -1 : 1;
  return x->off < y->off ? -1 : x->off > y->off;
}

/* Each file once: overlapping mappings count as the largest, files mapped
 * by two users' processes for neither. */
static void shared_sum(struct scan *sc) {
  size_t i = 0, j;
  qsort(sc->maps, sc->nmaps, sizeof sc->maps[0], rec_order);
  while (i < sc->nmaps) {
    unsigned long long kb = 0, end = 0, most = 0;
    int k, mixed = 0;
    for (j = i; j < sc->nmaps && sc->maps[j].dev == sc->maps[i].dev && sc->maps[j].ino == sc->maps[i].ino; j++) {
      const struct map_rec *x = &sc->maps[j];
      mixed |= x->uid != sc->maps[i].uid;
      if (j > i && x->off >= end) kb += most, most = 0; /* a run of overlapping mappings ends */
      if (x->end > end) end = x->end;
      if (x->kb > most) most = x->kb;
    }
    kb += most;
    if (!mixed && (k = usage_index(sc->u, sc->maps[i].uid)) >= 0) sc->u->kb[k] += kb;
    i = j;
  }
}

/* One entry of /proc: 0, or -1 with errno (its status cannot be read). */
static int proc_take(struct scan *sc, int procfd, pid_t pid) {
  char path[64];
  struct proc_status ps;
  int fd, k;
  if (now_ms() > sc->until) {
    errno = ETIMEDOUT; /* the caller's count cannot be finished: fail closed */
    return -1;
  }
  snprintf(path, sizeof path, "%ld/status", (long)pid);
  fd = openat(procfd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
  if (fd < 0 || sysfs_proc_status_read(fd, &ps) != 0) {
    int err = errno;
    if (fd >= 0) close(fd);
    errno = err;
    return err == ENOENT || err == ESRCH ? 0 : -1; /* ended while we looked */
  }
  close(fd);
  if (ps.ruid == sc->caller || ps.euid == sc->caller) {
    sc->u->caller_kb += ps.hugetlb_kb;
    sc->u->caller_kb += usage_files_kb(&sc->files, pid);
  }
  if (ps.hugetlb_kb > 0 && ps.ruid == ps.euid && (k = usage_index(sc->u, (uid_t)ps.ruid)) >= 0)
    other_read(sc, procfd, pid, (uid_t)ps.ruid, k);
  return 0;
}

static int procs_walk(struct scan *sc) {
  DIR *d = opendir(SYS_ROOT "/proc");
  struct dirent *e;
  int rc = 0, err = 0;
  if (d == NULL) return -1;
  for (;;) {
    unsigned long long pid;
    errno = 0;
    if ((e = readdir(d)) == NULL) {
      err = errno; /* 0 at the end of the directory */
      rc = err != 0 ? -1 : 0;
      break;
    }
    if (reserve_parse_count(e->d_name, 1ULL << 31, &pid) != 0) continue;
    if (proc_take(sc, dirfd(d), (pid_t)pid) != 0) {
      err = errno;
      rc = -1;
      break;
    }
  }
  closedir(d);
  errno = err;
  return rc;
}

int usage_read(const struct reserve_grants *gs, uid_t caller, struct usage *u) {
  struct scan *sc = calloc(1, sizeof *sc); /* ~300 kB: not on a plugin thread's stack */
  gid_t fsgid;
  size_t i;
  int rc, err;
  memset(u, 0, sizeof *u);
  if (sc == NULL) return -1;
  for (i = 0; i < gs->n; i++)
    if (gs->g[i].uid != caller && usage_index(u, gs->g[i].uid) < 0) u->uid[u->n++] = gs->g[i].uid;
  sc->u = u;
  sc->caller = caller;
  usage_files_init(&sc->files);
  sc->until = now_ms() + RESERVE_SCAN_MS;
  sc->others_until = now_ms() + RESERVE_SCAN_OTHERS_MS;
  fsgid = (gid_t)setfsgid(getgid()); /* rule 4; root: 0 either way */
  rc = procs_walk(sc);
  err = errno;
  (void)setfsgid(fsgid);
  if (rc == 0 && (gid_t)setfsgid((gid_t)-1) != fsgid) rc = -1, err = EPERM; /* never write with the wrong group */
  if (rc == 0 && sc->unread) jobs_sum(sc);
  if (rc == 0 && !sc->unread) shared_sum(sc);
  free(sc);
  errno = err;
  return rc;
}
