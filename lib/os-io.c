/* SPDX-License-Identifier: BSD-3-Clause */
/* The OS layer, continued: small files (sysfs, /proc), stderr, the
 * statistics file and the fork handshake's pipe.  Same contract as os.c
 * (os.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
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

int os_write_file(const char *path, const char *data, size_t len) {
  /* O_NOFOLLOW: a symlink planted at the path is refused, never written
   * through (the path may come from the environment). */
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return -1;
  int rc = os_write_all(fd, data, len);
  int err = errno;
  if (close(fd) != 0 && rc == 0) return -1;
  errno = err;
  return rc;
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
