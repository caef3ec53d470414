/* SPDX-License-Identifier: BSD-3-Clause */
/* The OS layer, continued: small files (sysfs, /proc), stderr, the
 * statistics file and the fork handshake's pipe.  Same contract as os.c
 * (os.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "os.h"
#include "os-kernel.h"

ssize_t os_read_file(const char *path, char *buf, size_t len) {
  if (len == 0) {
    errno = EINVAL;
    return -1;
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t done = 0;
  while (done < len - 1) {
    ssize_t n = read(fd, buf + done, len - 1 - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      errno = err;
      return -1;
    }
    if (n == 0) break;
    done += (size_t)n;
  }
  close(fd);
  buf[done] = '\0';
  return (ssize_t)done;
}

int os_write_all(int fd, const void *data, size_t len) {
  const char *p = data;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) {
      errno = EIO;
      return -1;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

/* The stderr the process started with.  GNU sort, dd and cp close fd 2
 * before they exit, and daemons point it elsewhere: the exit report goes
 * where the user was looking when the program began.  Rules kept:
 *  1. A duplicate of fd 2 is taken once, at start-up, where the process
 *     asked for a report or a trace (init.c), close-on-exec (a
 *     program this one executes never sees it) and high (F_DUPFD_CLOEXEC at
 *     or above a floor under the soft RLIMIT_NOFILE, at most 999: programs
 *     take the lowest free descriptor, and a higher floor would grow the
 *     kernel's descriptor table in every process).
 *  2. It is written only while it is still the file it was (st_dev, st_ino,
 *     st_rdev): a program that closed it and opened something else under
 *     its number never gets our text in its file.
 *  3. The report (os_write_report) goes there, else to fd 2.  A warning
 *     (os_write_stderr) goes to fd 2 as the program has it now (a program
 *     that captures its stderr captures hugepool's lines too), and there
 *     only when fd 2 is closed (where nothing was kept, nowhere: as glibc's
 *     own messages then).
 *  4. Nothing is kept when fd 2 was closed at start-up (a daemon's choice). */
static int stderr_fd = -1;
static struct stat stderr_id;

static bool kept_usable(void) {
  struct stat st;
  return stderr_fd >= 0 && sys_fstat(stderr_fd, &st) == 0 && st.st_dev == stderr_id.st_dev &&
         st.st_ino == stderr_id.st_ino && st.st_rdev == stderr_id.st_rdev;
}

void os_keep_stderr(void) {
  struct stat st;
  struct rlimit lim;
  if (stderr_fd >= 0 || sys_fstat(STDERR_FILENO, &st) != 0 || getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  rlim_t soft = lim.rlim_cur, floor = soft <= 32 ? soft / 2 : soft - 16;
  if (floor > 999) floor = 999;
  int fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, (int)floor);
  if (fd < 0) return; /* no room up there: fd 2 it is */
  stderr_id = st;
  stderr_fd = fd;
}

void os_write_report(const char *text, size_t len) {
  (void)os_write_all(kept_usable() ? stderr_fd : STDERR_FILENO, text, len);
}

void os_write_stderr(const char *text, size_t len) {
  if (os_write_all(STDERR_FILENO, text, len) != 0 && errno == EBADF && kept_usable())
    (void)os_write_all(stderr_fd, text, len);
}

long long os_coarse_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts); /* vDSO: no system call */
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

long long os_coarse_ms(void) { return os_coarse_ns() / 1000000; }

/* The statistics file: its path may come from the environment and its
 * directory may be shared with other users, who can plant anything at a
 * name a pattern will expand to.  Rules kept:
 *  1. Never block: every open has O_NONBLOCK (a FIFO cannot hang it), and
 *     what was opened must be a regular file of this effective user.
 *  2. Never follow or reuse what is there: files are created with
 *     O_CREAT | O_EXCL | O_NOFOLLOW, never opened as they are.
 *  3. A name already taken is replaced only if it holds a regular file of
 *     this effective user (a previous run's): the text goes to a fresh file
 *     next to it, renamed over it, so nothing is ever written into an
 *     existing file.  Anything else there (a symlink, FIFO, directory,
 *     another user's file) is left as it is: -1 with EEXIST.  A name
 *     swapped between the check and the rename is replaced, not written. */
#define OS_NEW_FILE (O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)

/* Creates path (0644 less the umask), writes data; a file left half
 * written is removed. */
static int os_write_new(const char *path, const char *data, size_t len) {
  int fd = open(path, OS_NEW_FILE, 0644);
  if (fd < 0) return -1;
  struct stat st;
  int rc = sys_fstat(fd, &st) != 0 ? -1 : !S_ISREG(st.st_mode) || st.st_uid != geteuid() ? (errno = EEXIST, -1) : 0;
  if (rc == 0) rc = os_write_all(fd, data, len);
  int err = errno;
  if (close(fd) != 0 && rc == 0) rc = -1, err = errno;
  if (rc != 0) unlink(path);
  errno = err;
  return rc;
}

/* Replaces this user's own regular file at path with a fresh one. */
static int os_replace_own(const char *path, const char *data, size_t len) {
  struct stat st;
  char tmp[4096 + 48];
  if (sys_lstat(path, &st) != 0) return -1;
  if (!S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
    errno = EEXIST;
    return -1;
  }
  for (int i = 0; i < 8; i++) { /* a name taken by someone else: the next */
    if (snprintf(tmp, sizeof tmp, "%s.%ld-%d.tmp", path, (long)getpid(), i) >= (int)sizeof tmp) {
      errno = ENAMETOOLONG;
      return -1;
    }
    if (os_write_new(tmp, data, len) == 0) {
      if (rename(tmp, path) == 0) return 0;
      int err = errno;
      unlink(tmp);
      errno = err;
      return -1;
    }
    if (errno != EEXIST) return -1;
  }
  return -1;
}

int os_write_file(const char *path, const char *data, size_t len) {
  if (os_write_new(path, data, len) == 0) return 0;
  return errno == EEXIST ? os_replace_own(path, data, len) : -1;
}

int os_pipe(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

int os_pipe_read_byte(int fd) {
  char byte;
  ssize_t n;
  do {
    n = read(fd, &byte, 1);
  } while (n < 0 && errno == EINTR);
  return n < 0 ? -1 : (int)n;
}

void os_close(int fd) {
  if (fd >= 0) (void)close(fd); /* on Linux the descriptor is gone even when close fails */
}
