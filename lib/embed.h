/* SPDX-License-Identifier: BSD-3-Clause */
/* What a program that builds the core into itself (the preload,
 * libhugepool_preload.so) tells it, once, in one const struct: how a pool
 * shortage is spoken of and handled, and what the statistics add.  Not
 * installed.  Declared here, below every reader; defined in base.c.
 *
 * Rules: hp_embed() is called at most once, after the core started (the
 * embedder reads the options first), with a struct that lives and stays
 * unchanged for the rest of the process (static const); a second call is
 * refused.  Until it is called, and in a program that only links the
 * library, hp_embedding() is the library's own (all fields zero).  Lock
 * order: none (the pointer is published with release/acquire). */
#ifndef HUGEPOOL_EMBED_H
#define HUGEPOOL_EMBED_H

#include <stdbool.h>
#include <stddef.h>

#include "os.h" /* HP_INTERNAL */

#ifdef __cplusplus
extern "C" {
#endif

/* An extra counter appended to every statistics report. */
typedef struct hp_extra_stat {
  const char *key;   /* JSON key */
  const char *label; /* text label */
  unsigned long long value;
  /* HP_EXTRA_BYTES: a size (human units in text); HP_EXTRA_ACTIVITY: non-zero means hugepool was asked */
  unsigned flags;
} hp_extra_stat;
enum { HP_EXTRA_BYTES = 1, HP_EXTRA_ACTIVITY = 2 };

typedef struct hp_embedder {
  /* What the shortage line offers instead of a bigger pool (NULL: the
   * library's HUGEPOOL_POLICY=thp|small); the preload names its own. */
  const char *shortage_advice;
  /* The core prints no shortage line (the embedder prints its own). */
  bool quiet_shortage;
  /* The embedder serves refused requests elsewhere (the preload's fallback
   * to glibc): after a refusal the pool is retried with backoff
   * (shortage.h), and a refusal is counted there as a fallback, not here as
   * a failure.  The core backs off by itself only under a fallback policy:
   * a strict caller that grows the pool and asks again must see the pages. */
  bool serves_refusals;
  /* The policy the statistics name (NULL: the core's); the preload's
   * default is "fallback" (to glibc), which the core does not know. */
  const char *policy_label;
  /* Fills out[0, max) with extra counters and returns how many (NULL: none). */
  size_t (*extra_stats)(hp_extra_stat *out, size_t max);
} hp_embedder;

/* Registers the embedder: 0, or -1 with EBUSY if one was registered
 * (EINVAL: NULL). */
HP_INTERNAL int hp_embed(const hp_embedder *embedder);
/* The embedder registered, or the library's own; never NULL. */
HP_INTERNAL const hp_embedder *hp_embedding(void);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_EMBED_H */
