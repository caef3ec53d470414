/* SPDX-License-Identifier: BSD-3-Clause */
/* The OS layer, continued: small files (sysfs, /proc), stderr, the
 * statistics file and the fork handshake's pipe.  Same contract as os.c
 * (os.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "os.h"

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

void os_write_stderr(const char *text, size_t len) { (void)os_write_all(STDERR_FILENO, text, len); }

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
  int rc = fstat(fd, &st) != 0 ? -1 : !S_ISREG(st.st_mode) || st.st_uid != geteuid() ? (errno = EEXIST, -1) : 0;
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
  if (lstat(path, &st) != 0) return -1;
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
