// SPDX-License-Identifier: BSD-3-Clause
// A library opened with RTLD_DEEPBIND (PHP opens its extensions so) and the
// program free, grow and shrink each other's pointers, small and large, with
// and without the preload: nothing aborts, every byte survives, and under
// the preload the library's large buffers are on hugetlb pages (it uses the
// preload's malloc, not glibc's).
#include <dlfcn.h>

#include <catch2/catch.hpp>

#include "preload_test.hpp"

static constexpr size_t MiB = size_t(1) << 20;

namespace {
struct deepbind_lib {
  void *handle = nullptr;
  void *(*malloc_)(size_t) = nullptr;
  void *(*realloc_)(void *, size_t) = nullptr;
  void (*free_)(void *) = nullptr;
  void *(*glibc_malloc)(size_t) = nullptr;
  void (*glibc_free)(void *) = nullptr;
  // By bare name: only the test's RUNPATH finds it, so glibc must see the
  // test, not the preload, as dlopen's caller.
  deepbind_lib() {
    handle = dlopen("libhugepool_test_deepbind.so", RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!handle) FAIL("dlopen: " << dlerror());
    malloc_ = reinterpret_cast<void *(*)(size_t)>(dlsym(handle, "deepbind_malloc"));
    realloc_ = reinterpret_cast<void *(*)(void *, size_t)>(dlsym(handle, "deepbind_realloc"));
    free_ = reinterpret_cast<void (*)(void *)>(dlsym(handle, "deepbind_free"));
    glibc_malloc = reinterpret_cast<void *(*)(size_t)>(dlsym(handle, "deepbind_glibc_malloc"));
    glibc_free = reinterpret_cast<void (*)(void *)>(dlsym(handle, "deepbind_glibc_free"));
    REQUIRE(malloc_);
    REQUIRE(realloc_);
    REQUIRE(free_);
    REQUIRE(glibc_malloc);
    REQUIRE(glibc_free);
  }
  ~deepbind_lib() { dlclose(handle); }
};

// small-heap objects, glibc's mmap threshold region, hugepool buffers
const size_t kSizes[] = {24, 1000, 200 << 10, 3 * MiB, 64 * MiB + 5};
}  // namespace

TEST_CASE("RTLD_DEEPBIND library and program free each other's pointers", "[default][smallheap][plain]") {
  kv::PoolGuard pool(80);
  pl::small_heap_sees_pool();
  deepbind_lib lib;
  unsigned seed = 1;
  for (size_t n : kSizes) {
    INFO("size " << n);
    void *p = malloc(n); /* program's, freed by the library */
    REQUIRE(p);
    pl::fill(p, n, seed);
    CHECK(pl::check(p, n, seed));
    lib.free_(p);

    void *q = lib.malloc_(n); /* library's, freed by the program */
    REQUIRE(q);
    pl::fill(q, n, ++seed);
    if (pl::preloaded() && n >= MiB) CHECK(pl::on_hugetlb(q));
    CHECK(malloc_usable_size(q) >= n);
    q = realloc(q, 2 * n); /* the program grows the library's */
    REQUIRE(q);
    CHECK(pl::check(q, n, seed));
    q = lib.realloc_(q, n / 2 + 1); /* the library shrinks it back */
    REQUIRE(q);
    CHECK(pl::check(q, n / 2 + 1, seed));
    free(q);

    void *r = malloc(n); /* program's, grown by the library */
    REQUIRE(r);
    pl::fill(r, n, ++seed);
    r = lib.realloc_(r, n + 3 * MiB);
    REQUIRE(r);
    CHECK(pl::check(r, n, seed));
    lib.free_(r);
    ++seed;
  }
  if (pl::preloaded()) CHECK(pl::counter("preload: dlopen RTLD_DEEPBIND taken off") >= 1);
}

TEST_CASE("pointers from glibc's own malloc are freed, resized and sized by the preload's entry points",
          "[default][smallheap][plain]") {
  kv::PoolGuard pool(40);
  pl::small_heap_sees_pool();
  deepbind_lib lib;
  unsigned seed = 50;
  for (size_t n : kSizes) {
    INFO("size " << n);
    void *p = lib.glibc_malloc(n);
    REQUIRE(p);
    pl::fill(p, n, seed);
    CHECK(malloc_usable_size(p) >= n);
    free(p);
    p = lib.glibc_malloc(n);
    REQUIRE(p);
    pl::fill(p, n, ++seed);
    p = realloc(p, n + 2 * MiB); /* off glibc onto hugetlb pages, or glibc's realloc */
    REQUIRE(p);
    CHECK(pl::check(p, n, seed));
    p = realloc(p, n / 3 + 1);
    REQUIRE(p);
    CHECK(pl::check(p, n / 3 + 1, seed));
    free(p);
    ++seed;
  }
}
