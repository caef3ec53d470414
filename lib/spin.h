/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool internals (C only): the spin lock of the registry stripes and
 * the thread caches.  Not installed. */
#ifndef HUGEPOOL_SPIN_H
#define HUGEPOOL_SPIN_H

#include <sched.h>
#include <stdatomic.h>

/* ---- a spin lock for short critical sections without system calls -----
 * Uncontended it costs one atomic exchange and a plain store, half of a
 * mutex; a waiter yields the CPU rather than spin against the holder on a
 * machine with fewer cores than threads. */
typedef struct hp_spin {
  atomic_int held;
} hp_spin;

static inline void hp_spin_lock(hp_spin *l) {
  while (atomic_exchange_explicit(&l->held, 1, memory_order_acquire)) {
    while (atomic_load_explicit(&l->held, memory_order_relaxed)) sched_yield();
  }
}

static inline void hp_spin_unlock(hp_spin *l) { atomic_store_explicit(&l->held, 0, memory_order_release); }

#endif /* HUGEPOOL_SPIN_H */
