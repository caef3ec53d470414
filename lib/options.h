/* SPDX-License-Identifier: BSD-3-Clause */
/* The HUGEPOOL_* options: the table (option-table.c, pure: hugepool-run and
 * the doctor link it alone) and this process's values (options.c, read once
 * at load).  Not installed.
 *
 * Rules: the only reader of HUGEPOOL_* variables in lib/ and preload/; the
 * MPI entry points ask the preload for the values read here
 * (option-reader.h).  No lock: the values are written once, before any
 * other thread can exist, and only read afterwards. */
#ifndef HUGEPOOL_OPTIONS_H
#define HUGEPOOL_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

#include "hugepool/hugepool.h"
#include "os.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The smallest HUGEPOOL_THRESHOLD accepted (option-table.c). */
#define HP_THRESHOLD_MIN (64u << 10)
/* The most HUGEPOOL_CACHE_SLOTS (cache.c enforces it). */
#define HP_CACHE_SLOTS_MAX ((size_t)1 << 20)

/* ---- options (option-table.c: the table; options.c: this process's values)
 * Each option has a default for programs linked with the library and one
 * for the preload (they differ for HUGEPOOL_POLICY only). */
typedef enum hp_option_id {
  HP_OPT_POLICY,
  HP_OPT_PAGE_SIZE,
  HP_OPT_CACHE_SLOTS,
  HP_OPT_CACHE_BYTES,
  HP_OPT_CACHE_DECAY,
  HP_OPT_STATS,
  HP_OPT_STATS_FILE,
  HP_OPT_WARN,
  HP_OPT_THRESHOLD,
  HP_OPT_SMALL_HEAP,
  HP_OPT_FORK,
  HP_OPT_MPI,
  HP_OPT_MPI_WIN_SHARED,
  HP_OPT_CUDA,
  HP_OPT_VERBOSE,
  HP_OPT_HOLD,
  HP_OPT_PREFAULT,
  HP_OPT_OTHER_HEAP,
  HP_OPT_COUNT
} hp_option_id;

typedef enum { HP_TYPE_SIZE, HP_TYPE_NUMBER, HP_TYPE_CHOICE, HP_TYPE_TEXT } hp_option_type;

typedef struct hp_option_desc {
  const char *name;        /* environment variable */
  long long default_value; /* HP_TYPE_CHOICE: index into choices */
  long long preload_default;
  long long max;       /* HP_TYPE_SIZE / HP_TYPE_NUMBER: largest accepted value */
  const char *choices; /* HP_TYPE_CHOICE: "a|b|c", matched without case */
  const char *help;    /* one line, Markdown (`code`) */
  const char *unit;    /* HP_TYPE_NUMBER: what it counts, for messages */
  hp_option_type type;
  int common_choices; /* > 0: outside the preload only the first this many */
} hp_option_desc;

enum { HP_STATS_OFF = 0, HP_STATS_TEXT_AT_EXIT = 1, HP_STATS_JSON_AT_EXIT = 2 };
enum { HP_FORK_COPY = 0, HP_FORK_KEEP = 1 };
enum { HP_MPI_AUTO = 0, HP_MPI_OFF = 1 };
enum { HP_CUDA_OFF = 0, HP_CUDA_ON = 1, HP_CUDA_ALL = 2 };
enum { HP_HOLD_AUTO = 0, HP_HOLD_ALL = 1, HP_HOLD_SHARE = 2 };
enum { HP_OTHER_HEAP_AUTO = 0, HP_OTHER_HEAP_SHARE = 1, HP_OTHER_HEAP_OFF = 2 };
/* HUGEPOOL_HOLD=share (preload/hold.c): a new request of more than
 * HP_HOLD_FLOOR bytes that is also more than 1/HP_HOLD_DIVISOR of the
 * node's pool goes to glibc.  The doctor's --need note reads them too. */
#define HP_HOLD_FLOOR ((size_t)64 << 20)
#define HP_HOLD_DIVISOR 8
/* HUGEPOOL_PREFAULT's default: the sizes glibc serves from memory it has
 * already touched (its mmap threshold rises to at most 32 MiB). */
#define HP_PREFAULT_DEFAULT ((size_t)32 << 20)
/* HUGEPOOL_CACHE_DECAY's default under the preload, in ms (README.md,
 * "Choosing the defaults"). */
#define HP_CACHE_DECAY_PRELOAD_MS 1000
/* HUGEPOOL_POLICY's fourth choice, the preload's default: the core is strict
 * and quiet, and the preload gives a large request it refuses to glibc. */
enum { HP_POLICY_FALLBACK = 3 };

HP_INTERNAL const hp_option_desc *option_desc(hp_option_id id);
/* Parses text as a value of option id (the preload's choices if `preload`).
 * Returns 0 and *value, or -1 with what a valid value looks like in expected. */
HP_INTERNAL int option_parse(hp_option_id id, const char *text, bool preload, long long *value, char *expected,
                             size_t len);
/* The value as a user writes it: "1G", "strict", "64"; "-" for text. */
HP_INTERNAL void option_format(hp_option_id id, long long value, char *buf, size_t len);
/* The option named by the `len` bytes at name ("HUGEPOOL_POLICY"), or
 * HP_OPT_COUNT; option_closest: the option whose name is at most 2 edits
 * away (a misspelling), or HP_OPT_COUNT. */
HP_INTERNAL hp_option_id option_find(const char *name, size_t len);
HP_INTERNAL hp_option_id option_closest(const char *name, size_t len);
/* HUGEPOOL_ROOT and HUGEPOOL_DIR (set for hugepool by other tools: Spack's
 * modules, CMake's find_package) and hugepool-run's own HUGEPOOL_*_LIB
 * (where its preloaded objects are): no options, and no mistake. */
HP_INTERNAL bool option_foreign(const char *name, size_t len);

/* The preload's defaults instead of the library's; called by the preload
 * before anything starts the core (its constructor runs first). */
HP_INTERNAL void options_use_preload_defaults(void);
/* This machine's default for option id instead of the table's (HUGEPOOL_PREFAULT
 * on more than one NUMA node); called before options_init(), so that a bad
 * value's warning names the default that applies. */
HP_INTERNAL void options_set_default(hp_option_id id, long long value);
/* Reads the HUGEPOOL_* environment once; warnings go to stderr.  In a
 * setuid/setgid program (AT_SECURE) it reads none of it. */
HP_INTERNAL void options_init(void);
HP_INTERNAL long long option_get(hp_option_id id);
/* Does the environment name the option at all (before or after
 * options_init(); a setuid program's is ignored, and so said)? */
HP_INTERNAL bool option_in_environment(hp_option_id id);
/* The text of an HP_TYPE_TEXT option that was set, else NULL. */
HP_INTERNAL const char *option_get_string(hp_option_id id);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_OPTIONS_H */
