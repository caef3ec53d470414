/* SPDX-License-Identifier: BSD-3-Clause */
/* Statistics reports (stats.c): the text and JSON of hugepool_stats_*, and
 * the report at exit.  The counters themselves are base.h's.  Not
 * installed.  Takes hp_lock (through hugepool_get_stats) and no other. */
#ifndef HUGEPOOL_STATS_H
#define HUGEPOOL_STATS_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- statistics reports (stats.c) --------------------------------------- */
HP_INTERNAL void stats_print_at_exit(void);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_STATS_H */
