/* SPDX-License-Identifier: BSD-3-Clause */
/* hugetlb_share anon|memfd|sysv|clonevm N: N 2 MB hugetlb pages mapped by
 * two processes until stdin closes, so that the kernel's HugetlbPages counts
 * each page twice:
 *   anon     MAP_SHARED | MAP_ANONYMOUS | MAP_HUGETLB, then fork
 *   memfd    a hugetlb memfd mapped MAP_SHARED, then fork
 *   sysv     a SysV SHM_HUGETLB segment (already removed), then fork
 *   clonevm  MAP_PRIVATE | MAP_HUGETLB, then a CLONE_VM child (one mm, two
 *            /proc entries: what vfork and posix_spawn make)
 * Prints "shared N" once both map every page. */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

static char *pages;
static size_t len;
static int ready[2];

static void wait_stdin(void) {
  char c;
  while (read(0, &c, 1) > 0) {
  }
}

static void touch(void) {
  size_t i;
  for (i = 0; i < len; i += 1u << 21) pages[i] = 1;
}

static int child(void *arg) {
  (void)arg;
  touch(); /* (a CLONE_VM child touches its parent's pages: already there) */
  if (write(ready[1], "x", 1) != 1) _exit(1);
  wait_stdin();
  _exit(0);
}

static char *map_pages(const char *mode) {
  if (strcmp(mode, "sysv") == 0) {
    int id = shmget(IPC_PRIVATE, len, IPC_CREAT | SHM_HUGETLB | 0600);
    char *p = id < 0 ? (char *)-1 : shmat(id, NULL, 0);
    if (id >= 0) shmctl(id, IPC_RMID, NULL); /* gone once both detach */
    return p == (char *)-1 ? MAP_FAILED : p;
  }
  if (strcmp(mode, "memfd") == 0) {
    int fd = memfd_create("hugetlb_share", MFD_HUGETLB);
    if (fd < 0 || ftruncate(fd, (off_t)len) != 0) return MAP_FAILED;
    return mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  return mmap(NULL, len, PROT_READ | PROT_WRITE,
              (strcmp(mode, "anon") == 0 ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
}

int main(int argc, char *argv[]) {
  static char stack[1 << 16] __attribute__((aligned(16)));
  int vm, status;
  pid_t pid;
  char c;
  if (argc != 3) return 2;
  vm = strcmp(argv[1], "clonevm") == 0;
  len = strtoul(argv[2], NULL, 10) << 21;
  if (pipe(ready) != 0 || (pages = map_pages(argv[1])) == MAP_FAILED) {
    perror("hugetlb_share");
    return 1;
  }
  touch();
  pid = vm ? clone(child, stack + sizeof stack, CLONE_VM | SIGCHLD, NULL) : fork();
  if (pid == 0) child(NULL);
  if (pid < 0 || read(ready[0], &c, 1) != 1) return 1;
  printf("shared %s\n", argv[2]);
  fflush(stdout);
  wait_stdin();
  kill(pid, SIGTERM);
  return waitpid(pid, &status, 0) == pid ? 0 : 1;
}
