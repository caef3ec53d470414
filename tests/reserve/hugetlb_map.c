/* SPDX-License-Identifier: BSD-3-Clause */
/* hugetlb_map [--noreserve] N [READY RELEASE]: map N 2 MB hugetlb pages
 * (reserved at mmap; with --noreserve MAP_NORESERVE, as code hugepool never
 * is), touch each one and report what the kernel says:
 *   "mapped N hugetlb_kb K"  (K: HugetlbPages of /proc/self/status)
 *   "mmap N: ENOMEM"         (exit 1; any other errno: exit 2)
 *   "SIGBUS"                 (exit 3: a touched page could not be had)
 * With READY and RELEASE: create READY once mapped, hold the pages until
 * RELEASE exists. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void on_sigbus(int sig) {
  (void)sig;
  static const char m[] = "SIGBUS\n";
  (void)!write(1, m, sizeof m - 1);
  _exit(3);
}

static long hugetlb_kb(void) {
  char buf[8192];
  int fd = open("/proc/self/status", O_RDONLY);
  ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
  const char *p;
  if (fd >= 0) close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  p = strstr(buf, "HugetlbPages:");
  return p != NULL ? strtol(p + 13, NULL, 10) : -1;
}

int main(int argc, char *argv[]) {
  size_t n, len, i;
  char *p;
  int noreserve = argc > 1 && strcmp(argv[1], "--noreserve") == 0;
  argc -= noreserve;
  argv += noreserve;
  if (argc != 2 && argc != 4) return 2;
  signal(SIGBUS, on_sigbus);
  n = strtoul(argv[1], NULL, 10);
  len = n << 21;
  p = mmap(NULL, len, PROT_READ | PROT_WRITE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | (noreserve ? MAP_NORESERVE : 0), -1, 0);
  if (p == MAP_FAILED) {
    printf("mmap %zu: %s\n", n, errno == ENOMEM ? "ENOMEM" : strerror(errno));
    return errno == ENOMEM ? 1 : 2;
  }
  for (i = 0; i < len; i += 1u << 21) p[i] = 1;
  printf("mapped %zu hugetlb_kb %ld\n", n, hugetlb_kb());
  fflush(stdout);
  if (argc == 4) {
    int fd = open(argv[2], O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd >= 0) close(fd);
    while (access(argv[3], F_OK) != 0) usleep(50000);
  }
  return 0;
}
