// SPDX-License-Identifier: BSD-3-Clause
// Every malloc-family entry point under libhugepool_preload.so, judged by
// what the kernel reports (smaps), with the default settings (threshold 1M,
// fallback policy).  Run by ctest with LD_PRELOAD set ([default] tag).
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <thread>
#include <unistd.h>
#include <vector>

#include "preload_test.hpp"

static constexpr size_t MiB = size_t(1) << 20;
// Called through volatile pointers so the compiler cannot judge the bad input itself.
static void *(*volatile calloc_v)(size_t, size_t) = calloc;
static void *(*volatile reallocarray_v)(void *, size_t, size_t) = reallocarray;

TEST_CASE("the interposer is loaded", "[default][strict][smallheap][keep][threshold][small]") {
  REQUIRE(pl::preloaded());
}

TEST_CASE("malloc at the threshold lands on hugetlb pages, below it on 4 KB pages", "[default]") {
  kv::PoolGuard pool(8);
  void *big = malloc(MiB);
  void *small = malloc(MiB - 1);
  REQUIRE(big);
  REQUIRE(small);
  memset(big, 1, MiB);
  memset(small, 1, MiB - 1);
  CHECK(pl::aligned(big, 2 * MiB));
  CHECK(pl::on_hugetlb(big));
  CHECK(pl::page_kb(small) == 4);
  free(big);
  free(small);
}

TEST_CASE("a freed buffer is reused without a new mapping", "[default]") {
  kv::PoolGuard pool(4);
  void *a = malloc(3 * MiB);
  memset(a, 7, 3 * MiB);
  CHECK(static_cast<volatile char *>(a)[3 * MiB - 1] == 7); /* keeps the memset */
  free(a);
  long long before = kv::huge_available();
  void *b = malloc(3 * MiB);
  CHECK(b == a);
  CHECK(kv::huge_available() == before); /* no new pages taken */
  CHECK(pl::on_hugetlb(b));
  free(b);
}

TEST_CASE("free keeps errno, free(NULL) is a no-op", "[default]") {
  kv::PoolGuard pool(4);
  void *big = malloc(4 * MiB);
  void *small = malloc(100);
  errno = 1234;
  free(big);
  CHECK(errno == 1234);
  free(small);
  CHECK(errno == 1234);
  free(nullptr);
  CHECK(errno == 1234);
}

TEST_CASE("calloc: overflow gives ENOMEM, a reused large buffer comes back zeroed", "[default]") {
  kv::PoolGuard pool(4);
  errno = 0;
  CHECK(calloc_v(SIZE_MAX / 2, 3) == nullptr);
  CHECK(errno == ENOMEM);
  errno = 0;
  CHECK(calloc_v(size_t(1) << 62, 8) == nullptr);
  CHECK(errno == ENOMEM);
  auto *a = static_cast<unsigned char *>(malloc(4 * MiB));
  memset(a, 0xAB, 4 * MiB);
  CHECK(static_cast<volatile unsigned char *>(a)[4 * MiB - 1] == 0xAB);
  free(a);
  auto *z = static_cast<unsigned char *>(calloc(4, MiB));
  REQUIRE(z);
  CHECK(z == a); /* the cached one */
  bool zero = true;
  for (size_t i = 0; i < 4 * MiB; i++) zero &= z[i] == 0;
  CHECK(zero);
  CHECK(pl::on_hugetlb(z));
  free(z);
  auto *s = static_cast<unsigned char *>(calloc(10, 10));
  REQUIRE(s);
  for (int i = 0; i < 100; i++) CHECK(s[i] == 0);
  free(s);
}

TEST_CASE("realloc across the threshold in both directions keeps the data", "[default]") {
  kv::PoolGuard pool(8);
  void *p = malloc(1000);
  pl::fill(p, 1000, 1);
  p = realloc(p, 3 * MiB); /* glibc -> hugepool */
  REQUIRE(p);
  CHECK(pl::check(p, 1000, 1));
  memset(static_cast<char *>(p) + 1000, 0, 3 * MiB - 1000);
  CHECK(pl::on_hugetlb(p));
  pl::fill(p, 3 * MiB, 2);
  void *same = realloc(p, 3 * MiB + 4096); /* still two pages */
  CHECK(same == p);
  p = realloc(same, 9 * MiB); /* hugepool -> bigger hugepool */
  REQUIRE(p);
  CHECK(pl::check(p, 3 * MiB, 2));
  pl::fill(p, 5000, 3);
  p = realloc(p, 5000); /* hugepool -> glibc */
  REQUIRE(p);
  CHECK(pl::check(p, 5000, 3));
  CHECK(pl::page_kb(p) == 4);
  free(p);
  void *fresh = realloc(nullptr, 2 * MiB); /* realloc(NULL) = malloc */
  REQUIRE(fresh);
  CHECK(pl::aligned(fresh, 2 * MiB));
  CHECK(realloc(fresh, 0) == nullptr); /* glibc: frees */
  errno = 0;
  void *keep = malloc(100);
  CHECK(reallocarray_v(keep, SIZE_MAX / 4, 8) == nullptr);
  CHECK(errno == ENOMEM);
  void *arr = reallocarray_v(keep, 3, MiB);
  REQUIRE(arr);
  CHECK(pl::aligned(arr, 2 * MiB));
  free(arr);
}

TEST_CASE("aligned allocation: bad alignments give EINVAL, large ones land on hugetlb", "[default]") {
  kv::PoolGuard pool(8);
  void *p = reinterpret_cast<void *>(0x1);
  CHECK(posix_memalign(&p, 3, 100) == EINVAL);
  CHECK(posix_memalign(&p, 0, 100) == EINVAL);
  CHECK(posix_memalign(&p, 4, 100) == EINVAL); /* not a multiple of sizeof(void *) */
  CHECK(p == reinterpret_cast<void *>(0x1));   /* untouched on error */
  errno = 0;
  CHECK(aligned_alloc(3, 64) == nullptr);
  CHECK(errno == EINVAL);

  REQUIRE(posix_memalign(&p, 64, 4 * MiB) == 0);
  memset(p, 1, 4 * MiB);
  CHECK(pl::on_hugetlb(p));
  free(p);
  REQUIRE(posix_memalign(&p, 64, 200) == 0);
  CHECK(pl::aligned(p, 64));
  free(p);
  void *a = aligned_alloc(4096, 2 * MiB);
  REQUIRE(a);
  memset(a, 1, 2 * MiB);
  CHECK(pl::on_hugetlb(a));
  free(a);
  void *m = memalign(4096, 4 * MiB);
  REQUIRE(m);
  CHECK(pl::aligned(m, 2 * MiB));
  free(m);
  void *odd = memalign(48, 100); /* glibc rounds up to 64 */
  REQUIRE(odd);
  CHECK(pl::aligned(odd, 64));
  free(odd);
  void *huge_align = memalign(8 * MiB, 4 * MiB); /* beyond 2 MB: glibc serves it */
  REQUIRE(huge_align);
  CHECK(pl::aligned(huge_align, 8 * MiB));
  memset(huge_align, 1, 4 * MiB);
  free(huge_align);
  void *v = valloc(3 * MiB);
  REQUIRE(v);
  CHECK(pl::aligned(v, 4096));
  free(v);
  void *pv = pvalloc(100);
  REQUIRE(pv);
  CHECK(pl::aligned(pv, 4096));
  CHECK(malloc_usable_size(pv) >= 4096);
  free(pv);
  errno = 0;
  CHECK(pvalloc(SIZE_MAX - 10) == nullptr);
  CHECK(errno == ENOMEM);
}

TEST_CASE("malloc_usable_size answers for both sides", "[default]") {
  kv::PoolGuard pool(4);
  CHECK(malloc_usable_size(nullptr) == 0);
  void *big = malloc(3 * MiB + 1);
  CHECK(malloc_usable_size(big) == 4 * MiB);
  void *small = malloc(100);
  CHECK(malloc_usable_size(small) >= 100);
  CHECK(malloc_usable_size(small) < 200);
  void *mid = malloc(600 << 10); /* glibc's mmapped chunk */
  CHECK(malloc_usable_size(mid) >= (600u << 10));
  free(big);
  free(small);
  free(mid);
}

TEST_CASE("C++ new/delete of large arrays go to hugetlb pages", "[default]") {
  kv::PoolGuard pool(4);
  auto *v = new std::vector<double>(512 * 1024, 1.0); /* 4 MB */
  CHECK(pl::on_hugetlb(v->data()));
  delete v;
}

TEST_CASE("many threads allocating, reallocating and freeing keep their data", "[default]") {
  kv::PoolGuard pool(96);
  constexpr int kThreads = 8, kRounds = 3000;
  std::vector<std::thread> workers;
  std::atomic<int> bad{0};
  for (int t = 0; t < kThreads; t++) {
    workers.emplace_back([t, &bad] {
      uint64_t x = 0x9E3779B97F4A7C15ULL * (t + 1);
      std::vector<std::pair<void *, size_t>> live;
      for (int r = 0; r < kRounds; r++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t size = (x % 8 == 0) ? MiB + (x >> 8) % (7 * MiB) : 16 + (x >> 8) % 65536;
        if (live.size() > 12 || (x & 16)) {
          if (!live.empty()) {
            auto [p, n] = live.back();
            live.pop_back();
            if (!pl::check(p, n < 4096 ? n : 4096, unsigned(n))) bad++;
            if (x & 32) {
              void *q = realloc(p, size);
              if (!q || !pl::check(q, std::min({n, size, size_t(4096)}), unsigned(n))) bad++;
              pl::fill(q, size < 4096 ? size : 4096, unsigned(size));
              live.push_back({q, size});
            } else {
              free(p);
            }
          }
        }
        void *p = malloc(size);
        if (!p) {
          bad++;
          continue;
        }
        pl::fill(p, size < 4096 ? size : 4096, unsigned(size));
        live.push_back({p, size});
      }
      for (auto [p, n] : live) {
        if (!pl::check(p, n < 4096 ? n : 4096, unsigned(n))) bad++;
        free(p);
      }
    });
  }
  for (auto &w : workers) w.join();
  CHECK(bad == 0);
  CHECK(pl::counter("preload: requests to hugepool") > 0);
}

TEST_CASE("empty pool, default policy: glibc serves the request, one warning, counted", "[default]") {
  kv::PoolGuard pool(0);
  void *a = nullptr, *b = nullptr;
  std::string err = pl::capture_stderr([&] {
    a = malloc(4 * MiB);
    b = calloc(1, 8 * MiB);
  });
  REQUIRE(a);
  REQUIRE(b);
  memset(a, 1, 4 * MiB);
  CHECK(pl::page_kb(a) == 4);
  CHECK(static_cast<unsigned char *>(b)[8 * MiB - 1] == 0);
  size_t lines = 0;
  for (size_t at = 0; (at = err.find('\n', at)) != std::string::npos; at++) lines++;
  CHECK(lines == 2); /* the size asked for and the fix, then what happens meanwhile */
  CHECK(err.substr(0, err.find('\n')).find("cannot map 4 MiB on 2 MB hugetlb pages") != std::string::npos);
  CHECK(err.find("glibc malloc serves it") != std::string::npos);
  CHECK(err.find("later requests try the pool again") != std::string::npos);
  CHECK(pl::counter("preload: fallbacks to glibc") == 2);
  void *al = nullptr;
  REQUIRE(posix_memalign(&al, 64 << 10, 4 * MiB) == 0); /* the fallback keeps the alignment */
  CHECK(pl::aligned(al, 64 << 10));
  free(al);
  free(a);
  free(b);
  /* Pages again: back on hugetlb.  Pages that another process frees or the
   * administrator reserves are seen at the next try after a refusal, at most
   * 64 ms later (lib/alloc.c); set_free waits that out when it grows the pool. */
  pool.set_free(2);
  void *c = malloc(4 * MiB);
  memset(c, 1, 4 * MiB);
  CHECK(pl::on_hugetlb(c));
  free(c);
}

TEST_CASE("empty pool, strict policy: ENOMEM, small requests unaffected", "[strict]") {
  kv::PoolGuard pool(0);
  errno = 0;
  CHECK(malloc(4 * MiB) == nullptr);
  CHECK(errno == ENOMEM);
  void *p = nullptr;
  CHECK(posix_memalign(&p, 64, 4 * MiB) == ENOMEM);
  void *s = malloc(1000);
  CHECK(s);
  CHECK(realloc(s, 4 * MiB) == nullptr); /* the old block stays valid */
  free(s);
  CHECK(pl::counter("preload: large requests refused") == 3);
  pool.set_free(2);
  void *ok = malloc(4 * MiB);
  REQUIRE(ok);
  memset(ok, 1, 4 * MiB);
  CHECK(pl::on_hugetlb(ok));
  free(ok);
}

TEST_CASE("HUGEPOOL_THRESHOLD=64K moves the boundary", "[threshold]") {
  kv::PoolGuard pool(4);
  void *at = malloc(64 << 10);
  void *below = malloc((64 << 10) - 1);
  memset(at, 1, 64 << 10);
  memset(below, 1, (64 << 10) - 1);
  CHECK(pl::on_hugetlb(at));
  CHECK(pl::page_kb(below) == 4);
  CHECK(pl::counter("preload: threshold") == 65536);
  free(at);
  free(below);
}

TEST_CASE("HUGEPOOL_POLICY=small: with an empty pool the core's own 4 KB mappings serve large requests", "[small]") {
  kv::PoolGuard pool(0);
  void *p = malloc(4 * MiB);
  REQUIRE(p);
  memset(p, 1, 4 * MiB);
  CHECK(pl::aligned(p, 2 * MiB)); /* a hugepool buffer, not glibc's */
  CHECK(pl::page_kb(p) == 4);
  CHECK(malloc_usable_size(p) == 4 * MiB);
  CHECK(pl::counter("fallbacks to 4 KB pages") == 1);
  CHECK(pl::counter("preload: fallbacks to glibc") == 0);
  p = realloc(p, 100); /* back to glibc */
  REQUIRE(p);
  CHECK(static_cast<unsigned char *>(p)[99] == 1);
  free(p);
}
