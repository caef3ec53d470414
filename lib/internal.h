/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool internals shared by the files of lib/.  Not installed. */
#ifndef HUGEPOOL_INTERNAL_H
#define HUGEPOOL_INTERNAL_H

#include <pthread.h>
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
/* The smallest HUGEPOOL_THRESHOLD accepted (option-table.c). */
#define HP_THRESHOLD_MIN (64u << 10)
#define HP_1G ((size_t)1 << 30)

/* ---- one mapping, live or cached -------------------------------------- */
typedef struct hp_tcache hp_tcache;
typedef struct hp_block {
  void *addr;
  size_t size;       /* mapped bytes, a multiple of the page size of `kind` */
  size_t requested;  /* bytes the caller asked for (live blocks only) */
  size_t headroom;   /* live blocks: reserved address space right after the mapping,
                        kept by realloc.c for growth in place (0 in the cache) */
  int32_t node;      /* NUMA node the pages are bound to, or HUGEPOOL_ANY_NODE */
  uint32_t kind;     /* hugepool_kind */
  uint32_t resizing; /* live blocks: non-zero while realloc.c changes the mapping */
  uint32_t tc_slot;  /* registry entries with tc: the thread-cache entry */
  hp_tcache *tc;     /* registry entries: the thread cache that holds the block
                        (cached or handed out from it; tcache.c), or NULL */
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
/* Address space without memory or pool pages (PROT_NONE), aligned to `align`. */
HP_INTERNAL void *os_reserve(size_t size, size_t align);
/* Turns [addr, addr + size) of a mapping into reserved address space: its
 * pages go back now, the range stays ours.  0, or -1 with errno. */
HP_INTERNAL int os_unmap_to_reserve(void *addr, size_t size);
/* Moves the buffer [from, from + size), one or several mappings of pages of
 * `page_size` (0: 4 KB pages), to `to`, reserved address space of ours:
 * page-table entries move, no byte is copied (unless the kernel refuses a
 * piece both ways: then that piece is copied).  0: the buffer is at `to`
 * and [from, from + size) is no longer ours.  -1 with errno: the buffer is
 * whole at `from`, as it was, and [to, to + size) is no longer ours (ENOSYS:
 * /proc/self/maps cannot be read; EFAULT: the range has a hole).  Never
 * returns with the buffer in two parts (see os.c). */
HP_INTERNAL int os_move(void *from, size_t size, void *to, size_t page_size);
/* As os_move() for a range inside one mapping (one mremap call). */
HP_INTERNAL int os_move_mapping(void *from, size_t size, void *to);
/* Test hook (fault injection): from now on, counting from 1 the OS layer's
 * mremap calls (HP_OS_FAULT_MREMAP) and the mmap calls a move makes
 * (HP_OS_FAULT_MMAP), as `ops` selects, call first + i fails with errno
 * `err` for each bit i set in `mask`.  first = 0 only counts; ops = 0 turns
 * it off.  Hidden: reachable only by linking libhugepool.a, and no
 * environment variable sets it. */
#define HP_OS_FAULT_MREMAP 1u
#define HP_OS_FAULT_MMAP 2u
HP_INTERNAL void os_inject_faults(unsigned ops, long first, uint64_t mask, int err);
/* Calls counted since the last os_inject_faults(). */
HP_INTERNAL long os_inject_seen(void);
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
/* Node-shared segments (segment.c).  -1 and errno on failure. */
typedef struct os_file_info {
  bool is_hugetlb; /* a regular file on a hugetlbfs (memfd or mount) */
  long uid;
  unsigned mode;
  uint64_t ino, dev, size;
  size_t page_size;
} os_file_info;
/* A nameless hugetlb file: a memfd (dir NULL) or an O_TMPFILE in dir. */
HP_INTERNAL int os_huge_file(size_t page_size, const char *dir);
/* Sizes the file and seals it against resizing where it can be sealed. */
HP_INTERNAL int os_huge_file_size(int fd, size_t size);
HP_INTERNAL void *os_map_shared(int fd, size_t size);
/* A descriptor for descriptor `fd` of process `pid` (same user only). */
HP_INTERNAL int os_peer_fd(long pid, int fd);
HP_INTERNAL int os_huge_file_info(int fd, os_file_info *out);
HP_INTERNAL int os_find_hugetlbfs(size_t page_size, char *buf, size_t len);
HP_INTERNAL long os_euid(void);
HP_INTERNAL long os_pid(void);

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
  HP_OPT_MPI,
  HP_OPT_MPI_WIN_SHARED,
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
/* HUGEPOOL_ROOT and HUGEPOOL_DIR: set for hugepool by other tools (Spack's
 * modules, CMake's find_package), no options, and no mistake. */
HP_INTERNAL bool option_foreign(const char *name, size_t len);

/* The preload's defaults instead of the library's; called by the preload
 * before anything starts the core (its constructor runs first). */
HP_INTERNAL void options_use_preload_defaults(void);
/* Reads the HUGEPOOL_* environment once; warnings go to stderr.  In a
 * setuid/setgid program (AT_SECURE) it reads none of it. */
HP_INTERNAL void options_init(void);
HP_INTERNAL long long option_get(hp_option_id id);
/* The text of an HP_TYPE_TEXT option that was set, else NULL. */
HP_INTERNAL const char *option_get_string(hp_option_id id);

/* ---- the lock of the shared cache and the slow paths (hugepool.c) ----
 * Guards the shared cache, the statistics in hp_stats and the list of
 * thread caches.  No system call is made under it except rare growth of
 * the internal tables. */
extern HP_INTERNAL pthread_mutex_t hp_lock;
HP_INTERNAL void hp_ensure_init(void);
HP_INTERNAL size_t hp_current_page_size(void);
HP_INTERNAL void hp_report_shortage(size_t size, size_t page, int node);
/* "2 MB hugetlb pages: need N pages, F free of T in the pool; reserve more
 * with ..." for a request of `size` bytes: the part of a shortage line that
 * every caller shares. */
HP_INTERNAL void hp_describe_shortage(char *buf, size_t len, size_t size, size_t page, int node);

/* ---- the allocation path (alloc.c) ---------------------------------------- */
/* Releases happen in batches outside the lock; this is one batch. */
#define HP_BATCH 64

/* The largest cached block that may serve a request of `size` (a multiple
 * of `page`): a quarter more, in whole pages.  A program whose buffers
 * drift in size (30, 31 ... 36 MB in turn) then reuses the blocks it has
 * instead of keeping one per size (eight blocks of 30-36 MB for two
 * buffers), which a pool shared by several ranks cannot hold: every block
 * over the rank's share was unmapped and mapped again, 1.2-1.5x the time
 * of one reused buffer.  A block taken so is at most 25% larger than asked
 * (counted as slack); an exact fit is always preferred. */
static inline size_t hp_fit_max(size_t size, size_t page) {
  size_t more = (size / 4) & ~(page - 1);
  return size + more < size ? size : size + more;
}
HP_INTERNAL void *hp_allocate(size_t bytes, int node, bool *fresh);
/* Lazy release: count blocks as being released under hp_lock, then unmap
 * them with release_now() after dropping it. */
HP_INTERNAL void release_mark(const hp_block *blocks, size_t n);
HP_INTERNAL void release_now(hp_block *blocks, size_t n);
/* The one loop every bulk release runs: under hp_lock, take(batch) picks up
 * to HP_BATCH blocks, *counter counts them; then they are unmapped outside
 * the lock; until take() finds none.  Returns the bytes released. */
HP_INTERNAL size_t release_batches(size_t (*take)(hp_block *out, size_t max, void *arg), void *arg, uint64_t *counter);
/* Releases cached blocks of `kind`, oldest first, until `need` bytes are on
 * their way back to the pool (or none is left); returns the bytes. */
HP_INTERNAL size_t release_for(hugepool_kind kind, size_t need);
/* Waits until other threads' lazy releases have reached the pool. */
HP_INTERNAL void release_wait(void);
/* fork child: releases in flight in the parent never happen here. */
HP_INTERNAL void release_forget_in_flight(void);

/* ---- diagnostics (hugepool.c) ---------------------------------------- */
HP_INTERNAL void hp_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- hooks for the preload (preload/), which links these objects ------- */
/* hugepool_free() that never caches: the pages go back to the pool now (the
 * preload's small heap returns its empty chunks with it). */
HP_INTERNAL void hp_free_to_pool(void *ptr);
/* hugepool_free() of ptr if it is a live buffer (true; errno kept), else
 * nothing (false, no warning): one lookup where hugepool_owns() and then
 * hugepool_free() make two (the preload's free of a 2 MB-aligned pointer). */
HP_INTERNAL bool hp_free_if_live(void *ptr);
/* Silences the core's pool-shortage messages (the preload prints its own). */
HP_INTERNAL void hp_quiet_shortage(bool quiet);
/* What the shortage line offers instead of a bigger pool (NULL: the
 * library's HUGEPOOL_POLICY=thp|small); the preload names its own fallback. */
extern HP_INTERNAL const char *hp_shortage_advice;
/* Extra counters appended to every statistics report (NULL: none). */
typedef struct hp_extra_stat {
  const char *key;   /* JSON key */
  const char *label; /* text label */
  unsigned long long value;
  /* HP_EXTRA_BYTES: a size (human units in text); HP_EXTRA_ACTIVITY: non-zero means hugepool was asked */
  unsigned flags;
} hp_extra_stat;
enum { HP_EXTRA_BYTES = 1, HP_EXTRA_ACTIVITY = 2 };
extern HP_INTERNAL size_t (*hp_stats_extra)(hp_extra_stat *out, size_t max);
/* The policy the statistics name (NULL: the core's); the preload's default
 * is "fallback" (to glibc), which the core does not know. */
extern HP_INTERNAL const char *hp_stats_policy_label;
/* Set by a caller that serves refused requests elsewhere (the preload's
 * fallback to glibc): after a refusal the pool is retried with backoff
 * (alloc.c).  The core does so by itself only under a fallback policy: a
 * strict caller that grows the pool and asks again must see the pages. */
extern HP_INTERNAL bool hp_short_backoff;

/* ---- registry of live blocks (registry.c) ------------------------------
 * Every live buffer, by start address.  Each call takes the lock of the
 * address's stripe itself: callers need not (and, for registry_update's fn,
 * must not) hold any other lock of the registry.  A block is in the registry
 * while it is live, and also while a thread cache holds it: such an entry
 * has `tc` set and stays unchanged while its thread hands the block out and
 * takes it back (the entry of the thread cache says which); the other
 * functions below refuse it with EAGAIN, and tcache_detach() turns it into
 * a plain entry or removes it.  Blocks in the shared cache are not here. */
HP_INTERNAL int registry_insert(const hp_block *b); /* 0, or -1 with ENOMEM */
/* Removes a plain live block: 0, EINVAL (not live), EBUSY (resizing; the
 * block stays) or EAGAIN (a thread cache's entry: *out is a copy). */
HP_INTERNAL int registry_remove_idle(const void *addr, hp_block *out);
/* Removes the entry of a resize at addr (live_end_resize): a buffer moved
 * away may share its old address with a new buffer mapped there since. */
HP_INTERNAL bool registry_remove_resized(const void *addr, hp_block *out);
HP_INTERNAL bool registry_find(const void *addr, hp_block *out); /* copies the block */
/* Runs fn on the plain live block at addr with its stripe locked (fn may
 * change any field but addr) and returns fn's result; -1 with EINVAL if not
 * live, EAGAIN (fn not run, *copy set) for a thread cache's entry.  This is
 * how a resize marks a block as busy or records its new size. */
HP_INTERNAL int registry_update(const void *addr, int (*fn)(hp_block *b, void *arg), void *arg, hp_block *copy);
/* The thread-cache entry of b (same addr, tc and tc_slot): replaced by *b
 * with tc cleared (keep) or removed.  Called by tcache.c with the thread
 * cache's lock held.  false: no such entry. */
HP_INTERNAL bool registry_detach(const hp_block *b, bool keep);
/* fork: registry_walk visits every live block; hold registry_lock_all(). */
HP_INTERNAL void registry_lock_all(void);
HP_INTERNAL void registry_unlock_all(void);
HP_INTERNAL void registry_walk(void (*fn)(hp_block *b, void *arg), void *arg);

/* ---- the shared cache of freed blocks (cache.c), caller holds hp_lock ----
 * Constant-time take and eviction.  The limits cover the cached blocks plus
 * the leases the thread caches hold (tcache.c). */
#define HP_CACHE_SLOTS_MAX ((size_t)1 << 20)
HP_INTERNAL int cache_configure(size_t max_slots, size_t max_bytes);
/* A cached block of `size` or, if none, the smallest of up to max_size. */
HP_INTERNAL bool cache_take(size_t size, size_t max_size, int node, hugepool_kind kind, hp_block *out);
/* Caches `b`, evicting the oldest blocks into victims[] (at most
 * max_victims).  Returns true if `b` was cached; false if it must be
 * released by the caller (also appended to victims[] in that case). */
HP_INTERNAL bool cache_put(const hp_block *b, hp_block *victims, size_t max_victims, size_t *n_victims);
/* Reserves room for one block of `size` for a thread cache, evicting as
 * cache_put does; false (nothing evicted) if there is no such room. */
HP_INTERNAL bool cache_lease(size_t size, hp_block *victims, size_t max_victims, size_t *n_victims);
HP_INTERNAL void cache_unlease(size_t size);
/* Would a lease of `size` fit without evicting, once leases of give_slots
 * blocks and give_bytes bytes were given back? */
HP_INTERNAL bool cache_lease_fits(size_t size, size_t give_slots, size_t give_bytes);
/* Caches `b` ignoring the limits (cache_shrink_to_limits follows). */
HP_INTERNAL void cache_add_unchecked(const hp_block *b, hp_block *victims, size_t max_victims, size_t *n_victims);
/* Evicts the oldest block of `kind`; false if none is cached. */
HP_INTERNAL bool cache_evict_kind(hugepool_kind kind, hp_block *out);
/* Moves up to max_out cached blocks, oldest first, into out[]; returns how many. */
HP_INTERNAL size_t cache_drain(hp_block *out, size_t max_out);
/* Evicts the oldest blocks until the cache and the leases fit the limits. */
HP_INTERNAL size_t cache_shrink_to_limits(hp_block *out, size_t max_out);
HP_INTERNAL size_t cache_count(void);
HP_INTERNAL size_t cache_bytes(void);
HP_INTERNAL size_t cache_bytes_of_kind(hugepool_kind kind);
HP_INTERNAL size_t cache_max_slots(void);
HP_INTERNAL size_t cache_max_bytes(void);

/* ---- thread caches (tcache.c) -------------------------------------------
 * Each thread keeps its last few freed blocks under its own lock; a hit, and
 * the free of a block handed out by the hit, touch nothing another thread
 * touches: not the shared cache, not the registry (the block keeps its
 * registry entry, marked, while the thread cache holds it).  The fast paths
 * take no other lock; the functions marked "under hp_lock" need it. */
/* Once, from init; on_thread_exit runs when a thread that used its cache
 * exits (it hands the cache back with tcache_retire). */
HP_INTERNAL void tcache_init(void (*on_thread_exit)(hp_tcache *tc));
/* The calling thread's cache, created (under hp_lock) on first use; NULL if
 * metadata cannot be had.  _if_any: NULL rather than create one. */
HP_INTERNAL hp_tcache *tcache_self(void);
HP_INTERNAL hp_tcache *tcache_self_if_any(void);
/* Fast paths: counters of the hit or the free go into the thread's cache. */
/* A hit takes the smallest cached block of size .. max_size (hp_fit_max). */
HP_INTERNAL bool tcache_take(hp_tcache *tc, size_t size, size_t max_size, size_t requested, int node,
                             hugepool_kind kind, void **out);
/* The free of a block this cache handed out: 1 (cached again), 2 (it left
 * the cache and its registry entry: *out is to be released, as the process
 * maps more than its share of the pool), 0 (not one of this cache's). */
HP_INTERNAL int tcache_free_own(hp_tcache *tc, const void *addr, hp_block *out);
/* A live block this cache handed out, by address. */
HP_INTERNAL bool tcache_find_own(hp_tcache *tc, const void *addr, hp_block *out);
/* For a marked registry entry (copy): 1 and *out if the block is handed out
 * (live), 0 if cached, -1 if the entry changed since (look again). */
HP_INTERNAL int tcache_lookup(const hp_block *copy, hp_block *out);
/* Takes the handed-out block of a marked registry entry away from its
 * thread cache: *out becomes a plain live block (resizing: its registry
 * entry stays, marked as being resized) or leaves the registry.  0; EINVAL:
 * the block is cached (not live); EAGAIN: the entry changed since. */
HP_INTERNAL int tcache_detach(const hp_block *copy, bool resizing, hp_block *out);
/* Counts the free of plain block `b` and caches it in an entry whose lease
 * fits, if may_cache; false if it was not cached (tcache_put_slow is next). */
HP_INTERNAL bool tcache_put_fast(hp_tcache *tc, const hp_block *b, bool may_cache);
/* Slow free, under hp_lock: takes a lease for `b` (evicting into victims[]
 * as cache_put does, oldest of this thread's own blocks included); false if
 * `b` is not cached here (the caller tries the shared cache). */
HP_INTERNAL bool tcache_put_slow(hp_tcache *tc, const hp_block *b, hp_block *victims, size_t max_victims,
                                 size_t *n_victims);
/* Under hp_lock: takes a matching block from any thread's cache. */
HP_INTERNAL bool tcache_steal(size_t size, int node, hugepool_kind kind, hp_block *out);
/* Under hp_lock: moves up to max cached blocks out of every thread cache
 * (of `kind`, or any with HUGEPOOL_KIND_NONE), returning their leases. */
HP_INTERNAL size_t tcache_drain(hugepool_kind kind, hp_block *out, size_t max, size_t *bytes_left);
/* Under hp_lock: blocks cached by the threads, and of one kind. */
HP_INTERNAL void tcache_totals(size_t *count, size_t *bytes);
HP_INTERNAL size_t tcache_bytes_of_kind(hugepool_kind kind);
/* Under hp_lock: adds every thread cache's counters to *st. */
HP_INTERNAL void tcache_sum_stats(hugepool_stats *st);
/* Under hp_lock: gives every lease back (cached blocks move to the shared
 * cache, unchecked; handed-out ones become plain live blocks) before the
 * limits change. */
HP_INTERNAL void tcache_return_all(hp_block *victims, size_t max_victims, size_t *n_victims);
/* Under hp_lock: the same for one exiting thread's cache, which loses its owner. */
HP_INTERNAL void tcache_retire(hp_tcache *tc, hp_block *victims, size_t max_victims, size_t *n_victims);
/* fork: lock every thread cache (after hp_lock), unlock; in the child, once
 * the cached blocks are drained, every cache is emptied (handed-out blocks
 * become plain live blocks) and those of the threads that did not survive
 * lose their owners. */
HP_INTERNAL void tcache_lock_all(void);
HP_INTERNAL void tcache_unlock_all(void);
HP_INTERNAL void tcache_child_reset(void);

/* ---- the node's pool, shared with other ranks (share.c) -----------------
 * A process's fair share of the pool: pool pages / ranks on the node. */
HP_INTERNAL void share_init(void);
HP_INTERNAL long share_local_ranks(void);
/* Re-reads the pool size (slow path only: one sysfs read). */
HP_INTERNAL void share_refresh(size_t page_size);
/* Hugetlb bytes this process maps (live + cached), kept up to date. */
HP_INTERNAL void share_mapped(size_t page_size, long long delta);
/* May a freed block of this page size be cached? No while this process
 * maps more than its share (a lock-free check: two relaxed loads). */
HP_INTERNAL bool share_may_cache(size_t page_size);
/* Bytes of cache to give back before mapping `size` more. */
HP_INTERNAL size_t share_excess(size_t page_size, size_t size);
/* Slow paths only (at most one pool read every few ms): is the node's free
 * pool of this page size low while other processes hold pages of it?  Then
 * the caller gives back every cached block of that size. */
HP_INTERNAL bool share_pool_low(size_t page_size);

/* ---- live blocks, for realloc.c (alloc.c) ---------------------------- */
/* Marks the live block at `addr` as being resized and copies it to *out.
 * Until live_end_resize(), hugepool_free() of it warns and does nothing and
 * another resize is refused.  0, or -1 with errno = EINVAL (not a live
 * buffer) or EBUSY (another thread is resizing it). */
HP_INTERNAL int live_begin_resize(const void *addr, hp_block *out);
typedef enum hp_resize_outcome {
  HP_RESIZE_KEPT,   /* the same pages (requested bytes may differ) */
  HP_RESIZE_GROWN,  /* pages added, none copied */
  HP_RESIZE_SHRUNK, /* pages given back */
  HP_RESIZE_FAILED  /* no change: counted as a failure */
} hp_resize_outcome;
/* Ends a resize begun on `was`: the block is now *now (its address may have
 * moved); statistics follow the change. */
HP_INTERNAL void live_end_resize(const hp_block *was, const hp_block *now, hp_resize_outcome outcome);
/* Releases cached blocks of `kind` until `bytes` are back in the pool (or
 * the cache holds none), and waits for other threads' releases in flight. */
HP_INTERNAL void live_reclaim(uint32_t kind, size_t bytes);
/* Counts a resize done by copying into a new buffer (realloc.c's fallback). */
HP_INTERNAL void live_count_copy(void);

/* ---- statistics (stats.c), caller holds the lock ----------------------- */
extern HP_INTERNAL hugepool_stats hp_stats;
HP_INTERNAL void stats_mapped(size_t bytes);
HP_INTERNAL void stats_unmapped(size_t bytes);
HP_INTERNAL void stats_print_at_exit(void);
/* Reads what the reports need from the environment (the MPI rank), once. */
HP_INTERNAL void stats_init(void);

/* ---- fork (fork.c): in the child, with the lock held ------------------- */
HP_INTERNAL void fork_prepare(void);
HP_INTERNAL void fork_parent_wait(void);
HP_INTERNAL void fork_child_privatize(void);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_INTERNAL_H */
