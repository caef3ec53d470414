/* SPDX-License-Identifier: BSD-3-Clause */
/* An unmodified MPI program (built with mpicc.openmpi) that a stale
 * registration would break: rank 0 mallocs a send buffer, fills it with
 * the round's pattern, sends it, frees it, and the next round's malloc of
 * the same size lands at the same address (hugepool's cache hands the same
 * buffer back; with the cache off it is unmapped and mapped again) holding
 * other data.  Rank 1 checks every byte of every round.  Besides, each rank
 * asks what watches munmap in it, with the functions a registration cache
 * uses (looked up at run time, so the program links Open MPI's libmpi alone):
 *  - Open MPI's memory hooks (opal_mem_hooks_register_release, the opal
 *    memory patcher): the release callback an rcache invalidates from;
 *  - UCX's (ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED)), where pml ucx
 *    has loaded libucm;
 * and counts the rounds whose freed buffer's unmapping the callback saw.
 * Prints, per rank:
 *   rank R pages P            (KernelPageSize of the first send buffer, kB)
 *   rank R rounds N same_address S bad B
 *   rank R opal_hooks L unmapped_seen U ucm_hooks M ucm_unmapped_seen V
 * L is opal_mem_hooks_support_level() (3: free and munmap are watched; 0:
 * nothing is; -1: no such function; -2: the callback was refused), M 1
 * when the UCX handler was installed (-1: no libucm loaded).
 *   openmpi_hooks [SIZE_MIB [ROUNDS]] */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_view.h"

/* What munmap hooks reported: a fixed ring, filled without allocating
 * (the callbacks run inside munmap). */
#define RANGES 4096
typedef struct range {
  uintptr_t start, end;
} range;
static range opal_seen[RANGES], ucm_seen[RANGES];
static unsigned opal_count, ucm_count;

static void note(range *ring, unsigned *count, const void *buf, size_t len) {
  unsigned i = __atomic_fetch_add(count, 1, __ATOMIC_RELAXED);
  ring[i % RANGES].start = (uintptr_t)buf;
  ring[i % RANGES].end = (uintptr_t)buf + len;
}

/* Whether the reports from..to-1 include a range overlapping [s, s+len). */
static int seen(const range *ring, unsigned from, unsigned to, uintptr_t s, size_t len) {
  uintptr_t e = s + len;
  if (to - from > RANGES) from = to - RANGES;
  for (unsigned i = from; i < to; i++) {
    if (ring[i % RANGES].start < e && ring[i % RANGES].end > s) return 1;
  }
  return 0;
}

/* opal_mem_hooks_callback_fn_t (opal/memoryhooks/memory.h) */
static void opal_release(void *buf, size_t length, void *cbdata, bool from_alloc) {
  (void)cbdata;
  (void)from_alloc;
  note(opal_seen, &opal_count, buf, length);
}

/* ucm_event_callback_t for UCM_EVENT_VM_UNMAPPED (ucm/api/ucm.h): the event
 * is a union whose vm_unmapped member is {void *address; size_t size;}. */
typedef struct ucm_vm_event {
  void *address;
  size_t size;
} ucm_vm_event;
static void ucm_unmapped(int event, void *arg, void *cbdata) {
  (void)event;
  (void)cbdata;
  const ucm_vm_event *e = arg;
  note(ucm_seen, &ucm_count, e->address, e->size);
}
#define UCM_EVENT_VM_UNMAPPED (1 << 17)

static unsigned char pattern(int round, size_t i) { return (unsigned char)(round * 131 + i * 7 + (i >> 12)); }

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  size_t bytes = (size_t)(argc > 1 ? atoi(argv[1]) : 8) << 20;
  int rounds = argc > 2 ? atoi(argv[2]) : 6;

  int opal_level = -1, ucm_hooks = -1;
  int (*level)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "opal_mem_hooks_support_level");
  int (*reg)(void (*)(void *, size_t, void *, bool), void *) =
      (int (*)(void (*)(void *, size_t, void *, bool), void *))dlsym(RTLD_DEFAULT, "opal_mem_hooks_register_release");
  if (level && reg) {
    /* 0: the memory patcher installed nothing (no component asked for it),
     * and registering a callback is refused. */
    opal_level = level();
    if (opal_level > 0 && reg(opal_release, NULL) != 0) opal_level = -2;
  }
  int (*ucm_set)(int, int, void (*)(int, void *, void *), void *) =
      (int (*)(int, int, void (*)(int, void *, void *), void *))dlsym(RTLD_DEFAULT, "ucm_set_event_handler");
  if (ucm_set) ucm_hooks = ucm_set(UCM_EVENT_VM_UNMAPPED, 0, ucm_unmapped, NULL) == 0;

  long pages = 0;
  int same = 0, bad = 0, opal_unmapped = 0, ucm_unmapped_seen = 0;
  uintptr_t last = 0;
  for (int r = 0; r < rounds; r++) {
    unsigned char *buf = malloc(bytes);
    if (!buf) MPI_Abort(MPI_COMM_WORLD, 2);
    if (r == 0) {
      memset(buf, 0, bytes);
      pages = smaps_field(buf, "KernelPageSize");
    }
    uintptr_t addr = (uintptr_t)buf;
    if (addr == last) same++;
    last = addr;
    if (rank == 0) {
      for (size_t i = 0; i < bytes; i++) buf[i] = pattern(r, i);
      for (int to = 1; to < size; to++) MPI_Send(buf, (int)bytes, MPI_BYTE, to, r, MPI_COMM_WORLD);
    } else {
      memset(buf, 0xff, bytes);
      MPI_Recv(buf, (int)bytes, MPI_BYTE, 0, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      for (size_t i = 0; i < bytes; i++) bad += buf[i] != pattern(r, i);
    }
    unsigned o = __atomic_load_n(&opal_count, __ATOMIC_RELAXED), u = __atomic_load_n(&ucm_count, __ATOMIC_RELAXED);
    free(buf);
    /* The unmapping of this buffer, if free unmapped it. */
    unsigned o2 = __atomic_load_n(&opal_count, __ATOMIC_RELAXED), u2 = __atomic_load_n(&ucm_count, __ATOMIC_RELAXED);
    opal_unmapped += seen(opal_seen, o, o2, addr, bytes);
    ucm_unmapped_seen += seen(ucm_seen, u, u2, addr, bytes);
    /* Both ranks in step: the next round's buffer is allocated after this
     * one's message has completed everywhere. */
    MPI_Barrier(MPI_COMM_WORLD);
  }
  printf("rank %d pages %ld\n", rank, pages);
  printf("rank %d rounds %d same_address %d bad %d\n", rank, rounds, same, bad);
  printf("rank %d opal_hooks %d unmapped_seen %d ucm_hooks %d ucm_unmapped_seen %d\n", rank, opal_level,
         opal_unmapped, ucm_hooks, ucm_unmapped_seen);
  MPI_Finalize();
  return 0;
}
