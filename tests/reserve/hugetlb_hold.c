/* SPDX-License-Identifier: BSD-3-Clause */
/* hugetlb_hold [--memfd] N: keep N 2 MB hugetlb pages in use until stdin
 * closes.  With --memfd the pages are faulted into a hugetlb memfd and then
 * unmapped: they stay allocated to the descriptor while the process maps
 * nothing (HugetlbPages 0). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char *argv[]) {
  size_t n, len, i;
  char *p, c;
  int memfd = argc == 3 && strcmp(argv[1], "--memfd") == 0, fd = -1;
  if (argc != 2 + memfd) return 2;
  n = strtoul(argv[1 + memfd], NULL, 10);
  len = n << 21;
  if (memfd) {
    fd = memfd_create("hugetlb_hold", MFD_HUGETLB);
    if (fd < 0 || ftruncate(fd, (off_t)len) != 0) {
      perror("memfd_create");
      return 1;
    }
  }
  p = mmap(NULL, len, PROT_READ | PROT_WRITE, memfd ? MAP_SHARED : MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, fd, 0);
  if (p == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  for (i = 0; i < len; i += 1u << 21) p[i] = 1;
  if (memfd && munmap(p, len) != 0) return 1;
  printf("held %zu\n", n);
  fflush(stdout);
  while (read(0, &c, 1) > 0) {
  }
  return 0;
}
