/* SPDX-License-Identifier: BSD-3-Clause */
#define _POSIX_C_SOURCE 200809L /* lstat, O_NOFOLLOW, O_CLOEXEC */
/* hugepool-reserve: loading the site config, which parse.c's
 * reserve_parse_config then reads (that parser does no I/O, so the doctor,
 * the unit tests and the fuzz target call it alone).  Rules kept:
 *
 *  1. No symlink is followed: the config is opened O_NOFOLLOW and must be
 *     a regular root-owned file, not writable by group or others, in a
 *     directory of the same kind; anything else refuses everything.
 *  2. The path is compiled in (RESERVE_CONF_FILE), never taken from the
 *     caller; a file longer than RESERVE_CONF_MAX is refused, not cut.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helper.h"

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
  if (lstat(dir, &st) != 0 && errno == ENOENT) {
    snprintf(err, errlen,
             "config directory %s is missing: hugepool-reserve is not set up on this node (an administrator "
             "installs the hugepool-helper package, or runs setuid-helper/install.sh as root)",
             dir);
    return -1;
  }
  if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || !owned_by_root_not_writable(&st)) {
    snprintf(err, errlen, "config directory %s must be a root-owned directory not writable by group or others", dir);
    return -1;
  }
  fd = open(RESERVE_CONF_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0 && errno == ENOENT) {
    snprintf(err, errlen,
             "config %s is missing: hugepool-reserve is not set up on this node (an administrator installs the "
             "hugepool-helper package, or runs setuid-helper/install.sh as root)",
             RESERVE_CONF_FILE);
    return -1;
  }
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
  rc = sysfs_read_fd(fd, buf, sizeof buf, &len);
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
