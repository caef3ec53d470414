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

/* "512 B", "64 KiB", "200 MiB", "1.5 GiB": sizes in messages and reports. */
HP_INTERNAL void hp_human_size(char *out, size_t len, unsigned long long v);
/* The size a program asked for, exactly, as a person reads it: "200 MiB",
 * "200 MiB + 1 B" (a bytearray's terminator), else "6.1 MiB (6422577 bytes)". */
HP_INTERNAL void hp_asked_size(char *out, size_t len, unsigned long long v);

/* HUGEPOOL_VERBOSE=1 (hugepool-run -v): a line "hugepool[pid] verbose:
 * KIND: ..." for each decision hugepool makes for the program, on the
 * stderr the report goes to.  Each kind speaks at its first decision, then
 * at most once a second, saying how many of its kind went unsaid.  Same
 * rules as hp_warn (no malloc, no lock). */
typedef enum hp_trace_kind {
  HP_TRACE_MAP,      /* fresh hugetlb pages mapped */
  HP_TRACE_HIT,      /* a cached buffer handed out again */
  HP_TRACE_FALLBACK, /* a request served on other pages, and why */
  HP_TRACE_FORK,     /* live buffers copied into a forked child */
  HP_TRACE_SPLIT,    /* a 2 MB page moved to 4 KB pages */
  HP_TRACE_HOLD,     /* a request beyond the pool share left to glibc (preload) */
  HP_TRACE_IDLE,     /* cached buffers unused past HUGEPOOL_CACHE_DECAY given back */
  HP_TRACE_KINDS
} hp_trace_kind;
/* Cheap when off: one relaxed load. */
HP_INTERNAL bool hp_trace_on(void);
HP_INTERNAL void hp_trace(hp_trace_kind kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* options.c, as soon as HUGEPOOL_VERBOSE is known. */
HP_INTERNAL void hp_trace_enable(bool on);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_WARN_H */
