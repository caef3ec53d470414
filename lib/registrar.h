/* SPDX-License-Identifier: BSD-3-Clause */
/* Registrations kept with the cache (registrar.c, registrar-gpu.c): the
 * registrars a process has (a GPU driver, or one the application supplies,
 * such as an RDMA protection domain's ibv_reg_mr) and the mappings
 * registered with each.  Not installed.
 *
 * Rules:
 *  - a mapping is registered whole (its address and size: whole huge
 *    pages), once per registrar, by registrar_ensure(); it stays registered
 *    while the block is live or cached (shared or thread cache), and a
 *    later registrar_ensure() of it is a lookup, no call;
 *  - the registration is dropped by registrar_release() just before the
 *    mapping goes back to the kernel (release_now: trim, eviction, pool
 *    pressure) or changes its pages (a resize, a split), and nowhere else:
 *    at exit the kernel and the driver drop it with the process (a driver
 *    may already be torn down by then: it is never called at exit);
 *  - a forked child inherits no registration and no registrar
 *    (registrar_child_forget, first thing in the child): it never calls
 *    the parent's registrars, to register or to unregister;
 *  - callbacks run with no lock of the core held (they may call malloc:
 *    the preload routes that back here).
 * Lock order: registrar.c's mutex is a leaf, taken after any lock of the
 * core and held across no call out of this file. */
#ifndef HUGEPOOL_REGISTRAR_H
#define HUGEPOOL_REGISTRAR_H

#include <stdbool.h>
#include <stddef.h>

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most registrars a process has at once (ids 1 .. HP_REGISTRARS). */
#define HP_REGISTRARS 8

/* A registrar's id (1 ..), or -1 with errno: EINVAL (no callbacks), ENOSPC
 * (HP_REGISTRARS in use). */
HP_INTERNAL int registrar_add(const hugepool_registrar *r);
/* Is `id` a registrar of this process? */
HP_INTERNAL bool registrar_known(int id);
/* Unregisters every mapping registered with `id`, then forgets it: 0, or
 * -1 with errno = EINVAL (no such registrar). */
HP_INTERNAL int registrar_remove(int id);
/* Registers the mapping [addr, addr + size) with `id` unless it is already:
 * 0, or an errno value (EINVAL: no such registrar; ENOMEM: no memory for
 * the table; else the registrar's own error). */
HP_INTERNAL int registrar_ensure(void *addr, size_t size, int id);
/* The mapping [addr, addr + size) is about to go back to the kernel or to
 * change its pages: every registration of a mapping inside it is dropped
 * (each registrar's unregister called once).  One relaxed load when
 * nothing is registered. */
HP_INTERNAL void registrar_release(void *addr, size_t size);
/* Whether a mapping starting inside [addr, addr + size) is registered (one
 * relaxed load when nothing is). */
HP_INTERNAL bool registrar_holds(const void *addr, size_t size);
/* The registered mapping of `id` that holds `p`: true, with its start, size
 * and the registrar's handle (any of them may be NULL). */
HP_INTERNAL bool registrar_lookup(const void *p, int id, void **base, size_t *size, void **handle);
/* The counters of registrar `id`: 0, or -1 with errno = EINVAL. */
HP_INTERNAL int registrar_stats(int id, hugepool_registrar_stats *out);
/* fork child, one thread: every registration and registrar forgotten
 * without a call. */
HP_INTERNAL void registrar_child_forget(void);

/* The GPU drivers' registrars (registrar-gpu.c), opened with dlopen on the
 * first call only, added once: the id, or -1 with errno = ENODEV (no driver
 * or no device: one line says which). */
HP_INTERNAL int registrar_cuda(void);
HP_INTERNAL int registrar_hip(void);
/* The CUDA registrar added by this process and a context a registration
 * can use (the calling thread's, or an active primary context): true.
 * Creates none. */
HP_INTERNAL bool registrar_cuda_context(void);
/* Waits for the work of every context that may use a portable buffer (the
 * calling thread's, each active primary context), as the driver's
 * cuMemFreeHost does before it unpins: 0, or the driver's first error
 * (a CUresult: the runtime's numbers are the same for the errors a
 * synchronize reports).  Nothing in a process that did not add the registrar. */
HP_INTERNAL int registrar_cuda_synchronize(void);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_REGISTRAR_H */
