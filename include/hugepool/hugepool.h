/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hugepool — guaranteed hugetlb buffers for HPC communication.
 *
 * Every buffer returned by hugepool_alloc() is backed by an explicit hugetlb
 * mapping (2 MB pages by default, 1 GB on request) that the kernel reserved
 * when it was mapped: touching it can never fault with SIGBUS.  Freed buffers
 * are kept in a bounded cache and handed out again with no system call and no
 * page fault.
 *
 * If the pool cannot cover a request the default policy returns NULL with
 * errno = ENOMEM and prints one diagnostic line.  Fallback to transparent huge
 * pages or to 4 KB pages is opt-in (HUGEPOOL_POLICY or hugepool_set_policy())
 * and every fallback is counted in the statistics.
 *
 * All functions are thread-safe and fork-safe.  None of them calls malloc.
 */
#ifndef HUGEPOOL_HUGEPOOL_H
#define HUGEPOOL_HUGEPOOL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HUGEPOOL_VERSION_MAJOR 0
#define HUGEPOOL_VERSION_MINOR 1
#define HUGEPOOL_VERSION_PATCH 0

#if defined(__GNUC__)
#define HUGEPOOL_API __attribute__((visibility("default")))
#define HUGEPOOL_MALLOC_LIKE __attribute__((malloc, warn_unused_result))
#define HUGEPOOL_REALLOC_LIKE __attribute__((warn_unused_result))
#else
#define HUGEPOOL_API
#define HUGEPOOL_MALLOC_LIKE
#define HUGEPOOL_REALLOC_LIKE
#endif

/* What to do when the hugetlb pool cannot cover a request. */
typedef enum hugepool_policy {
  HUGEPOOL_POLICY_STRICT = 0, /* NULL + ENOMEM (default) */
  HUGEPOOL_POLICY_THP = 1,    /* fall back to transparent huge pages (madvise) */
  HUGEPOOL_POLICY_SMALL = 2   /* fall back to ordinary 4 KB pages */
} hugepool_policy;

/* The kind of memory behind a buffer. */
typedef enum hugepool_kind {
  HUGEPOOL_KIND_NONE = 0,    /* not a live hugepool buffer */
  HUGEPOOL_KIND_HUGE_2M = 1, /* hugetlb, 2 MB pages */
  HUGEPOOL_KIND_HUGE_1G = 2, /* hugetlb, 1 GB pages */
  HUGEPOOL_KIND_THP = 3,     /* fallback: anonymous memory advised for THP */
  HUGEPOOL_KIND_SMALL = 4    /* fallback: anonymous memory on 4 KB pages */
} hugepool_kind;

#define HUGEPOOL_ANY_NODE (-1)

/* Allocate at least `bytes` bytes (rounded up to whole huge pages), aligned to
 * the huge page size.  Returns NULL with errno = ENOMEM when the pool (and the
 * fallback, if one is enabled) cannot cover it, EINVAL for bytes == 0 or an
 * impossible size.  The memory is not zeroed beyond what the kernel does for
 * a fresh mapping: a reused buffer keeps its previous contents.  Of a fresh
 * mapping the first HUGEPOOL_PREFAULT bytes, rounded down to whole pages
 * (32 MiB by default; none where a first touch may choose between NUMA
 * nodes), are faulted in before this returns, so the kernel clears them here
 * rather than at the program's first write. */
HUGEPOOL_API HUGEPOOL_MALLOC_LIKE void *hugepool_alloc(size_t bytes);

/* As hugepool_alloc(), with the pages bound to NUMA node `node` before first
 * touch (HUGEPOOL_ANY_NODE: no binding).  A node that does not exist or has no
 * memory gives NULL with errno = EINVAL.  The pages are populated on the node
 * at allocation time, so a shortage on that node is reported as ENOMEM here
 * rather than as a signal at first touch. */
HUGEPOOL_API HUGEPOOL_MALLOC_LIKE void *hugepool_alloc_on_node(size_t bytes, int node);

/* As hugepool_alloc() but the buffer is zeroed (a fresh mapping is not touched
 * again; a reused one is cleared). */
HUGEPOOL_API HUGEPOOL_MALLOC_LIKE void *hugepool_calloc(size_t count, size_t size);

/* Resize a live buffer, keeping its contents up to the smaller of the two
 * sizes, like realloc():
 *  - growing maps only the pages added and moves page-table entries, never
 *    bytes: the kernel reserves just the new pages (the pool needs
 *    (new - old) free pages, not new), and address space kept after a grown
 *    buffer lets later growth stay in place;
 *  - shrinking gives the pages past the new size back to the pool now;
 *  - a size needing the same number of pages returns `ptr` untouched.
 * The buffer may move (the result is then a different address); it keeps
 * its kind, NUMA node and alignment.  ptr == NULL is hugepool_alloc(bytes);
 * bytes == 0 frees ptr and returns NULL with errno untouched (as glibc).
 * On failure NULL is returned and the old buffer is left exactly as it was:
 * errno = ENOMEM when the pool cannot supply the added pages (with policy
 * thp or small, a growth the pool cannot cover is served by copying into a
 * fallback buffer instead), EINVAL when ptr is not a live hugepool buffer,
 * EBUSY when another thread is resizing the same buffer (a program error,
 * like freeing it concurrently).  Resizing one buffer while other threads
 * allocate, free or resize other buffers is safe; fork() waits for resizes
 * in flight.  Each growth step adds one mapping (the kernel does not merge
 * hugetlb mappings): a buffer grown N times takes N of the process's
 * vm.max_map_count mappings until it is freed. */
HUGEPOOL_API HUGEPOOL_REALLOC_LIKE void *hugepool_realloc(void *ptr, size_t bytes);

/* Return a buffer to the cache (or release it).  NULL is ignored.  A pointer
 * hugepool does not own is reported on stderr and left alone.  errno is kept. */
HUGEPOOL_API void hugepool_free(void *ptr);

/* Usable size of a live buffer (a whole number of pages), 0 if `ptr` is not
 * the start of a live hugepool buffer. */
HUGEPOOL_API size_t hugepool_usable_size(const void *ptr);

/* Non-zero if `ptr` is the start of a live hugepool buffer. */
HUGEPOOL_API int hugepool_owns(const void *ptr);

/* The kind of memory behind a live buffer, HUGEPOOL_KIND_NONE if not ours. */
HUGEPOOL_API hugepool_kind hugepool_kind_of(const void *ptr);

/* Release every cached mapping to the kernel pool.  Returns the bytes released. */
HUGEPOOL_API size_t hugepool_trim(void);

/* Fallback policy for later allocations.  Returns 0, or -1 with errno = EINVAL. */
HUGEPOOL_API int hugepool_set_policy(hugepool_policy policy);
HUGEPOOL_API hugepool_policy hugepool_get_policy(void);

/* Huge page size for later allocations: 2 MB (default) or 1 GB where the
 * kernel has it.  Returns 0, or -1 with errno = EINVAL (not a supported size)
 * or ENOTSUP (the kernel has no such page size). */
HUGEPOOL_API int hugepool_set_page_size(size_t page_bytes);
HUGEPOOL_API size_t hugepool_get_page_size(void);

/* Cache limits for later releases; 0 slots disables caching.  Shrinking the
 * limits evicts what no longer fits.  Returns 0, or -1 with errno = EINVAL. */
HUGEPOOL_API int hugepool_set_cache_limits(size_t max_slots, size_t max_bytes);

typedef struct hugepool_stats {
  uint64_t allocs;          /* successful allocations */
  uint64_t frees;           /* buffers given back */
  uint64_t failures;        /* allocations answered with NULL */
  uint64_t cache_hits;      /* allocations served from the cache */
  uint64_t cache_misses;    /* allocations that had to map memory */
  uint64_t cache_evictions; /* cached mappings released to make room or left unused (HUGEPOOL_CACHE_DECAY) */
  uint64_t trims;           /* cached mappings released by hugepool_trim() */
  uint64_t fallbacks_thp;   /* allocations served by THP fallback */
  uint64_t fallbacks_small; /* allocations served by 4 KB fallback */
  uint64_t maps;            /* mmap calls that succeeded */
  uint64_t unmaps;          /* munmap calls */
  uint64_t bytes_mapped;    /* bytes currently mapped (live + cached) */
  uint64_t bytes_mapped_peak;
  uint64_t bytes_live;      /* bytes in buffers handed out */
  uint64_t bytes_requested; /* bytes asked for by the live buffers */
  uint64_t bytes_slack;     /* bytes_live - bytes_requested: rounding waste */
  uint64_t bytes_cached;    /* bytes held in the cache */
  uint64_t live_buffers;
  uint64_t cached_buffers;
  uint64_t cache_max_slots; /* current limits */
  uint64_t cache_max_bytes;
  uint64_t fork_copies_huge; /* in a child: inherited buffers copied onto its own hugetlb pages */
  uint64_t fork_moves_small; /* in a child: inherited buffers moved to 4 KB pages (pool short) */
  uint64_t realloc_grows;    /* hugepool_realloc() growths done by moving pages, no byte copied */
  uint64_t realloc_shrinks;  /* hugepool_realloc() shrinks that gave pages back */
  uint64_t realloc_copies;   /* hugepool_realloc() growths done by copying (pool short, fallback policy) */
} hugepool_stats;

HUGEPOOL_API void hugepool_get_stats(hugepool_stats *out);

typedef enum hugepool_stats_format { HUGEPOOL_STATS_TEXT = 0, HUGEPOOL_STATS_JSON = 1 } hugepool_stats_format;

/* Format the statistics into `buf` (always NUL-terminated when len > 0).
 * Returns the length the full text needs, like snprintf. */
HUGEPOOL_API int hugepool_stats_snprint(char *buf, size_t len, hugepool_stats_format format);

/* Print the statistics to a stdio stream.  Returns 0 or -1. */
HUGEPOOL_API int hugepool_stats_print(FILE *stream, hugepool_stats_format format);

/* Free huge pages of the current page size in the kernel pool, for `node`
 * (HUGEPOOL_ANY_NODE: all nodes).  -1 if unknown. */
HUGEPOOL_API long hugepool_pool_free_pages(int node);

/* Human-readable name of a policy / kind. */
HUGEPOOL_API const char *hugepool_policy_name(hugepool_policy policy);
HUGEPOOL_API const char *hugepool_kind_name(hugepool_kind kind);

/* ---- registered buffers (GPU, RDMA) ----------------------------------------
 * A registrar page-locks and maps a range for a device: the CUDA driver's
 * cuMemHostRegister, ROCm's hipHostRegister, or one the application supplies
 * (an RDMA protection domain's ibv_reg_mr, say).  hugepool registers a
 * buffer's whole mapping (whole huge pages) once, keeps it registered while
 * the buffer is live or cached, hands it out again registered at no cost,
 * and unregisters it only when the mapping goes back to the kernel (trim,
 * eviction, pool pressure) or is resized.  At exit nothing is called: the
 * kernel and the driver drop registrations with the process.  A forked
 * child has no registrar and no registration of its parent's, and never
 * calls the parent's registrars.  Callbacks run with no lock of hugepool
 * held, may call malloc, and must not free or resize the buffer. */
typedef struct hugepool_registrar {
  const char *name; /* for messages ("ibv_reg_mr"); may be NULL */
  /* Registers [addr, addr + len): 0, or an errno value.  *handle is kept
   * and handed to unregister (an ibv_mr *, say). */
  int (*reg)(void *context, void *addr, size_t len, void **handle);
  /* Unregisters what reg registered: 0, or an errno value (reported). */
  int (*unreg)(void *context, void *addr, size_t len, void *handle);
  void *context;
} hugepool_registrar;

typedef struct hugepool_registrar_stats {
  uint64_t registrations;      /* calls of reg that succeeded */
  uint64_t registered_hits;    /* buffers found registered already: no call */
  uint64_t unregistrations;    /* calls of unreg */
  uint64_t failures;           /* calls of reg that failed */
  uint64_t bytes_registered;   /* bytes registered now */
  uint64_t buffers_registered; /* mappings registered now */
} hugepool_registrar_stats;

/* Adds a registrar (copied; context and name must outlive it).  Returns its
 * id (1 or more), or -1 with errno: EINVAL (no reg or unreg), ENOSPC (8 in
 * use). */
HUGEPOOL_API int hugepool_registrar_add(const hugepool_registrar *registrar);

/* Unregisters every buffer registered with `id`, then removes it (call it
 * before destroying what the registrar registers into).  0, or -1 with
 * errno = EINVAL. */
HUGEPOOL_API int hugepool_registrar_remove(int id);

/* The CUDA driver as a registrar: libcuda.so.1 is opened (dlopen) on the
 * first call, never before; later calls return the same id.  hugepool never
 * creates a CUDA context: a registration uses the calling thread's current
 * context, else an active primary context, else fails with ENXIO (initialise
 * CUDA first: cudaSetDevice(), cudaFree(0)).  Buffers are registered
 * portable and mapped (CU_MEMHOSTREGISTER_PORTABLE | DEVICEMAP).  -1 with
 * errno = ENODEV and one line on stderr where there is no driver or no
 * device. */
HUGEPOOL_API int hugepool_registrar_cuda(void);

/* The same for ROCm (hipHostRegister, libamdhip64.so opened on first call). */
HUGEPOOL_API int hugepool_registrar_hip(void);

/* hugepool_alloc(bytes), the buffer's whole mapping registered with
 * registrar `id`: a cached buffer registered before comes back with no
 * call.  NULL with errno: as hugepool_alloc(), EINVAL (no such registrar),
 * or the registrar's error (the buffer stays in hugepool's cache). */
HUGEPOOL_API HUGEPOOL_MALLOC_LIKE void *hugepool_alloc_registered(size_t bytes, int id);

/* Registers the live buffer at `ptr` (its start) with registrar `id`, unless
 * it is already.  0, or -1 with errno: EINVAL (not a live buffer, no such
 * registrar) or the registrar's error. */
HUGEPOOL_API int hugepool_register(void *ptr, int id);

/* The registration with `id` that holds `ptr` (any address inside a buffer):
 * the registrar's handle (an ibv_mr *, say; the CUDA registrar's is the
 * buffer's start), with the buffer's start and size if base / len are not
 * NULL; NULL if the buffer is not registered with `id`. */
HUGEPOOL_API void *hugepool_registration(const void *ptr, int id, void **base, size_t *len);

/* Is the buffer holding `ptr` registered with `id`? */
HUGEPOOL_API int hugepool_is_registered(const void *ptr, int id);

/* The counters of registrar `id`: 0, or -1 with errno = EINVAL. */
HUGEPOOL_API int hugepool_registrar_get_stats(int id, hugepool_registrar_stats *out);

/* ---- node-shared segments ---------------------------------------------------
 *
 * A segment is a buffer on hugetlb pages that other processes of the same
 * user on the node map too (ranks on one node copying into each other's
 * communication buffers).  Like every hugepool buffer its pages are reserved
 * when it is created: a short pool is ENOMEM from hugepool_segment_create()
 * with one line on stderr, never a SIGBUS later, and mapping it elsewhere
 * takes no further pages from the pool.
 *
 * The backing file has no name anywhere (a memfd, or an O_TMPFILE on a
 * hugetlbfs mount): its pages go back to the pool when the last process
 * holding it exits, however it exits.  Peers reach it through its creator's
 * descriptor (pidfd_getfd(), else /proc/<pid>/fd/<fd>), which the kernel
 * grants to processes of the creator's user only; the file is mode 0600 and,
 * as a memfd, sealed against resizing.  The creator keeps the descriptor open
 * until it unmaps the segment: peers map it while the creator holds it. */

/* What a creator hands to its peers: plain integers, to send as bytes
 * (MPI_BYTE, a socket, a file).  hugepool_segment_map() checks them all
 * against the file it finds, so a stale or forged handle gives an error. */
typedef struct hugepool_segment_handle {
  int64_t pid;        /* the creator */
  int64_t fd;         /* its descriptor of the file */
  uint64_t ino, dev;  /* the file's identity */
  uint64_t size;      /* bytes, a whole number of pages */
  uint64_t page_size; /* 2 MB or 1 GB */
} hugepool_segment_handle;

typedef struct hugepool_segment {
  void *addr;  /* the mapping in this process */
  size_t size; /* mapped bytes: a whole number of pages */
  size_t page_size;
  int fd;      /* the creator's descriptor (kept until unmap); -1 in a mapper */
  int created; /* 1: created here, 0: a peer's segment mapped here */
  hugepool_segment_handle handle;
} hugepool_segment;

typedef struct hugepool_segment_options {
  size_t page_size;      /* 0: hugepool_get_page_size() */
  int node;              /* HUGEPOOL_ANY_NODE, or bind and populate the pages on this node */
  const char *hugetlbfs; /* NULL: a memfd (no mount needed); "": the first hugetlbfs mount of
                            the page size in /proc/self/mountinfo; else a directory on one */
} hugepool_segment_options;

#define HUGEPOOL_SEGMENT_OPTIONS_INIT \
  { 0, HUGEPOOL_ANY_NODE, NULL }

/* Creates a segment of at least `bytes` bytes (rounded up to whole pages),
 * every page reserved and populated (on opts->node if one is given; opts may
 * be NULL).  Returns 0, or -1 with errno: ENOMEM (pool short, one line on
 * stderr), EINVAL (bytes 0, bad node or page size), ENOTSUP (no such page
 * size), ENOENT (no hugetlbfs mount of that page size), or the system's. */
HUGEPOOL_API int hugepool_segment_create(size_t bytes, const hugepool_segment_options *opts, hugepool_segment *out);

/* Maps a peer's segment from its handle.  Returns 0, or -1 with errno: EPERM
 * or EACCES (another user's segment), ESRCH (the creator is gone), ESTALE
 * (the descriptor is now another file), EINVAL (not a hugetlb segment of
 * that size), or the system's. */
HUGEPOOL_API int hugepool_segment_map(const hugepool_segment_handle *handle, hugepool_segment *out);

/* Unmaps a segment (created or mapped) and, in its creator, closes the
 * descriptor.  The pages go back to the pool once no process maps it.
 * Returns 0, or -1 with errno = EINVAL. */
HUGEPOOL_API int hugepool_segment_unmap(hugepool_segment *seg);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_HUGEPOOL_H */
