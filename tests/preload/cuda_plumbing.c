/* SPDX-License-Identifier: BSD-3-Clause */
/* The preload's CUDA plumbing (preload/cuda.c) against a FAKE driver and
 * runtime (fake-cuda/): which calls it interposes, what cuGetProcAddress
 * hands back, how many calls reach the driver, the error codes a program
 * sees.  The fake proves no registration: the mechanism (registered once,
 * kept while cached, dropped with the mapping, never in a forked child) is
 * proven in tests/core/test_registrar.cpp with registrars the kernel shows.
 *
 *   cuda_plumbing served   under hugepool-run --cuda, fakes on LD_LIBRARY_PATH
 *   cuda_plumbing all      under hugepool-run --cuda=all
 *   cuda_plumbing plain    under hugepool-run without --cuda
 *   cuda_plumbing nocuda   under hugepool-run --cuda: never loads libcuda
 *   cuda_plumbing toolkit  under hugepool-run --cuda with a CUDA toolkit's
 *                          real libcudart and its stub libcuda.so (the
 *                          driver's export table, every call an error):
 *                          the registrar resolves the driver's entry points,
 *                          calls reach the real runtime, errors, no crash */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

typedef int (*reg_fn)(void *, size_t, unsigned);
typedef int (*unreg_fn)(void *);
typedef int (*gpa_fn)(const char *, void **, int, uint64_t, int *);
typedef void (*calls_fn)(long *, long *);
typedef size_t (*length_fn)(const void *);
typedef size_t (*trim_fn)(void);
typedef int (*copy_fn)(void *, const void *, size_t, int);
typedef int (*dtoh_fn)(void *, uint64_t, size_t);
typedef int (*htod_fn)(uint64_t, const void *, size_t);
typedef int (*copy_2d_fn)(void *, size_t, const void *, size_t, size_t, size_t, int);
typedef int (*host_alloc_fn)(void **, size_t, unsigned);
typedef int (*host_free_fn)(void *);
typedef void (*host_calls_fn)(long *, long *, long *);
typedef int (*entry_fn)(const char *, void **, unsigned long long, int *);
typedef int (*entry_version_fn)(const char *, void **, unsigned, unsigned long long, int *);

static int fails;
static void check(int ok, const char *what) {
  printf("%s %s\n", ok ? "PASS" : "FAIL", what);
  fails += !ok;
}

static void *sym(void *handle, const char *name) {
  void *p = dlsym(handle, name);
  if (!p) {
    printf("FAIL no %s\n", name);
    exit(1);
  }
  return p;
}
#define FN(type, handle, name) ((type)(uintptr_t)sym(handle, name))

static void *driver;
static long reg_calls(void) {
  long r, u;
  FN(calls_fn, driver, "fake_cuda_calls")(&r, &u);
  return r;
}
static long unreg_calls(void) {
  long r, u;
  FN(calls_fn, driver, "fake_cuda_calls")(&r, &u);
  return u;
}

static const size_t asked = (63u << 20) + 1; /* a 64 MiB hugepool buffer */

/* The kernel's page size (kB) of the mapping holding p: /proc/self/smaps. */
static long kernel_page_kb(const void *p) {
  FILE *f = fopen("/proc/self/smaps", "r");
  char line[512];
  bool in = false;
  long kb = -1;
  while (f && fgets(line, sizeof(line), f)) {
    uintptr_t lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
      in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
    else if (in && sscanf(line, "KernelPageSize: %ld kB", &kb) == 1)
      break;
  }
  if (f) fclose(f);
  return kb;
}

static long host_calls(int which) { /* 0: the driver's pinned allocations, 1: its frees, 2: synchronizes */
  long c[3];
  FN(host_calls_fn, driver, "fake_cuda_host_calls")(&c[0], &c[1], &c[2]);
  return c[which];
}

/* Rule 8: pinned allocations of 1 MiB or more are registered hugepool
 * buffers; their free waits for the context, then caches them. */
static void hostalloc(void) {
  host_alloc_fn halloc = FN(host_alloc_fn, RTLD_DEFAULT, "cudaHostAlloc");
  host_free_fn hfree = FN(host_free_fn, RTLD_DEFAULT, "cudaFreeHost");
  length_fn length = FN(length_fn, driver, "fake_cuda_registered_length");
  gpa_fn gpa = FN(gpa_fn, RTLD_DEFAULT, "cuGetProcAddress_v2");
  void *h = NULL;
  check(halloc(&h, asked, 2 /* Mapped */) == 0 && h && kernel_page_kb(h) == 2048 && host_calls(0) == 0,
        "cudaHostAlloc(Mapped) of 63 MiB: a buffer on 2 MB pages (smaps), not the driver's");
  check(reg_calls() == 1 && length(h) == 64u << 20, "cudaHostAlloc: its whole mapping registered once");
  memset(h, 7, asked);
  check(FN(reg_fn, RTLD_DEFAULT, "cudaHostRegister")((char *)h + 4096, 4096, 0) == 712 && reg_calls() == 1,
        "cudaHostRegister of served memory: 712, as the driver answers for its own pinned memory");
  check(hfree(h) == 0 && host_calls(1) == 0 && host_calls(2) == 1 && unreg_calls() == 0,
        "cudaFreeHost: the context synchronized, the buffer cached, still registered");
  void *again = NULL;
  check(halloc(&again, asked, 0) == 0 && again == h && reg_calls() == 1,
        "cudaHostAlloc again: the cached buffer, no registration");
  check(FN(host_free_fn, RTLD_DEFAULT, "cuMemFreeHost")(again) == 0 && host_calls(1) == 0 && host_calls(2) == 2,
        "cuMemFreeHost of it: served too");
  void *m = NULL, *m2 = NULL, *m3 = NULL;
  check(FN(int (*)(void **, size_t), RTLD_DEFAULT, "cudaMallocHost")(&m, asked) == 0 && kernel_page_kb(m) == 2048 &&
            FN(int (*)(void **, size_t), RTLD_DEFAULT, "cuMemAllocHost_v2")(&m2, asked) == 0 &&
            kernel_page_kb(m2) == 2048 && halloc(&m3, asked, 3 /* PORTABLE | Mapped */) == 0 &&
            kernel_page_kb(m3) == 2048 && host_calls(0) == 0,
        "cudaMallocHost, cuMemAllocHost_v2 and cudaHostAlloc(Portable | Mapped): served");
  check(hfree(m) == 0 && hfree(m2) == 0 && hfree(m3) == 0 && host_calls(1) == 0, "and their frees");
  check(halloc(NULL, asked, 0) == 1 && host_calls(0) == 0, "cudaHostAlloc(NULL, ...): the driver's answer");
  void *small = NULL, *wc = NULL;
  check(halloc(&small, 4096, 0) == 0 && host_calls(0) == 1 && hfree(small) == 0 && host_calls(1) == 1,
        "4 KiB: the driver's allocation and free");
  check(halloc(&wc, asked, 4 /* WriteCombined */) == 0 && host_calls(0) == 2 && hfree(wc) == 0 && host_calls(1) == 2,
        "WriteCombined: the driver's");
  void *d = NULL;
  check(FN(host_alloc_fn, RTLD_DEFAULT, "cuMemHostAlloc")(&d, 2 * asked, 1 /* PORTABLE */) == 0 &&
            kernel_page_kb(d) == 2048 && host_calls(0) == 2 && length(d) == 128u << 20,
        "cuMemHostAlloc(PORTABLE) of 126 MiB: served and registered");
  void *fn = NULL;
  long syncs = host_calls(2);
  check(gpa("cuMemFreeHost", &fn, 12000, 0, NULL) == 0 && fn &&
            fn != FN(void *(*)(const char *), driver, "fake_cuda_internal")("cuMemFreeHost") &&
            ((host_free_fn)(uintptr_t)fn)(d) == 0 && host_calls(1) == 2 && host_calls(2) == syncs + 1,
        "cuGetProcAddress(cuMemFreeHost) hands back hugepool's: a served buffer never reaches the driver's free");
  void *p = NULL;
  check(FN(host_alloc_fn, driver, "cuMemHostAlloc")(&p, asked, 0) == 0 && hfree(p) == 0 && host_calls(1) == 3,
        "cudaFreeHost of the driver's own allocation: the driver's free");
  void *f = NULL;
  check(halloc(&f, asked, 0) == 0 && host_calls(0) == 3, "a served buffer before a fork");
  syncs = host_calls(2);
  pid_t child = fork();
  if (child == 0) _exit(hfree(f) == 0 && host_calls(1) == 3 && host_calls(2) == syncs ? 0 : 1);
  int st = 1;
  waitpid(child, &st, 0);
  check(WIFEXITED(st) && WEXITSTATUS(st) == 0,
        "a forked child's cudaFreeHost of it: back to hugepool's cache, no CUDA call, not the driver's free");
  check(hfree(f) == 0 && host_calls(2) == syncs + 1, "the parent's own free of it: served");
  check(FN(trim_fn, RTLD_DEFAULT, "hugepool_trim")() > 0 && unreg_calls() == reg_calls() && reg_calls() >= 2,
        "trim unregisters every mapping registered");
}

/* PyTorch registers a block in chunks from several threads at once. */
enum { CHUNKS = 8 };
static char *chunked;
static int chunk_rc[CHUNKS];
static void *register_chunk(void *arg) {
  size_t i = (size_t)(uintptr_t)arg, chunk = (128u << 20) / CHUNKS;
  chunk_rc[i] = FN(reg_fn, RTLD_DEFAULT, "cudaHostRegister")(chunked + i * chunk, chunk, 0);
  return NULL;
}

static void served(void) {
  /* The program's calls go through the global scope, as a linked program's would. */
  reg_fn reg = FN(reg_fn, RTLD_DEFAULT, "cuMemHostRegister_v2");
  unreg_fn unreg = FN(unreg_fn, RTLD_DEFAULT, "cuMemHostUnregister");
  reg_fn creg = FN(reg_fn, RTLD_DEFAULT, "cudaHostRegister");
  unreg_fn cunreg = FN(unreg_fn, RTLD_DEFAULT, "cudaHostUnregister");
  gpa_fn gpa = FN(gpa_fn, RTLD_DEFAULT, "cuGetProcAddress_v2");
  length_fn length = FN(length_fn, driver, "fake_cuda_registered_length");
  char *p = malloc(asked);
  check(p && FN(int (*)(const void *), RTLD_DEFAULT, "hugepool_owns")(p), "a 63 MiB malloc is a hugepool buffer");
  check(reg(p, asked, 0) == 0 && reg_calls() == 1, "first cuMemHostRegister reaches the driver once");
  check(length(p) == 64u << 20, "the driver registered the whole 64 MiB mapping");
  check(reg(p + 4096, 4096, 0) == 712 && reg_calls() == 1, "an overlapping register: 712, no driver call");
  check(unreg(p) == 0 && unreg_calls() == 0, "the program's unregister keeps the registration");
  check(unreg(p) == 713, "a second unregister: 713");
  void *fn = NULL;
  int status = -1;
  check(gpa("cuMemHostRegister", &fn, 12000, 0, &status) == 0 && fn &&
            fn != FN(void *(*)(const char *), driver, "fake_cuda_internal")("cuMemHostRegister"),
        "cuGetProcAddress_v2 hands back the preload's cuMemHostRegister");
  check(fn && ((reg_fn)(uintptr_t)fn)(p, asked, 0) == 0 && reg_calls() == 1,
        "a register through cuGetProcAddress costs no driver call");
  void *ufn = NULL;
  check(gpa("cuMemHostUnregister", &ufn, 12000, 0, NULL) == 0 && ufn && ((unreg_fn)(uintptr_t)ufn)(p) == 0 &&
            unreg_calls() == 0,
        "an unregister through cuGetProcAddress keeps it");
  void *efn = NULL;
  check(FN(entry_fn, RTLD_DEFAULT, "cudaGetDriverEntryPoint")("cuMemHostRegister", &efn, 0, NULL) == 0 && efn &&
            efn != FN(void *(*)(const char *), driver, "fake_cuda_internal")("cuMemHostRegister") &&
            ((reg_fn)(uintptr_t)efn)(p, asked, 0) == 0 && reg_calls() == 1,
        "cudaGetDriverEntryPoint hands back the preload's cuMemHostRegister: served, no driver call");
  efn = NULL;
  check(FN(entry_version_fn, RTLD_DEFAULT, "cudaGetDriverEntryPointByVersion")("cuMemHostUnregister", &efn, 12000, 0,
                                                                               NULL) == 0 &&
            efn && ((unreg_fn)(uintptr_t)efn)(p) == 0 && unreg_calls() == 0,
        "cudaGetDriverEntryPointByVersion hands back the preload's cuMemHostUnregister: kept");
  long rt0 = FN(long (*)(void), RTLD_DEFAULT, "fake_cudart_calls")();
  check(creg(p, asked, 0) == 0 && reg_calls() == 1, "cudaHostRegister: served, no driver call");
  check(FN(long (*)(void), RTLD_DEFAULT, "fake_cudart_calls")() == rt0, "cudaHostRegister never reached the runtime");
  check(creg(p, asked, 1) == 712, "cudaHostRegister again: cudaErrorHostMemoryAlreadyRegistered");
  check(cunreg(p) == 0 && unreg_calls() == 0, "cudaHostUnregister keeps it");
  volatile uintptr_t first = (uintptr_t)p; /* an address to compare, not a pointer to use */
  free(p);
  char *q = malloc(asked);
  check((uintptr_t)q == first && creg(q, asked, 0) == 0 && reg_calls() == 1,
        "freed and malloc'd again: registered, no call");
  check(reg(q, asked, 4) == 712 && reg_calls() == 1, "other flags (IOMEMORY) go to the driver, which refuses");
  check(cunreg(q) == 0, "unregistered by the program");
  char *small = malloc(100000);
  check(reg(small, 100000, 0) == 0 && reg_calls() == 2 && length(small) == 100000,
        "a range hugepool does not own goes to the driver as it is");
  check(unreg(small) == 0 && unreg_calls() == 1, "and its unregister too");
  free(small);
  free(q);
  trim_fn trim = FN(trim_fn, RTLD_DEFAULT, "hugepool_trim");
  check(trim() >= (64u << 20) && unreg_calls() == 2 && length((void *)first) == 0, "trim unregisters the mapping");
  char *r = malloc(asked);
  check(creg(r, asked, 0) == 0 && cunreg(r) == 0 && reg_calls() == 3, "a new mapping registers once more");
  free(r);                            /* cached, registered */
  chunked = malloc((127u << 20) + 1); /* a new 128 MiB buffer */
  pthread_t t[CHUNKS];
  for (size_t i = 0; i < CHUNKS; i++) pthread_create(&t[i], NULL, register_chunk, (void *)(uintptr_t)i);
  int all_ok = 1;
  for (size_t i = 0; i < CHUNKS; i++) all_ok &= pthread_join(t[i], NULL) == 0 && chunk_rc[i] == 0;
  check(all_ok && reg_calls() == 4 && length(chunked) == 128u << 20,
        "8 chunks registered from 8 threads at once: the whole buffer, once");
  for (size_t i = 0; i < CHUNKS; i++) all_ok &= cunreg(chunked + i * ((128u << 20) / CHUNKS)) == 0;
  check(all_ok && unreg_calls() == 2, "each chunk unregistered by the program: kept");
  free(chunked);
  pid_t child = fork();
  if (child == 0) {
    trim();
    char *c = malloc(asked);
    (void)reg(c, asked, 0); /* no registrar in the child: the driver decides (here: the parent's copy) */
    free(c);
    trim();
    _exit(unreg_calls() == 2 ? 0 : 1);
  }
  int st = 1;
  waitpid(child, &st, 0);
  check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a forked child unregisters nothing of its parent's");
  check(unreg_calls() == 2 && trim() > 0 && unreg_calls() == 4, "the parent unregisters at its own trim");
}

static void plain(void) {
  reg_fn reg = FN(reg_fn, RTLD_DEFAULT, "cuMemHostRegister_v2");
  unreg_fn unreg = FN(unreg_fn, RTLD_DEFAULT, "cuMemHostUnregister");
  gpa_fn gpa = FN(gpa_fn, RTLD_DEFAULT, "cuGetProcAddress_v2");
  length_fn length = FN(length_fn, driver, "fake_cuda_registered_length");
  char *p = malloc(asked);
  check(reg(p, asked, 0) == 0 && reg_calls() == 1 && length(p) == asked, "off: the driver registers what is asked");
  check(reg(p, asked, 0) == 712 && unreg(p) == 0 && unreg_calls() == 1, "off: the driver answers everything");
  free(p);
  void *fn = NULL;
  char *c = malloc(asked);
  check(FN(copy_fn, RTLD_DEFAULT, "cudaMemcpy")((void *)(uintptr_t)0x700000000000ull, c, asked, 1) == 0 &&
            reg_calls() == 1,
        "off: a copy registers nothing");
  free(c);
  check(gpa("cuMemHostRegister", &fn, 12000, 0, NULL) == 0 &&
            fn == FN(void *(*)(const char *), driver, "fake_cuda_internal")("cuMemHostRegister"),
        "off: cuGetProcAddress hands back the driver's own function");
  void *h = NULL;
  check(FN(host_alloc_fn, RTLD_DEFAULT, "cudaHostAlloc")(&h, asked, 0) == 0 && host_calls(0) == 1 &&
            FN(host_free_fn, RTLD_DEFAULT, "cudaFreeHost")(h) == 0 && host_calls(1) == 1,
        "off: cudaHostAlloc and cudaFreeHost are the driver's");
  fn = NULL;
  check(FN(entry_fn, RTLD_DEFAULT, "cudaGetDriverEntryPoint")("cuMemHostRegister", &fn, 0, NULL) == 0 &&
            fn == FN(void *(*)(const char *), driver, "fake_cuda_internal")("cuMemHostRegister"),
        "off: cudaGetDriverEntryPoint hands back the driver's own function");
}

static void all(void) {
  copy_fn copy = FN(copy_fn, RTLD_DEFAULT, "cudaMemcpy");
  dtoh_fn dtoh = FN(dtoh_fn, RTLD_DEFAULT, "cuMemcpyDtoH_v2");
  reg_fn creg = FN(reg_fn, RTLD_DEFAULT, "cudaHostRegister");
  unreg_fn cunreg = FN(unreg_fn, RTLD_DEFAULT, "cudaHostUnregister");
  length_fn length = FN(length_fn, driver, "fake_cuda_registered_length");
  void *dev = (void *)(uintptr_t)0x700000000000ull; /* never touched: the fakes copy nothing */
  char *p = malloc(asked), *q = malloc(asked);
  check(copy(dev, p, asked, 1) == 0 && reg_calls() == 1 && length(p) == 64u << 20,
        "all: the first H2D copy from a hugepool buffer registers it whole");
  check(copy(dev, p, asked, 1) == 0 && copy(p, dev, 8u << 20, 2) == 0 && reg_calls() == 1,
        "all: later copies to and from it register nothing more");
  check(dtoh(q + 4096, 0x7000, 2u << 20) == 0 && reg_calls() == 2 && length(q) == 64u << 20,
        "all: cuMemcpyDtoH_v2 into a buffer registers it");
  char *r = malloc(asked);
  check(copy(dev, r, 4096, 1) == 0 && reg_calls() == 2, "all: a copy under 1 MiB registers nothing");
  char *plain_mem = mmap(NULL, 4u << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  check(copy(dev, plain_mem, 4u << 20, 1) == 0 && reg_calls() == 2, "all: memory hugepool does not own is left alone");
  check(creg(p, asked, 0) == 0 && cunreg(p) == 0 && reg_calls() == 2, "all: the program's own register is served");
  free(p);
  free(q);
  free(r);
  trim_fn trim = FN(trim_fn, RTLD_DEFAULT, "hugepool_trim");
  check(trim() > 0 && unreg_calls() == 2, "all: trim unregisters both");
  /* The other copies: per-thread default stream, 2D, the driver's _ptds. */
  char *s = malloc(asked), *t = malloc(asked), *u = malloc(asked);
  check(
      FN(copy_fn, RTLD_DEFAULT, "cudaMemcpy_ptds")(dev, s, asked, 1) == 0 && reg_calls() == 3 && length(s) == 64u << 20,
      "all: cudaMemcpy_ptds (per-thread default stream) registers its buffer");
  copy_2d_fn copy_2d = FN(copy_2d_fn, RTLD_DEFAULT, "cudaMemcpy2D");
  check(copy_2d(dev, 64, t + 8192, 64, 64, 100, 1) == 0 && reg_calls() == 3,
        "all: a 2D copy spanning under 1 MiB registers nothing");
  check(copy_2d(dev, 4096, t + 8192, 1u << 20, 4096, 40, 1) == 0 && reg_calls() == 4 && length(t) == 64u << 20,
        "all: a 2D copy of 40 rows 4 KiB wide spanning 39 MiB registers its buffer");
  check(FN(htod_fn, RTLD_DEFAULT, "cuMemcpyHtoD_v2_ptds")(0x7000, u, 2u << 20) == 0 && reg_calls() == 5 &&
            length(u) == 64u << 20,
        "all: cuMemcpyHtoD_v2_ptds registers its buffer");
  free(s);
  free(t);
  free(u);
  check(trim() > 0 && unreg_calls() == 5, "all: trim unregisters the three");
  munmap(plain_mem, 4u << 20);
}

static void toolkit(void) {
  void *cudart = dlopen("libcudart.so.13", RTLD_NOW | RTLD_GLOBAL);
  void *stub = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  check(cudart && stub && !dlsym(stub, "fake_cuda_calls"), "the toolkit's libcudart and stub libcuda are loaded");
  if (!cudart || !stub) return;
  int (*registrar)(void) = FN(int (*)(void), RTLD_DEFAULT, "hugepool_registrar_cuda");
  errno = 0;
  check(registrar() == -1 && errno == ENODEV, "hugepool_registrar_cuda: every entry point found, cuInit fails: ENODEV");
  char *p = malloc(asked);
  int rc = FN(reg_fn, RTLD_DEFAULT, "cudaHostRegister")(p, asked, 0);
  printf("     (cudaHostRegister: %d)\n", rc);
  check(rc != 0, "cudaHostRegister reaches the real runtime, which reports an error");
  rc = FN(reg_fn, RTLD_DEFAULT, "cuMemHostRegister_v2")(p, asked, 0);
  check(rc != 0, "cuMemHostRegister_v2 reaches the stub driver, which reports an error");
  free(p);
}

static void nocuda(void) {
  for (int i = 0; i < 8; i++) free(malloc(64u << 20));
  FILE *maps = fopen("/proc/self/maps", "r");
  char line[512];
  int loaded = 0;
  while (maps && fgets(line, sizeof(line), maps)) loaded |= strstr(line, "libcuda") != NULL;
  if (maps) fclose(maps);
  check(!loaded, "a program that does not use CUDA never loads libcuda, --cuda or not");
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "nocuda") == 0 || strcmp(mode, "toolkit") == 0) {
    if (mode[0] == 'n')
      nocuda();
    else
      toolkit();
    return fails != 0;
  }
  driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  void *runtime = dlopen("libcudart.so.13", RTLD_NOW | RTLD_GLOBAL);
  if (!driver || !runtime || !dlsym(driver, "fake_cuda_calls")) {
    printf("FAIL the fake driver and runtime are not on LD_LIBRARY_PATH\n");
    return 1;
  }
  if (strcmp(mode, "served") == 0)
    served();
  else if (strcmp(mode, "plain") == 0)
    plain();
  else if (strcmp(mode, "all") == 0)
    all();
  else if (strcmp(mode, "hostalloc") == 0)
    hostalloc();
  else
    return 2;
  return fails != 0;
}
