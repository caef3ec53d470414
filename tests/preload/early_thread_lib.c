/* SPDX-License-Identifier: BSD-3-Clause */
/* A library whose constructor starts a thread that allocates, as OpenBLAS's
 * thread pool does: the dynamic loader runs it before the interposer's own
 * constructor, so the thread's first malloc starts the preload and it keeps
 * allocating and freeing while the interposer's constructor loads the small
 * heap (preload/dlopen.c).  Blocks from before the load (glibc's) and after
 * (the heap's) are freed in any order; each carries a pattern checked at its
 * free.  early_thread.c stops the thread and reads its counts. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "early_thread.h"

#define SLOTS 1024
static unsigned char *slot[SLOTS];
static size_t slot_len[SLOTS];
static atomic_bool stop;
static atomic_ulong ops, bad;
static pthread_t worker;
static int started;

static void put(unsigned i, size_t len) {
  unsigned char *p = malloc(len);
  if (!p) {
    atomic_fetch_add(&bad, 1);
    return;
  }
  memset(p, (int)(i * 7 + len) & 0xff, len);
  slot[i] = p;
  slot_len[i] = len;
}

static void drop(unsigned i) {
  unsigned char *p = slot[i];
  if (!p) return;
  unsigned char want = (unsigned char)((i * 7 + slot_len[i]) & 0xff);
  for (size_t k = 0; k < slot_len[i]; k += 61)
    if (p[k] != want) {
      atomic_fetch_add(&bad, 1);
      break;
    }
  free(p);
  slot[i] = NULL;
}

static void *run(void *arg) {
  (void)arg;
  uint64_t x = 88172645463325252ull;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    unsigned i = (unsigned)(x % SLOTS);
    drop(i);
    put(i, 16 + (size_t)((x >> 20) % 4080));
    atomic_fetch_add_explicit(&ops, 1, memory_order_relaxed);
  }
  for (unsigned i = 0; i < SLOTS; i++) drop(i);
  return NULL;
}

__attribute__((constructor)) static void start(void) { started = pthread_create(&worker, NULL, run, NULL) == 0; }

long early_thread_stop(unsigned long *ops_out) {
  if (!started) return -1;
  atomic_store(&stop, true);
  pthread_join(worker, NULL);
  *ops_out = atomic_load(&ops);
  return (long)atomic_load(&bad);
}

unsigned long early_thread_ops(void) { return atomic_load(&ops); }
