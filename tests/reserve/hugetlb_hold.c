/* hugetlb_hold N: keep N 2 MB hugetlb pages in use until stdin closes. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char *argv[]) {
  size_t n, len, i;
  char *p, c;
  if (argc != 2) return 2;
  n = strtoul(argv[1], NULL, 10);
  len = n << 21;
  p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
  if (p == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  for (i = 0; i < len; i += 1u << 21) p[i] = 1;
  printf("held %zu\n", n);
  fflush(stdout);
  while (read(0, &c, 1) > 0) {
  }
  return 0;
}
