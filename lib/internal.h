/* hugepool internals shared by the files of lib/.  Not installed. */
#ifndef HUGEPOOL_INTERNAL_H
#define HUGEPOOL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hugepool/hugepool.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HP_INTERNAL __attribute__((visibility("hidden")))

#define HP_2M ((size_t)2 << 20)
#define HP_1G ((size_t)1 << 30)

/* ---- one mapping, live or cached -------------------------------------- */
typedef struct hp_block {
  void *addr;
  size_t size;      /* mapped bytes, a multiple of the page size of `kind` */
  size_t requested; /* bytes the caller asked for (live blocks only) */
  int32_t node;     /* NUMA node the pages are bound to, or HUGEPOOL_ANY_NODE */
  uint32_t kind;    /* hugepool_kind */
} hp_block;

/* ---- OS layer (os.c): the only file that makes system calls ----------
 * Memory (mmap, munmap, madvise, mbind, mremap), files (sysfs, /proc, the
 * statistics file, stderr) and the fork handshake's pipe go through these
 * functions; no other file of lib/ or preload/ makes those calls.
 * The contract, for every function below:
 *   - a pointer result is NULL on failure, an int / ssize_t / long result
 *     is -1; either way errno is the failing call's (EINVAL for a file whose
 *     text is not what was expected) and nothing was changed;
 *   - a bool result answers a question: false also when the answer cannot
 *     be read;
 *   - a void function cannot fail in a way its caller could act on (a
 *     failed munmap is reported with hp_warn).
 * Nothing here allocates with malloc: the preload calls it from malloc. */
HP_INTERNAL void *os_map_huge(size_t size, size_t page_size);
HP_INTERNAL void *os_map_anon(size_t size, size_t align, bool want_thp);
HP_INTERNAL void os_unmap(void *addr, size_t size);
HP_INTERNAL int os_bind_node(void *addr, size_t size, int node);
HP_INTERNAL int os_populate(void *addr, size_t size);
HP_INTERNAL int os_move_to_small(void *addr, size_t size, size_t page_size);
/* Zeroed memory for the library's own tables (4 KB pages); os_map_sparse
 * for tables touched only here and there (charged as they are touched). */
HP_INTERNAL void *os_map_meta(size_t size);
HP_INTERNAL void *os_map_sparse(size_t size);
HP_INTERNAL void os_unmap_meta(void *addr, size_t size);
HP_INTERNAL bool os_page_size_supported(size_t page_size);
HP_INTERNAL void os_nodes_init(void);
HP_INTERNAL bool os_node_has_memory(int node);
/* Free huge pages not promised to any mapping; node < 0: whole pool.
 * (The whole pool's count is the free count alone when the reserved count
 * cannot be read.) */
HP_INTERNAL long os_pool_available(size_t page_size, int node);
HP_INTERNAL long os_pool_total(size_t page_size, int node);
/* Reads at most len - 1 bytes of a small file (sysfs, /proc) into buf and
 * NUL-terminates them; returns the bytes read. */
HP_INTERNAL ssize_t os_read_file(const char *path, char *buf, size_t len);
/* Writes all of data, retrying after EINTR and short writes. */
HP_INTERNAL int os_write_all(int fd, const void *data, size_t len);
HP_INTERNAL void os_write_stderr(const char *text, size_t len);
/* Creates or truncates the file at path (0644, never through a symlink)
 * and writes data to it. */
HP_INTERNAL int os_write_file(const char *path, const char *data, size_t len);
HP_INTERNAL int os_pipe(int fds[2]);
/* Reads one byte from a pipe: 1, 0 at end of file, or -1. */
HP_INTERNAL int os_pipe_read_byte(int fd);
HP_INTERNAL void os_close(int fd);

/* ---- options (option-table.c: the table; options.c: this process's values)
 * Each option has a default for programs linked with the library and one
 * for the preload (they differ for HUGEPOOL_POLICY only). */
typedef enum hp_option_id {
  HP_OPT_POLICY,
  HP_OPT_PAGE_SIZE,
  HP_OPT_CACHE_SLOTS,
  HP_OPT_CACHE_BYTES,
  HP_OPT_STATS,
  HP_OPT_STATS_FILE,
  HP_OPT_WARN,
  HP_OPT_THRESHOLD,
  HP_OPT_SMALL_HEAP,
  HP_OPT_FORK,
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
  hp_option_type type;
  int common_choices; /* > 0: outside the preload only the first this many */
} hp_option_desc;

enum { HP_STATS_OFF = 0, HP_STATS_TEXT_AT_EXIT = 1, HP_STATS_JSON_AT_EXIT = 2 };
enum { HP_FORK_COPY = 0, HP_FORK_KEEP = 1 };
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

/* The preload's defaults instead of the library's; called by the preload
 * before anything starts the core (its constructor runs first). */
HP_INTERNAL void options_use_preload_defaults(void);
/* Reads the HUGEPOOL_* environment once; warnings go to stderr.  In a
 * setuid/setgid program (AT_SECURE) it reads none of it. */
HP_INTERNAL void options_init(void);
HP_INTERNAL long long option_get(hp_option_id id);
/* The text of an HP_TYPE_TEXT option that was set, else NULL. */
HP_INTERNAL const char *option_get_string(hp_option_id id);

/* ---- diagnostics (hugepool.c) ---------------------------------------- */
HP_INTERNAL void hp_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- hooks for the preload (preload/), which links these objects ------- */
/* Silences the core's pool-shortage messages (the preload prints its own). */
HP_INTERNAL void hp_quiet_shortage(bool quiet);
/* Extra counters appended to every statistics report (NULL: none). */
typedef struct hp_extra_stat {
  const char *key;   /* JSON key */
  const char *label; /* text label */
  unsigned long long value;
} hp_extra_stat;
extern HP_INTERNAL size_t (*hp_stats_extra)(hp_extra_stat *out, size_t max);

/* ---- registry of live blocks (registry.c), caller holds the lock ------- */
HP_INTERNAL int registry_insert(const hp_block *b);
HP_INTERNAL bool registry_remove(const void *addr, hp_block *out);
HP_INTERNAL const hp_block *registry_find(const void *addr);
HP_INTERNAL void registry_walk(void (*fn)(hp_block *b, void *arg), void *arg);

/* ---- cache of freed blocks (cache.c), caller holds the lock ------------ */
#define HP_CACHE_SLOTS_MAX 4096
HP_INTERNAL int cache_configure(size_t max_slots, size_t max_bytes);
HP_INTERNAL bool cache_take(size_t size, int node, uint32_t kind, hp_block *out);
/* Caches `b`, evicting round-robin victims into victims[] (at most
 * max_victims).  Returns true if `b` was cached; false if it must be
 * released by the caller (also appended to victims[] in that case). */
HP_INTERNAL bool cache_put(const hp_block *b, hp_block *victims, size_t max_victims, size_t *n_victims);
/* Evicts the next round-robin victim of `kind`; false if none is cached. */
HP_INTERNAL bool cache_evict_kind(uint32_t kind, hp_block *out);
/* Moves up to max_out cached blocks into out[]; returns how many. */
HP_INTERNAL size_t cache_drain(hp_block *out, size_t max_out);
/* Evicts round-robin until the cache fits its limits; returns victims. */
HP_INTERNAL size_t cache_shrink_to_limits(hp_block *out, size_t max_out);
HP_INTERNAL size_t cache_count(void);
HP_INTERNAL size_t cache_bytes(void);
HP_INTERNAL size_t cache_bytes_of_kind(uint32_t kind);
HP_INTERNAL size_t cache_max_slots(void);
HP_INTERNAL size_t cache_max_bytes(void);

/* ---- statistics (stats.c), caller holds the lock ----------------------- */
extern HP_INTERNAL hugepool_stats hp_stats;
HP_INTERNAL void stats_mapped(size_t bytes);
HP_INTERNAL void stats_unmapped(size_t bytes);
HP_INTERNAL void stats_print_at_exit(void);

/* ---- fork (fork.c): in the child, with the lock held ------------------- */
HP_INTERNAL void fork_prepare(void);
HP_INTERNAL void fork_parent_wait(void);
HP_INTERNAL void fork_child_privatize(void);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_INTERNAL_H */
