/* SPDX-License-Identifier: BSD-3-Clause */
/* Warnings: the one way lib/ and the preload talk to the user (base.c).
 * A line "hugepool[pid]: ..." on stderr, through the OS layer.  Rules: one
 * line per call, no malloc (the preload warns from inside malloc); silent
 * until the options have been read, then as HUGEPOOL_WARN says.  Takes no
 * lock: it may be called with any lock held.  Not installed. */
#ifndef HUGEPOOL_WARN_H
#define HUGEPOOL_WARN_H

#include <stdbool.h>

#include "os.h"

#ifdef __cplusplus
extern "C" {
#endif

HP_INTERNAL void hp_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* options.c, as soon as HUGEPOOL_WARN is known: whether hp_warn speaks. */
HP_INTERNAL void hp_warn_enable(bool on);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_WARN_H */
