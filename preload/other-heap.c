/* SPDX-License-Identifier: BSD-3-Clause */
/* The heap behind the interposer: whose malloc a request below the
 * threshold goes to, found once at initialisation.
 *
 * A site's module preloads hugepool into every program, and some programs
 * bring a heap of their own, which comes after the interposer in the
 * loader's order:
 *   - an allocator they link (Debian's redis-server needs libjemalloc.so.2;
 *     mimalloc, tcmalloc) or one the user put later in LD_PRELOAD.  Such a
 *     program may hand a block of that allocator's own API (mallocx,
 *     mi_malloc) to free(), and one of malloc() to its sized frees: a
 *     request below the threshold must go to that allocator, not to glibc
 *     (glibc's free of a jemalloc block aborts the program).  Large
 *     requests stay hugepool's;
 *   - a sanitizer's runtime (gcc's libasan, libtsan, liblsan; clang's with
 *     -shared-libsan), or valgrind's (memcheck replaces glibc's malloc, not
 *     ours), which must see every allocation to check it: the
 *     interposer then stays out of the way altogether (passive), every call
 *     to the sanitizer's malloc.  AddressSanitizer also refuses to start
 *     when its runtime is not the first library: __asan_default_options()
 *     below turns that check off, which is safe because everything goes to
 *     its allocator;
 *     clang's default static runtimes are in the program itself, whose
 *     malloc is bound before ours: passive there too (the interposer's
 *     mprotect, madvise and dlopen are still reached);
 * Until this is known, requests go to glibc, and each block glibc gave is
 * noted here, so that its free goes back to glibc whichever heap comes
 * after: the interposer's own start-up (dlsym, pthread_atfork) allocates a
 * few. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <gnu/libc-version.h>
#include <stdint.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hooks.h"
#include "preload.h"

hpl_heap hpl_next = {
    .malloc = __libc_malloc,
    .free = __libc_free,
    .calloc = __libc_calloc,
    .realloc = __libc_realloc,
    .memalign = __libc_memalign,
    .usable_size = NULL, /* glibc's: read from its chunk header (preload.c) */
};
atomic_bool hpl_other_heap;

/* ---- blocks glibc gave before the heap was known ------------------------ */
#define EARLY_SLOTS 256
/* A slot holds the block's key: the block itself when it is glibc's own,
 * its address + 1 when it lies over-aligned inside another (blocks are 16
 * aligned: a compare of keys never takes one kind for the other); NULL: a
 * free slot; &early_claim: a slot being filled. */
static void *_Atomic early[EARLY_SLOTS];
static _Alignas(16) char early_claim;
static _Atomic size_t early_size[EARLY_SLOTS]; /* what was asked: its usable size */
static void *_Atomic early_base[EARLY_SLOTS]; /* what __libc_free takes (over-aligned below) */
static atomic_size_t early_used;       /* the slots ever used: [0, early_used) */
static atomic_size_t early_live;       /* blocks noted now */
static atomic_size_t early_aligned;    /* of which over-aligned inside a larger block */
static atomic_bool early_overflowed;   /* a block was not noted: the glibc heap stays */
static atomic_bool early_closed;       /* glibc's heap is the one: nothing more noted */
/* The span they lie in (glibc's main heap): a free outside it looks no
 * further, whatever the blocks' lifetimes (dlerror's buffer lives on). */
static _Atomic uintptr_t early_low = UINTPTR_MAX, early_high;

static bool tagged(const void *key) { return ((uintptr_t)key & 1) != 0; }

/* Forgets slot i if it still holds `key`: true if this call did. */
static bool early_drop(size_t i, void *key) {
  void *expected = key;
  if (!atomic_compare_exchange_strong(&early[i], &expected, NULL)) return false;
  if (tagged(key)) atomic_fetch_sub(&early_aligned, 1);
  atomic_fetch_sub(&early_live, 1);
  return true;
}

/* Notes `ptr` (from `base`; the caller counted an over-aligned one in
 * early_aligned); false when every slot is taken. */
static bool early_note(void *ptr, size_t size, void *base) {
  uintptr_t a = (uintptr_t)ptr, low = atomic_load(&early_low), high = atomic_load(&early_high);
  while (a < low && !atomic_compare_exchange_weak(&early_low, &low, a)) {
  }
  while (a >= high && !atomic_compare_exchange_weak(&early_high, &high, a + 1)) {
  }
  for (size_t i = 0; i < EARLY_SLOTS; i++) { /* a sanitizer's start frees and takes many: slots are reused */
    void *empty = NULL;
    if (atomic_load_explicit(&early[i], memory_order_relaxed) != NULL ||
        !atomic_compare_exchange_strong(&early[i], &empty, (void *)&early_claim))
      continue;
    early_size[i] = size; /* the slot is this thread's until published below */
    early_base[i] = base;
    size_t used = atomic_load(&early_used);
    while (used < i + 1 && !atomic_compare_exchange_weak(&early_used, &used, i + 1)) {
    }
    void *key = base == ptr ? ptr : (char *)ptr + 1;
    atomic_fetch_add(&early_live, 1);
    atomic_store(&early[i], key);
    /* Closed meanwhile (another thread decided glibc's heap, and may have
     * looked at this slot before it was published): a block of glibc's own
     * needs no slot; hpl_early_close() or this drops it, whichever first. */
    if (key == ptr && atomic_load(&early_closed)) (void)early_drop(i, key);
    return true;
  }
  atomic_store(&early_overflowed, true);
  return false;
}

/* Is `ptr` a block glibc gave before the heap was known?  Its size (0: no)
 * and, in *base, what __libc_free takes; `take`: forget it. */
static size_t early_find(void *ptr, bool take, void **base) {
  uintptr_t a = (uintptr_t)ptr;
  if (HPL_LIKELY(atomic_load_explicit(&early_live, memory_order_relaxed) == 0) ||
      a < atomic_load_explicit(&early_low, memory_order_relaxed) ||
      a >= atomic_load_explicit(&early_high, memory_order_relaxed))
    return 0;
  size_t n = atomic_load_explicit(&early_used, memory_order_acquire);
  for (size_t i = 0; i < n && i < EARLY_SLOTS; i++) {
    void *key = atomic_load_explicit(&early[i], memory_order_acquire);
    if (key != ptr && key != (char *)ptr + 1) continue;
    size_t size = early_size[i];
    void *from = early_base[i];
    /* Still this block's slot once read (only its owner can note it again)? */
    if (take ? !early_drop(i, key) : atomic_load(&early[i]) != key) return 0;
    if (base) *base = from;
    return size ? size : 1;
  }
  return 0;
}

/* The object an address is in, from the loader's list of objects and their
 * loaded segments: its key (where its first segment starts: never 0) and,
 * where asked, its name.  dladdr says as much but also walks every symbol
 * of the object to name the nearest: 25-30 us a call in libc.so.6, most of
 * the interposer's start in every process (measured).  This takes the
 * loader's list lock (recursive, held by the loader only briefly: dladdr
 * takes its load lock), and allocates nothing. */
struct object_query {
  uintptr_t addr, key;
  char *name; /* NULL: not asked */
  size_t name_len;
};

static int find_object(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  struct object_query *q = data;
  uintptr_t first = 0;
  bool inside = false;
  for (size_t i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD) continue;
    uintptr_t start = (uintptr_t)info->dlpi_addr + (uintptr_t)ph->p_vaddr;
    if (!first) first = start;
    if (q->addr >= start && q->addr - start < (uintptr_t)ph->p_memsz) inside = true;
  }
  if (!inside || !first) return 0;
  q->key = first;
  if (q->name) (void)snprintf(q->name, q->name_len, "%s", info->dlpi_name ? info->dlpi_name : "");
  return 1;
}

static uintptr_t base_of(const void *p) {
  struct object_query q = {(uintptr_t)p, 0, NULL, 0};
  return p && dl_iterate_phdr(find_object, &q) ? q.key : 0;
}

/* The object a function is in (its address by its bytes: ISO C). */
static uintptr_t code_base(void (*fn)(void)) {
  void *p;
  memcpy(&p, &fn, sizeof(p));
  return base_of(p);
}

/* Is libc.so.6 the object that defines `fn` (a sanitizer defines glibc's
 * __libc_memalign, mimalloc all of the __libc_* names)? */
static bool in_libc(void *fn) { return fn && base_of(fn) == code_base((void (*)(void))gnu_get_libc_version); }

static bool libc_memalign_is_glibcs(void) {
  static atomic_int answer; /* 0: not asked yet, 1: glibc's, 2: another library's */
  if (!atomic_load(&answer)) {
    void *fn;
    __typeof__(&__libc_memalign) bound = __libc_memalign;
    memcpy(&fn, &bound, sizeof(fn));
    atomic_store(&answer, in_libc(fn) ? 1 : 2);
  }
  return atomic_load(&answer) == 1;
}

void *hpl_early_alloc(size_t size, bool zero, size_t alignment) {
  void *p;
  if (alignment <= 16 || libc_memalign_is_glibcs() || atomic_load(&early_closed)) {
    p = alignment > 16 ? __libc_memalign(alignment, size) : zero ? __libc_calloc(1, size) : __libc_malloc(size);
    if (p && !atomic_load(&early_closed)) (void)early_note(p, size, p);
    return p;
  }
  /* Aligned within a larger block of __libc_malloc's heap, counted before
   * the table can be closed (hpl_early_close() keeps the fast path
   * off while one is left: glibc's free would not take it). */
  atomic_fetch_add(&early_aligned, 1);
  void *base = NULL;
  if (!atomic_load(&early_closed) && size <= SIZE_MAX - alignment) base = __libc_malloc(size + alignment);
  p = base ? (char *)base + (alignment - (uintptr_t)base % alignment) : NULL; /* never base itself */
  if (p && early_note(p, size, base)) return p;
  atomic_fetch_sub(&early_aligned, 1);
  if (base) __libc_free(base);
  if (atomic_load(&early_closed)) return __libc_memalign(alignment, size);
  errno = ENOMEM;
  return NULL;
}

bool hpl_early_close(void) {
  atomic_store(&early_closed, true);
  size_t n = atomic_load(&early_used);
  for (size_t i = 0; i < n && i < EARLY_SLOTS; i++) {
    void *key = atomic_load(&early[i]);
    if (key && key != (void *)&early_claim && !tagged(key)) (void)early_drop(i, key); /* glibc's own block */
  }
  return atomic_load(&early_aligned) == 0; /* read after the flag: an adder counts before it reads the flag */
}

void *hpl_next_alloc(size_t size, bool zero, size_t alignment) {
  if (alignment > 16) return hpl_next.memalign(alignment, size);
  return zero ? hpl_next.calloc(1, size) : hpl_next.malloc(size);
}

/* ---- a block that is not hugepool's: glibc's or the heap's behind us ---- */
/* glibc's usable size, read from its chunk header (malloc_usable_size is
 * ours, and glibc exports no other name for it): the size word before the
 * pointer, bit 1 = mmapped chunk (two header words) else one. */
static size_t glibc_usable_size(const void *ptr) {
  size_t word = ((const size_t *)ptr)[-1];
  size_t chunk = word & ~(size_t)7;
  return (word & 2) ? chunk - 2 * sizeof(size_t) : chunk - sizeof(size_t);
}

static bool other_heap(void) { return HPL_UNLIKELY(atomic_load_explicit(&hpl_other_heap, memory_order_acquire)); }

void hpl_other_free(void *ptr) {
  void *base = ptr;
  if (early_find(ptr, true, &base) || !other_heap())
    __libc_free(base);
  else
    hpl_next.free(ptr);
}

size_t hpl_other_usable_size(void *ptr) {
  size_t early_bytes = early_find(ptr, false, NULL);
  if (early_bytes) return early_bytes;
  if (!other_heap()) return glibc_usable_size(ptr);
  return hpl_next.usable_size ? hpl_next.usable_size(ptr) : 0;
}

void *hpl_other_realloc(void *ptr, size_t size) {
  void *base = ptr;
  size_t old = early_find(ptr, false, &base);
  if (!old) return other_heap() ? hpl_next.realloc(ptr, size) : __libc_realloc(ptr, size);
  void *fresh;
  if (!other_heap() && base == ptr) { /* glibc's block, resized by glibc (and noted again, if still noting) */
    (void)early_find(ptr, true, NULL);
    fresh = __libc_realloc(ptr, size);
    if (!atomic_load(&early_closed)) (void)early_note(fresh ? fresh : ptr, fresh ? size : old, fresh ? fresh : ptr);
    return fresh;
  }
  /* into the heap behind us (or, before it is known, a new early block) */
  fresh = other_heap() ? hpl_next.malloc(size) : hpl_early_alloc(size, false, 0);
  if (!fresh) return NULL;
  memcpy(fresh, ptr, old < size ? old : size);
  if (early_find(ptr, true, &base)) __libc_free(base);
  return fresh;
}

/* ---- whose heap --------------------------------------------------------- */
bool hpl_next_whole;

/* hpl_next's field from the same name after ours (kept if there is none),
 * and whether it is in the object `base` (that of the next malloc). */
static bool next_into(void *field, size_t size, const char *name, uintptr_t base) {
  void *found = hp_dlsym(RTLD_NEXT, name);
  if (found) memcpy(field, &found, size); /* ISO C: a function pointer from an object pointer, by its bytes */
  return found && base_of(found) == base;
}

/* The loader names the program "": its name as it was started, as dladdr
 * says (libc has started by now: environ is set). */
static void object_of(void *fn, char *out, size_t len) {
  struct object_query q = {(uintptr_t)fn, 0, out, len};
  if (len && (!dl_iterate_phdr(find_object, &q) || !out[0]))
    (void)snprintf(out, len, "%s", program_invocation_name && program_invocation_name[0] ? program_invocation_name
                                                                                          : "the program");
}

bool hpl_own_path(char *out, size_t len) {
  bool (*self)(char *, size_t) = hpl_own_path;
  struct object_query q = {0, 0, out, len};
  memcpy(&q.addr, &self, sizeof(q.addr));
  if (len < 2 || !dl_iterate_phdr(find_object, &q)) return false;
  return out[0] != '\0' && strlen(out) < len - 1; /* len - 1 characters: maybe cut */
}

/* valgrind's tools (memcheck, helgrind, massif) replace glibc's malloc
 * through the objects they preload before ours (vgpreload_*.so). */
static int note_valgrind(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  if (!info->dlpi_name || !strstr(info->dlpi_name, "/vgpreload_core")) return 0;
  *(const char **)data = info->dlpi_name;
  return 1;
}

/* Every lookup below finds its name in a process of glibc's heap alone: a
 * failed one would allocate dlerror's message and start glibc's malloc in a
 * program that never calls it (/bin/true: 3 system calls, 3 page faults). */
hpl_heap_kind hpl_find_heap(char *who, size_t len) {
  void *next = hp_dlsym(RTLD_NEXT, "malloc");
  void *first = hp_dlsym(RTLD_DEFAULT, "malloc");
  /* Is the next malloc libc.so.6's own?  An allocator may define glibc's
   * __libc_malloc too (mimalloc does), which is then what that name binds:
   * the object that defines it says. */
  bool next_libc = in_libc(next);
  bool ours_first = base_of(first) == code_base((void (*)(void))hpl_find_heap);
  /* Every sanitizer that keeps its own allocator exports this (ASan, TSan,
   * LSan, MSan, HWASan, MemProf): from a library after ours, whose malloc is
   * then next, or from the program (clang's static runtimes), whose malloc
   * the program binds before ours.  UBSan, which keeps none, does not. */
  void *sanitizer = NULL;
  if (!next_libc || !ours_first) sanitizer = hp_dlsym(RTLD_DEFAULT, "__sanitizer_get_ownership");
  const char *valgrind = NULL;
  bool checker = sanitizer || dl_iterate_phdr(note_valgrind, &valgrind);
  if (valgrind)
    (void)snprintf(who, len, "%s", valgrind);
  else if (sanitizer)
    object_of(sanitizer, who, len);
  if (!next || next_libc) return checker ? HPL_HEAP_SANITIZER : HPL_HEAP_GLIBC;
  if (!checker) object_of(next, who, len);
  if (!checker && atomic_load(&early_overflowed)) return HPL_HEAP_GLIBC; /* its blocks could not be told apart */
  uintptr_t base = base_of(next);
  bool whole = next_into(&hpl_next.malloc, sizeof(hpl_next.malloc), "malloc", base);
  whole &= next_into(&hpl_next.free, sizeof(hpl_next.free), "free", base);
  whole &= next_into(&hpl_next.calloc, sizeof(hpl_next.calloc), "calloc", base);
  whole &= next_into(&hpl_next.realloc, sizeof(hpl_next.realloc), "realloc", base);
  whole &= next_into(&hpl_next.memalign, sizeof(hpl_next.memalign), "memalign", base);
  whole &= next_into(&hpl_next.usable_size, sizeof(hpl_next.usable_size), "malloc_usable_size", base);
  hpl_next_whole = whole;
  atomic_store_explicit(&hpl_other_heap, true, memory_order_release);
  return checker ? HPL_HEAP_SANITIZER : HPL_HEAP_OTHER;
}

/* Is the object `who` in LD_PRELOAD (its path or its file name there)?
 * Then the program itself does not link it, and every call it makes to it
 * is one of the malloc family (HUGEPOOL_OTHER_HEAP=auto shares). */
static bool in_ld_preload(const char *who) {
  const char *list = getenv("LD_PRELOAD");
  const char *base = strrchr(who, '/');
  base = base ? base + 1 : who;
  size_t base_len = strlen(base);
  for (const char *c = list; c && *c;) {
    size_t len = strcspn(c, " :");
    const char *name = c;
    for (const char *k = c; k < c + len; k++)
      if (*k == '/') name = k + 1;
    size_t name_len = len - (size_t)(name - c);
    if (len && name_len == base_len && memcmp(name, base, base_len) == 0) return true;
    c += len;
    c += strspn(c, " :");
  }
  return false;
}

bool hpl_share_other_heap(const char *who) {
  long long mode = option_get(HP_OPT_OTHER_HEAP);
  if (mode == HP_OTHER_HEAP_AUTO) return in_ld_preload(who);
  return mode == HP_OTHER_HEAP_SHARE;
}

/* ---- AddressSanitizer's start ------------------------------------------- */
/* gcc links libasan.so, and its start refuses a process whose first library
 * is not libasan ("ASan runtime does not come first in initial library
 * list"), which the module's LD_PRELOAD always is.  Its options begin with
 * this function's answer (the program's own definition, if any, comes
 * first in the lookup and wins; ASAN_OPTIONS is read after it, so a user's
 * setting still holds).  The check is there for interposers that keep
 * blocks from ASan; this one hands every call to it (HPL_HEAP_SANITIZER). */
__attribute__((visibility("default"))) const char *__asan_default_options(void);
const char *__asan_default_options(void) {
  /* Under an older glibc the interposer is passive towards glibc alone
   * (libc-floor.h): ASan's check stands, and says why it refuses. */
  return hp_libc_complete() ? "verify_asan_link_order=0" : "";
}
