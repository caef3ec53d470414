/* SPDX-License-Identifier: BSD-3-Clause */
#define _DEFAULT_SOURCE /* O_NOFOLLOW, O_CLOEXEC */
/* hugepool-reserve: the Slurm plugin's files beside a job's registry entry
 * (root side only; linked into the plugin alone).  Rules kept:
 *
 *  1. Written by root only, with O_NOFOLLOW; never created anywhere but
 *     the compiled-in registry directory.
 *  2. Read only if root-owned regular files (O_NOFOLLOW, O_NONBLOCK: a
 *     FIFO planted there cannot block the plugin).
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helper.h"
#include "jobfiles.h"

static void jobfile_path(char *buf, size_t cap, uint32_t job, const char *ext) {
  snprintf(buf, cap, RESERVE_JOBS_DIR "/%u%s", (unsigned)job, ext);
}

void jobfile_write(uint32_t job, const char *ext, const char *text) {
  char path[256];
  int fd;
  jobfile_path(path, sizeof path, job, ext);
  fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return;
  if (write(fd, text, strlen(text)) < 0) { /* the audit log has the reason anyway */
  }
  close(fd);
}

int jobfile_read(uint32_t job, const char *ext, char *buf, size_t cap) {
  char path[256];
  struct stat st;
  ssize_t n;
  int fd;
  jobfile_path(path, sizeof path, job, ext);
  fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return -1;
  n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 ? read(fd, buf, cap - 1) : -2;
  close(fd);
  buf[n > 0 ? n : 0] = '\0';
  return n == -2 ? -1 : 0;
}

void jobfile_drop(uint32_t job, const char *const *exts) {
  char path[256];
  for (; *exts != NULL; exts++) jobfile_path(path, sizeof path, job, *exts), unlink(path);
}
