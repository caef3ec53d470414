// HUGEPOOL_SMALL_HEAP=1: small requests packed onto hugetlb pages.
#include <catch2/catch.hpp>

#include <atomic>
#include <cerrno>
#include <thread>
#include <vector>

#include <unistd.h>

#include "common.hpp"

static constexpr size_t MiB = size_t(1) << 20;

// The process may have started with an empty pool (the small heap then
// serves from glibc and looks at the pool again at most once a millisecond).
static void pool_reserved_now() { usleep(3000); }

TEST_CASE("small heap: small objects live on hugetlb pages, densely", "[smallheap]") {
  kv::PoolGuard pool(16);
  pool_reserved_now();
  long long chunks_before = pl::counter("small heap: 2 MB chunks");
  std::vector<void *> objs;
  size_t total = 0;
  for (size_t i = 0; i < 20000; i++) {
    size_t n = 16 + (i * 37) % 300;
    void *p = malloc(n);
    REQUIRE(p);
    pl::fill(p, n, unsigned(i));
    objs.push_back(p);
    total += n;
  }
  for (size_t i = 0; i < objs.size(); i += 997) CHECK(pl::on_hugetlb(objs[i]));
  long long chunks = pl::counter("small heap: 2 MB chunks") - chunks_before;
  /* ~3.2 MB requested: packed, that is a handful of chunks, not 20000 */
  CHECK(chunks >= 1);
  CHECK(size_t(chunks) * 2 * MiB < total * 3);
  bool ok = true;
  for (size_t i = 0; i < objs.size(); i++) ok &= pl::check(objs[i], 16 + (i * 37) % 300, unsigned(i));
  CHECK(ok);
  for (void *p : objs) free(p);
}

TEST_CASE("small heap: every entry point", "[smallheap]") {
  kv::PoolGuard pool(16);
  pool_reserved_now();
  void *p = malloc(100);
  CHECK(pl::on_hugetlb(p));
  CHECK(malloc_usable_size(p) >= 100);
  CHECK(malloc_usable_size(p) < 200);
  pl::fill(p, 100, 4);
  p = realloc(p, 110); /* same class */
  CHECK(pl::check(p, 100, 4));
  p = realloc(p, 200 << 10);
  CHECK(pl::check(p, 100, 4));
  CHECK(pl::on_hugetlb(p));
  p = realloc(p, 3 * MiB); /* to a hugepool buffer */
  CHECK(pl::check(p, 100, 4));
  CHECK(pl::aligned(p, 2 * MiB));
  p = realloc(p, 50);
  CHECK(pl::check(p, 50, 4));
  free(p);
  auto *z = static_cast<unsigned char *>(calloc(100, 7));
  bool zero = true;
  for (int i = 0; i < 700; i++) zero &= z[i] == 0;
  CHECK(zero);
  free(z);
  void *a = aligned_alloc(64, 100); /* glibc serves it; free() still knows */
  CHECK(pl::aligned(a, 64));
  free(a);
  void *m = malloc(0);
  CHECK(m);
  free(m);
  errno = 77;
  void *q = malloc(32);
  free(q);
  CHECK(errno == 77);
}

TEST_CASE("small heap: threads", "[smallheap]") {
  kv::PoolGuard pool(32);
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 6; t++) {
    ts.emplace_back([t, &bad] {
      std::vector<std::pair<void *, size_t>> live;
      uint64_t x = 88172645463325252ULL + t;
      for (int r = 0; r < 40000; r++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        if (live.size() > 200 || (!live.empty() && (x & 1))) {
          size_t i = (x >> 3) % live.size();
          auto [p, n] = live[i];
          if (!pl::check(p, n, unsigned(n))) bad++;
          free(p);
          live[i] = live.back();
          live.pop_back();
        } else {
          size_t n = 16 + (x >> 9) % 65536;
          void *p = malloc(n);
          pl::fill(p, n, unsigned(n));
          live.push_back({p, n});
        }
      }
      for (auto [p, n] : live) free(p);
    });
  }
  for (auto &t : ts) t.join();
  CHECK(bad == 0);
}

TEST_CASE("small heap: a forked child keeps its small objects", "[smallheap]") {
  kv::PoolGuard pool(16);
  auto *p = static_cast<unsigned char *>(malloc(1000));
  pl::fill(p, 1000, 2);
  int st = pl::in_child([&] {
    if (!pl::check(p, 1000, 2)) return 1;
    pl::fill(p, 1000, 3);
    void *q = malloc(64);
    free(q);
    free(p);
    return 0;
  });
  CHECK(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
  CHECK(pl::check(p, 1000, 2));
  free(p);
}

TEST_CASE("small heap: an empty pool leaves small requests with glibc", "[smallheap]") {
  kv::PoolGuard pool(0);
  long long chunks = pl::counter("small heap: 2 MB chunks"); /* from start-up, if the pool had pages */
  std::vector<void *> objs;
  for (int i = 0; i < 5000; i++) { /* 20 MB: more than the chunks made so far */
    void *p = malloc(4000);
    REQUIRE(p);
    pl::fill(p, 4000, unsigned(i));
    objs.push_back(p);
  }
  CHECK(pl::page_kb(objs.back()) == 4);
  CHECK(pl::counter("small heap: 2 MB chunks") == chunks);
  bool ok = true;
  for (int i = 0; i < 5000; i++) ok &= pl::check(objs[size_t(i)], 4000, unsigned(i));
  CHECK(ok);
  for (void *p : objs) free(p);
}
