/* SPDX-License-Identifier: BSD-3-Clause */
/* A library the deepbind tests open with RTLD_DEEPBIND, as PHP opens its
 * extensions: its malloc family binds to glibc's unless the preload takes
 * the flag off.  deepbind_glibc_* call glibc's own entry points whatever the
 * binding, to hand the program pointers it did not allocate. */
#include <stddef.h>
#include <stdlib.h>

extern void *__libc_malloc(size_t size);
extern void __libc_free(void *ptr);

#define EXPORT __attribute__((visibility("default")))
EXPORT void *deepbind_malloc(size_t size);
EXPORT void *deepbind_realloc(void *ptr, size_t size);
EXPORT void deepbind_free(void *ptr);
EXPORT void *deepbind_glibc_malloc(size_t size);
EXPORT void deepbind_glibc_free(void *ptr);

void *deepbind_malloc(size_t size) { return malloc(size); }
void *deepbind_realloc(void *ptr, size_t size) { return realloc(ptr, size); }
void deepbind_free(void *ptr) { free(ptr); }
void *deepbind_glibc_malloc(size_t size) { return __libc_malloc(size); }
void deepbind_glibc_free(void *ptr) { __libc_free(ptr); }
