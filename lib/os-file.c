/* SPDX-License-Identifier: BSD-3-Clause */
/* The OS layer, continued: the files behind node-shared segments (memfd or
 * an unnamed file on a hugetlbfs mount), taking a peer's descriptor, and
 * finding a hugetlbfs mount.  Same contract as os.c (os.h); nothing
 * here calls malloc. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "os-kernel.h"
#include "os.h"

/* ---- node-shared segments: hugetlb files other processes can map ------- */

#ifndef MFD_HUGE_2MB
#define MFD_HUGE_2MB (21U << 26)
#endif
#ifndef MFD_HUGE_1GB
#define MFD_HUGE_1GB (30U << 26)
#endif
#ifndef HUGETLBFS_MAGIC
#define HUGETLBFS_MAGIC 0x958458f6
#endif

int os_huge_file(size_t page_size, const char *dir) {
  int fd;
  if (dir) {
    /* O_TMPFILE: the file never has a name, so no kill at any moment can
     * leave one behind on the mount; 0600 keeps other users out. */
    fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  } else {
    unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB;
    flags |= page_size == HP_1G ? MFD_HUGE_1GB : MFD_HUGE_2MB;
    fd = sys_memfd_create("hugepool-segment", (unsigned)flags);
    /* A memfd is created 0777 whatever the umask: only its owner may
     * reopen it through /proc/<pid>/fd. */
    if (fd >= 0 && fchmod(fd, 0600) != 0) {
      int err = errno;
      close(fd);
      errno = err;
      return -1;
    }
  }
  return fd;
}

int os_huge_file_size(int fd, size_t size) {
  if (ftruncate(fd, (off_t)size) != 0) return -1;
  /* Sealed against shrinking, so no peer can truncate pages away under
   * the others' mappings (a SIGBUS at their next touch).  A file on a
   * hugetlbfs mount comes sealed against sealing (EPERM): only processes
   * of its owner, who could as well write into the pages, can resize it. */
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0 && errno != EPERM) return -1;
  return 0;
}

void *os_map_shared(int fd, size_t size) {
  /* No MAP_NORESERVE: mapping a hugetlb file reserves its pages for the
   * file (once, whoever maps it later), so a shortage is ENOMEM here. */
  void *p = sys_mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? NULL : p;
}

int os_peer_fd(long pid, int fd) {
  if (pid <= 0 || pid > INT32_MAX || fd < 0) {
    errno = EINVAL;
    return -1;
  }
  /* pidfd_getfd asks for ptrace-attach rights (Yama may refuse them between
   * sibling processes); reopening /proc/<pid>/fd/<fd> asks for ptrace-read
   * rights on the owner and then the file's own 0600 mode.  Both refuse
   * another user's process. */
  int pidfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
  if (pidfd >= 0) {
    int got = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
    int err = errno;
    close(pidfd);
    if (got >= 0) {
      (void)fcntl(got, F_SETFD, FD_CLOEXEC);
      return got;
    }
    if (err == ESRCH || err == EBADF) {
      errno = err;
      return -1;
    }
  } else if (errno == ESRCH) {
    return -1;
  }
  char path[64];
  int n = snprintf(path, sizeof(path), "/proc/%ld/fd/%d", pid, fd);
  if (n < 0 || (size_t)n >= sizeof(path)) {
    errno = EINVAL;
    return -1;
  }
  return open(path, O_RDWR | O_CLOEXEC);
}

int os_huge_file_info(int fd, os_file_info *out) {
  struct stat st;
  struct statfs sfs;
  if (sys_fstat(fd, &st) != 0 || fstatfs(fd, &sfs) != 0) return -1;
  out->is_hugetlb = S_ISREG(st.st_mode) && sfs.f_type == (__typeof__(sfs.f_type))HUGETLBFS_MAGIC;
  out->uid = (long)st.st_uid;
  out->mode = (unsigned)(st.st_mode & 07777);
  out->ino = (uint64_t)st.st_ino;
  out->dev = (uint64_t)st.st_dev;
  out->size = (uint64_t)st.st_size;
  out->page_size = (size_t)sfs.f_bsize;
  return 0;
}

long os_euid(void) { return (long)geteuid(); }

long os_pid(void) { return (long)getpid(); }

/* Finds a hugetlbfs mount of this page size in /proc/self/mountinfo
 * (fields: ... mount-point ... " - " fstype source super-options).  The
 * kernel's own table, read without malloc; libhugetlbfs is not loaded for
 * this, as its constructor would run in every process that maps a segment. */
int os_find_hugetlbfs(size_t page_size, char *buf, size_t len) {
  static char info[65536];
  static pthread_mutex_t info_lock = PTHREAD_MUTEX_INITIALIZER;
  int found = -1;
  pthread_mutex_lock(&info_lock);
  if (os_read_file("/proc/self/mountinfo", info, sizeof(info)) < 0) {
    pthread_mutex_unlock(&info_lock);
    return -1;
  }
  size_t default_page = HP_2M; /* the x86-64 default huge page size */
  for (char *line = info; *line && found != 0;) {
    char *next = strchr(line, '\n');
    if (next)
      *next++ = '\0';
    else
      next = line + strlen(line);
    char *sep = strstr(line, " - hugetlbfs ");
    if (sep) {
      /* the mount point is the fifth space-separated field */
      char *p = line;
      for (int field = 0; field < 4 && p; field++) p = strchr(p, ' ') ? strchr(p, ' ') + 1 : NULL;
      char *end = p ? strchr(p, ' ') : NULL;
      size_t page = default_page;
      const char *opt = strstr(sep, "pagesize=");
      if (opt) {
        unsigned long long v = 0;
        char unit = 0;
        if (sscanf(opt + 9, "%llu%c", &v, &unit) >= 1) {
          if (unit == 'M' || unit == 'm')
            v <<= 20;
          else if (unit == 'G' || unit == 'g')
            v <<= 30;
          else if (unit == 'K' || unit == 'k')
            v <<= 10;
          page = (size_t)v;
        }
      }
      /* mount points with escaped characters (\040) are skipped */
      if (p && end && page == page_size && (size_t)(end - p) < len && !memchr(p, '\\', (size_t)(end - p))) {
        memcpy(buf, p, (size_t)(end - p));
        buf[end - p] = '\0';
        found = 0;
      }
    }
    line = next;
  }
  pthread_mutex_unlock(&info_lock);
  if (found != 0) errno = ENOENT;
  return found;
}
