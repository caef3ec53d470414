/* SPDX-License-Identifier: BSD-3-Clause */
/* The core's atfork handlers (atfork.c).  Not installed.
 *
 * Rules: installed once, by the core's init, before realloc.c installs its
 * own (prepare handlers run in reverse order: a resize in flight finishes
 * before the core's locks are taken).  Lock order: prepare takes hp_lock,
 * every thread-cache lock, every registry stripe, in that order (base.h);
 * the parent releases them in reverse; the child works with hp_lock alone. */
#ifndef HUGEPOOL_ATFORK_H
#define HUGEPOOL_ATFORK_H

#include "os.h"

#ifdef __cplusplus
extern "C" {
#endif

HP_INTERNAL void atfork_install(void);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_ATFORK_H */
