/* SPDX-License-Identifier: BSD-3-Clause */
/* What one guard page costs inside a large malloc'ed buffer: the time of
 * mprotect(PROT_NONE) of 4 KB in a 2 MB page that is still whole.  Under the
 * preload that call splits the 2 MB hugetlb page into 4 KB pages (copy of the
 * page, lib/split.c); on plain glibc it is the system call alone.
 *   hugepool_bench_splitcost [SPLITS [WRITERS]]   (defaults 200 and 0)
 * Buffers of 8 MB (four 2 MB pages), each touched, then one guard page per
 * 2 MB page; WRITERS threads meanwhile store into slots spread over the
 * buffer (never into a guard page).  Prints the median and min / max in us.
 * Needs SPLITS / 4 * 4 + 8 free 2 MB pages under the preload (buffers are
 * freed as it goes: 12 are plenty). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define PAGE2M ((size_t)2 << 20)
#define PAGES 4
#define SLOT_PAGES 16

static unsigned char *_Atomic current; /* the buffer the writers store into */
static atomic_bool stop;
static pthread_mutex_t buffer_lock = PTHREAD_MUTEX_INITIALIZER; /* held while a buffer is freed */

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void *writer(void *arg) {
  size_t w = (size_t)(uintptr_t)arg;
  uint64_t seq = 0;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    pthread_mutex_lock(&buffer_lock);
    unsigned char *b = atomic_load(&current);
    for (int rep = 0; b && rep < 64; rep++)
      for (size_t p = 0; p < PAGES; p++)
        for (size_t j = 0; j < SLOT_PAGES; j++) /* even 4 KB pages: the guard pages are odd */
          *(volatile uint64_t *)(b + p * PAGE2M + (2 + 32 * j) * 4096 + w * 64) = ++seq;
    pthread_mutex_unlock(&buffer_lock);
  }
  return NULL;
}

int main(int argc, char **argv) {
  int splits = argc > 1 ? atoi(argv[1]) : 200;
  int writers = argc > 2 ? atoi(argv[2]) : 0;
  if (splits < PAGES || writers < 0 || writers > 64) {
    fprintf(stderr, "usage: %s [SPLITS>=4 [WRITERS<=64]]\n", argv[0]);
    return 2;
  }
  double *t = calloc((size_t)splits, sizeof(double));
  pthread_t th[64];
  for (int w = 0; w < writers; w++) pthread_create(&th[w], NULL, writer, (void *)(uintptr_t)w);
  int done = 0;
  while (done < splits) {
    void *raw = malloc(PAGES * PAGE2M + 4096);
    unsigned char *b = (unsigned char *)(((uintptr_t)raw + 4095) & ~(uintptr_t)4095);
    memset(b, 1, PAGES * PAGE2M);
    atomic_store(&current, b);
    for (size_t p = 0; p < PAGES && done < splits; p++) {
      unsigned char *guard = b + p * PAGE2M + 33 * 4096;
      double t0 = now_us();
      if (mprotect(guard, 4096, PROT_NONE) != 0) {
        perror("mprotect");
        return 1;
      }
      t[done++] = now_us() - t0;
    }
    pthread_mutex_lock(&buffer_lock);
    atomic_store(&current, NULL);
    pthread_mutex_unlock(&buffer_lock);
    for (size_t p = 0; p < PAGES; p++) /* glibc may hand these bytes out again */
      mprotect(b + p * PAGE2M + 33 * 4096, 4096, PROT_READ | PROT_WRITE);
    free(raw);
  }
  atomic_store(&stop, true);
  for (int w = 0; w < writers; w++) pthread_join(th[w], NULL);
  qsort(t, (size_t)splits, sizeof(double), cmp);
  printf("guard page in a whole 2 MB page, %d writers: median %.1f us [%.1f .. %.1f] over %d calls\n", writers,
         t[splits / 2], t[0], t[splits - 1], splits);
  free(t);
  return 0;
}
