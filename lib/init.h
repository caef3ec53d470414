/* SPDX-License-Identifier: BSD-3-Clause */
/* Starting the core, once per process (init.c): the options, then every
 * module in order, then the atfork handlers.  Not installed.
 *
 * Rules: the public functions call hp_ensure_init() before anything else
 * (api.c; realloc.c and segment.c through api.c's), no module below does;
 * the constructor calls it at load, so a program that never calls hugepool
 * before main still gets its options read while its environment is intact.
 * Takes no lock of the core (pthread_once). */
#ifndef HUGEPOOL_INIT_H
#define HUGEPOOL_INIT_H

#include "os.h"

#ifdef __cplusplus
extern "C" {
#endif

HP_INTERNAL void hp_ensure_init(void);
/* The preload, passive (preload/preload.h: a sanitizer's heap, an older
 * glibc): the constructor leaves the core unstarted; a public function
 * called later still starts it.  Called before the constructor runs (the
 * preload's runs first: a higher priority). */
HP_INTERNAL void hp_no_start_at_load(void);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_INIT_H */
