/* SPDX-License-Identifier: BSD-3-Clause */
/* The OS contract: the bottom of lib/ (os.c and os-*.c).  Not installed.
 *
 * What it owns: every system call hugepool makes on memory and files.  Its
 * rules: it includes no other header of lib/ and calls nothing above it;
 * what it has to tell the user (a failed munmap, a move that had to copy)
 * goes to the reporter the core installs (os_set_reporter: the core's
 * hp_warn), so the layer stays usable alone.  Lock order: it takes only
 * its own private locks, never one of the core's, and holds none when it
 * returns: a caller may hold any lock of the core while it calls in. */
#ifndef HUGEPOOL_OS_H
#define HUGEPOOL_OS_H

#include <stdbool.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every internal function of lib/ is hidden: the library exports only the
 * hugepool_* API. */
#define HP_INTERNAL __attribute__((visibility("hidden")))

#define HP_2M ((size_t)2 << 20)
#define HP_1G ((size_t)1 << 30)

/* ---- OS layer (os.c, os-*.c): the only files that make system calls ----
 * Memory (mmap, munmap, madvise, mprotect, mbind, mremap, userfaultfd),
 * files (sysfs, /proc, the statistics file, stderr) and the fork
 * handshake's pipe go through these functions; no other file of lib/ or
 * preload/ makes those calls (lint/layers checks the objects).  Calls on
 * memory reach the kernel past any interposer, but for the releases that
 * registration caches must see (os-kernel.h says which, and why).
 * The contract, for every function below:
 *   - a pointer result is NULL on failure, an int / ssize_t / long result
 *     is -1; either way errno is the failing call's (EINVAL for a file whose
 *     text is not what was expected) and nothing was changed;
 *   - a bool result answers a question: false also when the answer cannot
 *     be read;
 *   - a void function cannot fail in a way its caller could act on (a
 *     failed munmap is reported through os_set_reporter's function).
 * Nothing here allocates with malloc: the preload calls it from malloc. */
HP_INTERNAL void *os_map_huge(size_t size, size_t page_size);
HP_INTERNAL void *os_map_anon(size_t size, size_t align, bool want_thp);
HP_INTERNAL void os_unmap(void *addr, size_t size);
HP_INTERNAL int os_bind_node(void *addr, size_t size, int node);
HP_INTERNAL int os_populate(void *addr, size_t size);
/* madvise and mprotect straight to the kernel, past any interposer (the
 * preload's own exports, protect.c, included): the preload's calls before
 * it found libc's, and the small heap's jemalloc on its own metadata.
 * pkey_mprotect likewise (-1 with ENOSYS where the headers lack it). */
HP_INTERNAL int os_madvise(void *addr, size_t len, int advice);
HP_INTERNAL int os_mprotect(void *addr, size_t len, int prot);
HP_INTERNAL int os_pkey_mprotect(void *addr, size_t len, int prot, int pkey);
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
 * returns with the buffer in two parts (see os-move.c). */
HP_INTERNAL int os_move(void *from, size_t size, void *to, size_t page_size);
/* As os_move() for a range inside one mapping (one mremap call). */
HP_INTERNAL int os_move_mapping(void *from, size_t size, void *to);
/* Replaces the hugetlb buffer [addr, addr + size), pages of `page_size`, by
 * 4 KB pages at the same address, carrying over the pages that exist (a
 * fork's child, os-move.c).  0, or -1 with errno and the buffer as it was. */
HP_INTERNAL int os_move_to_small(void *addr, size_t size, size_t page_size);
/* Replaces the 2 MB hugetlb page at `page` (2 MB aligned, of a live
 * buffer) by 4 KB pages at the same address with the same contents and
 * protection; its hugetlb page goes back to the pool (os-split.c).
 * others_may_write: other threads may write to the page meanwhile, so it is
 * write-protected through a userfaultfd while it is copied; where that is
 * not possible and another thread could write, nothing is done: -1 with
 * ENOMEM (reported once).  0, or -1 with errno and the page as it was. */
HP_INTERNAL int os_split_huge_page(void *page, bool others_may_write);
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
HP_INTERNAL bool os_node_has_memory(int node);
/* How many NUMA nodes a first touch by this process may place a page on:
 * nodes with CPUs and memory that it may use (0 if unreadable); the node
 * files are read at the first question. */
HP_INTERNAL int os_node_count(void);
/* The CPUs of the NUMA node the calling thread runs on, into *set (the
 * getcpu system call, /sys/devices/system/node/nodeN/cpulist); false where
 * they cannot be read. */
HP_INTERNAL bool os_node_cpus(cpu_set_t *set);
/* Free huge pages not promised to any mapping; node < 0: whole pool.
 * (The whole pool's count is the free count alone when the reserved count
 * cannot be read.) */
HP_INTERNAL long os_pool_available(size_t page_size, int node);
HP_INTERNAL long os_pool_total(size_t page_size, int node);
/* The node-wide surplus pages the kernel may add on demand
 * (nr_overcommit_hugepages), or -1. */
HP_INTERNAL long os_pool_overcommit(size_t page_size);
/* Reads at most len - 1 bytes of a small file (sysfs, /proc) into buf and
 * NUL-terminates them; returns the bytes read. */
HP_INTERNAL ssize_t os_read_file(const char *path, char *buf, size_t len);
/* Writes all of data, retrying after EINTR and short writes. */
HP_INTERNAL int os_write_all(int fd, const void *data, size_t len);
HP_INTERNAL void os_write_stderr(const char *text, size_t len);
/* Keeps a close-on-exec duplicate of the stderr the process started with,
 * high above the descriptors programs use; os_write_report writes there
 * (the exit statistics), os_write_stderr when fd 2 is closed (os-io.c). */
HP_INTERNAL void os_keep_stderr(void);
HP_INTERNAL void os_write_report(const char *text, size_t len);
/* Writes data to a new file at path (0644 less the umask), or replaces
 * this user's own regular file there with a new one; never opens what is
 * there, never blocks.  -1 with EEXIST when something else is there
 * (a symlink, a FIFO, another user's file): left as it is. */
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
/* CLOCK_MONOTONIC_COARSE in ns (the vDSO: no system call), for deadlines
 * counted in milliseconds. */
HP_INTERNAL long long os_coarse_ns(void);
/* The same clock in milliseconds. */
HP_INTERNAL long long os_coarse_ms(void);

/* How the OS layer reports what it cannot return: one line of text (no
 * prefix, no newline) handed to `report`, which the core installs at init
 * (hp_warn, so HUGEPOOL_WARN=0 silences it).  Before that, and
 * with NULL, the OS layer says nothing.  `report` must not call malloc. */
typedef void (*os_reporter)(const char *text);
HP_INTERNAL void os_set_reporter(os_reporter report);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_OS_H */
