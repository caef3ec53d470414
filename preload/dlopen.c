/* SPDX-License-Identifier: BSD-3-Clause */
/* dlopen and dlmopen without RTLD_DEEPBIND.
 *
 * A library opened with RTLD_DEEPBIND (PHP does it for every extension)
 * looks symbols up in its own dependencies first, libc among them, so its
 * malloc, free and realloc are glibc's and not the preload's: a pointer the
 * program got from hugepool or the small heap reaches glibc's free (which
 * aborts: "double free or corruption"), and one glibc handed to the library
 * comes back to ours.  The second direction is safe (preload.c gives every
 * pointer it does not own to glibc); the first cannot be made safe inside
 * glibc.  So the flag is taken off before the call reaches the dynamic
 * linker, and the library binds to the malloc family the whole process
 * uses.
 *
 * The trade-off: such a library no longer prefers its own dependencies'
 * definitions of a symbol the program also defines.  That is what
 * RTLD_DEEPBIND exists for, and what ASan and other interposers refuse too
 * (ASan fails such a dlopen outright).  Counted in the statistics.
 *
 * Why a stub in assembly: glibc's dlopen looks at its return address to find
 * the caller, whose RUNPATH, $ORIGIN and namespace decide where the library
 * is searched for.  A C wrapper would make the preload the caller; the stub
 * changes the flag register and jumps, so glibc sees the program's own
 * return address.  dlmopen is changed for the base namespace only: a new
 * namespace has its own libc and never sees the preload. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hooks.h"
#include "preload.h"

/* glibc's entry points, found once (dlsym may allocate: our malloc copes). */
HPL_HIDDEN void *hpl_real_dlopen;
HPL_HIDDEN void *hpl_real_dlmopen;
/* dlopen/dlmopen calls whose RTLD_DEEPBIND was taken off. */
HPL_HIDDEN _Atomic uint64_t hpl_deepbind_stripped;

static void resolve(void) {
  if (!__atomic_load_n(&hpl_real_dlopen, __ATOMIC_ACQUIRE))
    __atomic_store_n(&hpl_real_dlopen, hp_dlsym(RTLD_NEXT, "dlopen"), __ATOMIC_RELEASE);
  if (!__atomic_load_n(&hpl_real_dlmopen, __ATOMIC_ACQUIRE))
    __atomic_store_n(&hpl_real_dlmopen, hp_dlsym(RTLD_NEXT, "dlmopen"), __ATOMIC_RELEASE);
}

/* Before any constructor of the program can call dlopen. */
__attribute__((constructor(101))) static void dlopen_constructor(void) { resolve(); }

/* glibc's dlopen, resolved first if need be: reached by a dlopen made
 * before the constructor above ran (another library's constructor; glibc
 * then sees this function as the caller), and by the small heap's load
 * below, whatever the order of the two constructors. */
HPL_HIDDEN void *hpl_dlopen_unresolved(const char *file, int mode);
HPL_HIDDEN void *hpl_dlmopen_unresolved(Lmid_t lmid, const char *file, int mode);

void *hpl_dlopen_unresolved(const char *file, int mode) {
  resolve();
  void *(*real)(const char *, int);
  void *sym = hpl_real_dlopen;
  memcpy(&real, &sym, sizeof(real)); /* dlsym's object pointer as a function pointer */
  return real ? real(file, mode) : NULL;
}

void *hpl_dlmopen_unresolved(Lmid_t lmid, const char *file, int mode) {
  resolve();
  void *(*real)(Lmid_t, const char *, int);
  void *sym = hpl_real_dlmopen;
  memcpy(&real, &sym, sizeof(real));
  return real ? real(lmid, file, mode) : NULL;
}

#if defined(__x86_64__)
_Static_assert(RTLD_DEEPBIND == 8, "the stubs below test bit 3");
/* dlopen(file = rdi, mode = esi); dlmopen(lmid = rdi, file = rsi, mode = edx). */
__asm__(".text\n"
        ".globl dlopen\n"
        ".type dlopen, @function\n"
        ".p2align 4\n"
        "dlopen:\n"
        "  testl $8, %esi\n"
        "  jz 1f\n"
        "  andl $-9, %esi\n"
        "  lock incq hpl_deepbind_stripped(%rip)\n"
        "1:\n"
        "  movq hpl_real_dlopen(%rip), %rax\n"
        "  testq %rax, %rax\n"
        "  jz hpl_dlopen_unresolved\n"
        "  jmp *%rax\n"
        ".size dlopen, .-dlopen\n"
        "\n"
        ".globl dlmopen\n"
        ".type dlmopen, @function\n"
        ".p2align 4\n"
        "dlmopen:\n"
        "  testq %rdi, %rdi\n" /* LM_ID_BASE is 0 */
        "  jnz 1f\n"
        "  testl $8, %edx\n"
        "  jz 1f\n"
        "  andl $-9, %edx\n"
        "  lock incq hpl_deepbind_stripped(%rip)\n"
        "1:\n"
        "  movq hpl_real_dlmopen(%rip), %rax\n"
        "  testq %rax, %rax\n"
        "  jz hpl_dlmopen_unresolved\n"
        "  jmp *%rax\n"
        ".size dlmopen, .-dlmopen\n");
#elif defined(__aarch64__)
_Static_assert(RTLD_DEEPBIND == 8, "the stubs below test bit 3");
/* dlopen(file = x0, mode = w1); dlmopen(lmid = x0, file = x1, mode = w2).
 * x16/x17 are the intra-procedure-call scratch registers. */
__asm__(".text\n"
        ".globl dlopen\n"
        ".type dlopen, %function\n"
        ".p2align 4\n"
        "dlopen:\n"
        "  tbz w1, #3, 2f\n"
        "  and w1, w1, #~8\n"
        "  adrp x16, hpl_deepbind_stripped\n"
        "  add x16, x16, :lo12:hpl_deepbind_stripped\n"
        "1: ldxr x17, [x16]\n"
        "  add x17, x17, #1\n"
        "  stxr w9, x17, [x16]\n"
        "  cbnz w9, 1b\n"
        "2: adrp x16, hpl_real_dlopen\n"
        "  ldr x16, [x16, :lo12:hpl_real_dlopen]\n"
        "  cbz x16, hpl_dlopen_unresolved\n"
        "  br x16\n"
        ".size dlopen, .-dlopen\n"
        "\n"
        ".globl dlmopen\n"
        ".type dlmopen, %function\n"
        ".p2align 4\n"
        "dlmopen:\n"
        "  cbnz x0, 2f\n"
        "  tbz w2, #3, 2f\n"
        "  and w2, w2, #~8\n"
        "  adrp x16, hpl_deepbind_stripped\n"
        "  add x16, x16, :lo12:hpl_deepbind_stripped\n"
        "1: ldxr x17, [x16]\n"
        "  add x17, x17, #1\n"
        "  stxr w9, x17, [x16]\n"
        "  cbnz w9, 1b\n"
        "2: adrp x16, hpl_real_dlmopen\n"
        "  ldr x16, [x16, :lo12:hpl_real_dlmopen]\n"
        "  cbz x16, hpl_dlmopen_unresolved\n"
        "  br x16\n"
        ".size dlmopen, .-dlmopen\n");
#else
/* Elsewhere the flag is left alone (see preload/README.md). */
#endif

/* ---- the small heap's object (small-heap-bridge.h) ------------------------ */
HPL_HIDDEN hp_small_heap_ops hpl_sh;

/* Loaded from the interposer's own directory, by absolute path: no search,
 * no variable names another file.  The directory is the one the interposer
 * itself was loaded from (the loader chose it: LD_PRELOAD, or the secure
 * directories alone for a setuid program, where the options, and so the
 * heap, are off anyway), with symbolic links resolved, so that a link to
 * the interposer finds the heap installed beside the real file.  Never
 * closed. */
static int small_heap_load(void) {
  char own[4096], path[PATH_MAX];
  const size_t room = sizeof(path) - sizeof("/" HP_SMALL_HEAP_LIB);
  bool found = hpl_own_path(own, sizeof(own)) && realpath(own, path) && strlen(path) < room;
  char *slash = found ? strrchr(path, '/') : NULL;
  if (!slash) {
    hp_warn("--small-heap: cannot tell which directory this interposer was loaded from (%s); small requests stay "
            "with glibc",
            found ? "no '/' in its path" : "its path unknown, unresolved or too long");
    return -1;
  }
  memcpy(slash + 1, HP_SMALL_HEAP_LIB, sizeof(HP_SMALL_HEAP_LIB));
  void *lib = hpl_dlopen_unresolved(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE); /* glibc's, found if need be */
  if (!lib) {
    const char *why = dlerror();
    hp_warn("--small-heap: cannot load the small heap: %s; small requests stay with glibc", why ? why : path);
    return -1;
  }
  hp_small_heap_entry_fn entry;
  void *sym = hp_dlsym(lib, HP_SMALL_HEAP_ENTRY);
  memcpy(&entry, &sym, sizeof(entry));
  const hp_small_heap_ops *ops = sym ? entry(hpl_small_heap_core()) : NULL;
  if (!ops || ops->version != HP_SMALL_HEAP_VERSION || ops->ops_size != sizeof(*ops)) {
    hp_warn("--small-heap: %s is not this interposer's (another build or version); small requests stay with glibc",
            path);
    return -1;
  }
  hpl_sh = *ops;
  return hpl_sh.init();
}

void hpl_small_heap_start(void) {
  if (atomic_load(&hpl_small_heap_on)) return;
  if (small_heap_load() == 0) {
    atomic_store(&hpl_small_heap_on, true); /* after hpl_sh: other threads may look */
    /* Its failed dlsym (not a CPython process) allocates the loader's
     * message: to glibc, as inside the hooks, or the heap would take its
     * first chunk (a fresh 2 MB page the kernel zeroes: 0.5 ms) in every
     * process that never allocates after. */
    hugepool_small_heap_thread.in_hook++;
    hpl_python_arenas();
    hugepool_small_heap_thread.in_hook--;
  } else {
    atomic_store(&hpl_glibc_direct, hpl_early_close()); /* glibc's heap alone after all */
  }
}
