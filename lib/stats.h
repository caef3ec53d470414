/* SPDX-License-Identifier: BSD-3-Clause */
/* Statistics (stats.c): one snapshot of the counters (base.h's, and the
 * caches' totals), its text and JSON, and the report at exit.  What
 * hugepool_get_stats and hugepool_stats_* (api.c) return.  Not installed.
 * The caller has started the core.  Takes hp_lock, then (for the totals)
 * the thread caches' locks; holds none on return. */
#ifndef HUGEPOOL_STATS_H
#define HUGEPOOL_STATS_H

#include <stdio.h>

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

HP_INTERNAL void stats_snapshot(hugepool_stats *out);
/* hugepool_stats_snprint and hugepool_stats_print, of the core started. */
HP_INTERNAL int stats_snprint(char *buf, size_t len, hugepool_stats_format format);
HP_INTERNAL int stats_print(FILE *stream, hugepool_stats_format format);
/* Was a report at exit asked for (HUGEPOOL_STATS or HUGEPOOL_STATS_FILE)? */
HP_INTERNAL bool stats_report_asked(void);
HP_INTERNAL void stats_print_at_exit(void);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_STATS_H */
