/* SPDX-License-Identifier: BSD-3-Clause */
/* fork() and live hugetlb buffers (fork.c): the copies a child needs.  Not
 * installed.  Called from the atfork handlers, with hp_lock, every thread
 * cache's lock and every registry stripe held (prepare) or, in the child,
 * hp_lock alone. */
#ifndef HUGEPOOL_FORK_H
#define HUGEPOOL_FORK_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- fork (fork.c): in the child, with the lock held ------------------- */
HP_INTERNAL void fork_prepare(void);
HP_INTERNAL void fork_parent_wait(void);
HP_INTERNAL void fork_child_privatize(void);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_FORK_H */
