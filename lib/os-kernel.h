/* SPDX-License-Identifier: BSD-3-Clause */
/* What the files of the OS layer (os*.c) share, and nothing else includes:
 * the way to the kernel, the /proc/self/maps walker, the reporter's
 * one-line voice and the page-size flags glibc lacks.  Not installed.
 * Lock order: none (see os.h).
 *
 * The way to the kernel (musl's mallocng keeps the same in its glue.h).
 * Inside libhugepool_preload.so a plain madvise or mprotect binds to the
 * preload's own exported one (preload/protect.c), which calls back into
 * the core (split.c) and from there into this layer: a cycle at run time.
 * So every call that makes, advises or protects memory goes straight to the
 * kernel, through the sys_* functions below (syscall(2)), never through a
 * symbol another object can interpose.
 *
 * Except one kind: a call that takes pages away from an address range a
 * program may have handed to a NIC or a GPU (a buffer's munmap, an mremap
 * that moves a buffer's pages, an mmap MAP_FIXED over them) goes through
 * libc's munmap / mremap / mmap, so that the registration caches of MPI
 * libraries (UCX, libfabric, Open MPI's memory hooks), which patch or hook
 * exactly those, see the range go (DESIGN.md: "release goes through libc
 * munmap").  The preload exports none of the three.  Each such call says
 * so where it is made ("libc: seen by registration hooks").
 *
 * A sanitizer build (never preloaded) sends the sys_* calls through libc
 * too: ASan and TSan intercept mmap and munmap to keep their shadow memory
 * right, and a mapping they never saw could inherit a stale shadow. */
#ifndef HUGEPOOL_OS_KERNEL_H
#define HUGEPOOL_OS_KERNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "os.h"

/* glibc defines MAP_HUGE_SHIFT and MADV_POPULATE_WRITE (2.35+), not these. */
#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << MAP_HUGE_SHIFT)
#endif
#ifndef MAP_HUGE_1GB
#define MAP_HUGE_1GB (30 << MAP_HUGE_SHIFT)
#endif

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HP_OS_VIA_LIBC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define HP_OS_VIA_LIBC 1
#endif
#endif

#ifdef HP_OS_VIA_LIBC
static inline void *sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  return mmap(addr, len, prot, flags, fd, off);
}
static inline int sys_munmap(void *addr, size_t len) { return munmap(addr, len); }
static inline int sys_madvise(void *addr, size_t len, int advice) { return madvise(addr, len, advice); }
static inline int sys_mprotect(void *addr, size_t len, int prot) { return mprotect(addr, len, prot); }
#else
/* syscall() returns -1 with errno for the kernel's -errno (MAP_FAILED for
 * mmap); every argument is passed as a long, as the kernel reads it. */
static inline void *sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  long r = syscall(SYS_mmap, (long)addr, (long)len, (long)prot, (long)flags, (long)fd, (long)off);
  void *p; /* the kernel answers with the address as a long: its bytes are the pointer's */
  memcpy(&p, &r, sizeof(p));
  return p;
}
_Static_assert(sizeof(long) == sizeof(void *), "syscall() answers mmap with a long");
static inline int sys_munmap(void *addr, size_t len) { return (int)syscall(SYS_munmap, (long)addr, (long)len); }
static inline int sys_madvise(void *addr, size_t len, int advice) {
  return (int)syscall(SYS_madvise, (long)addr, (long)len, (long)advice);
}
static inline int sys_mprotect(void *addr, size_t len, int prot) {
  return (int)syscall(SYS_mprotect, (long)addr, (long)len, (long)prot);
}
#endif

/* stat, fstat, lstat and memfd_create are glibc 2.33 and 2.27 names, which
 * no glibc before them has (the stat family was __xstat and friends): a
 * preloaded object that named them would not load under an older glibc
 * (libc-floor.h).  So the OS layer makes the system calls itself; glibc's
 * struct stat is the kernel's on x86-64 and aarch64. */
#ifdef HP_OS_VIA_LIBC
static inline int sys_fstat(int fd, struct stat *st) { return fstat(fd, st); }
static inline int sys_stat(const char *path, struct stat *st) { return stat(path, st); }
static inline int sys_lstat(const char *path, struct stat *st) { return lstat(path, st); }
#else
static inline int sys_fstat(int fd, struct stat *st) {
  return (int)syscall(SYS_newfstatat, (long)fd, (long)"", (long)st, (long)AT_EMPTY_PATH);
}
static inline int sys_stat(const char *path, struct stat *st) {
  return (int)syscall(SYS_newfstatat, (long)AT_FDCWD, (long)path, (long)st, 0L);
}
static inline int sys_lstat(const char *path, struct stat *st) {
  return (int)syscall(SYS_newfstatat, (long)AT_FDCWD, (long)path, (long)st, (long)AT_SYMLINK_NOFOLLOW);
}
#endif
static inline int sys_memfd_create(const char *name, unsigned flags) {
  return (int)syscall(SYS_memfd_create, (long)name, (long)flags);
}

/* Calls fn(start, end, perms, arg) for each line of /proc/self/maps in
 * address order (perms: "rwxp" and the rest of the line), until fn returns
 * false; no malloc, any line length.  0, or -1 with errno when the file
 * cannot be read. */
typedef bool (*os_maps_fn)(uintptr_t start, uintptr_t end, const char *perms, void *arg);
HP_INTERNAL int os_maps_each(os_maps_fn fn, void *arg);
/* Up to `max` mappings intersecting [lo, hi), clipped to it, in address
 * order.  -1 if /proc/self/maps cannot be read. */
HP_INTERNAL int os_mappings_in(uintptr_t lo, uintptr_t hi, uintptr_t (*out)[2], int max);
/* The protection (PROT_*) of the mapping holding addr; -1 if there is none
 * or /proc/self/maps cannot be read. */
HP_INTERNAL int os_prot_at(uintptr_t addr);

/* One line for the user, through the core's reporter (none yet: nothing). */
HP_INTERNAL void os_report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* HUGEPOOL_OS_KERNEL_H */
