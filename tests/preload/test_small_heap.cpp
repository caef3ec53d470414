// SPDX-License-Identifier: BSD-3-Clause
// HUGEPOOL_SMALL_HEAP=1: small requests packed onto hugetlb pages.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <mutex>
#include <thread>
#include <vector>

#include "preload_test.hpp"
#include "heap_stress.hpp"

static constexpr size_t MiB = size_t(1) << 20;

// The process may have started with an empty pool (the small heap then
// serves from glibc for a while: preload_test.hpp).
static void pool_reserved_now() { pl::small_heap_sees_pool(); }

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

// Each thread is bound to a heap arena before its first request (the
// preload then uses jemalloc's fast paths): objects of every thread, new
// threads included, must be on the heap's hugetlb chunks, and strings grown
// a byte at a time through every small and large size class keep their bytes.
TEST_CASE("small heap: each thread's objects and byte-by-byte grown strings are on hugetlb pages", "[smallheap]") {
  kv::PoolGuard pool(32);
  pool_reserved_now();
  /* From here on nothing falls back (a start on an empty pool counted some before). */
  long long fallbacks_before = pl::counter("small heap: fallbacks to glibc");
  REQUIRE(fallbacks_before >= 0);
  constexpr int kThreads = 4;
  std::atomic<int> off_heap{0}, bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; t++) {
    ts.emplace_back([t, &off_heap, &bad] {
      void *first = malloc(24); /* the thread's first request */
      std::memset(first, t, 24);
      if (!pl::on_hugetlb(first)) off_heap++;
      auto *s = static_cast<unsigned char *>(nullptr);
      for (size_t n = 1; n <= (200 << 10); n++) { /* 1 B to 200 KB, one byte per realloc */
        auto *q = static_cast<unsigned char *>(realloc(s, n));
        if (!q) {
          bad++;
          break;
        }
        q[n - 1] = static_cast<unsigned char>(n * 7 + t);
        s = q;
        if ((n & (n - 1)) == 0 && !pl::on_hugetlb(s)) off_heap++; /* at every power of two */
      }
      for (size_t n = 1; n <= (200 << 10); n++)
        if (s[n - 1] != static_cast<unsigned char>(n * 7 + t)) {
          bad++;
          break;
        }
      void *z = calloc(1, 3000);
      if (!pl::on_hugetlb(z) || static_cast<unsigned char *>(z)[2999] != 0) off_heap++;
      free(z);
      free(s);
      free(first);
    });
  }
  for (auto &t : ts) t.join();
  CHECK(off_heap == 0);
  CHECK(bad == 0);
  CHECK(pl::counter("small heap: fallbacks to glibc") == fallbacks_before);
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
  CHECK(pl::counter("small heap: fallbacks to glibc") > 0); /* counted */
  bool ok = true;
  for (int i = 0; i < 5000; i++) ok &= pl::check(objs[size_t(i)], 4000, unsigned(i));
  CHECK(ok);
  /* Pages reserved later are used: the heap asks again a millisecond after
   * its last refusal (and this thread's next 63 requests). */
  pool.set_free(16);
  pl::small_heap_sees_pool();
  void *later = malloc(4000);
  pl::fill(later, 4000, 1);
  CHECK(pl::on_hugetlb(later));
  CHECK(pl::counter("small heap: 2 MB chunks") > chunks);
  free(later);
  for (void *p : objs) free(p);
}

// 8 threads, random sizes 16 B - 256 KB, random lifetimes, cross-thread
// frees (heap_stress.hpp), through the interposed malloc and free.
TEST_CASE("small heap: 8 threads, random sizes and lifetimes, cross-thread frees", "[smallheap]") {
  kv::PoolGuard pool(160);
  heap_stress::Ops ops{};
  ops.alloc = [](size_t n, bool) { return malloc(n); };
  ops.release = free;
  ops.usable = [](const void *p) { return malloc_usable_size(const_cast<void *>(p)); };
  ops.sample = [](const void *p) { return pl::on_hugetlb(p); };
  auto res = heap_stress::run(ops, 8, 30000);
  CHECK(res.bad == 0);
  CHECK(res.failed == 0);
  CHECK(res.sampled > 0);
  CHECK(res.sampled_yes == res.sampled); /* the pool had room: every sampled object on 2 MB hugetlb pages */
}

// Free pages of the 2 MB pool, read without allocating.
static long long pool_free_pages() {
  return kv::pool_number("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages") -
         kv::pool_number("/sys/kernel/mm/hugepages/hugepages-2048kB/resv_hugepages");
}

TEST_CASE("small heap: a freed heap goes back to the pool after jemalloc's decay", "[smallheap]") {
  kv::PoolGuard pool(64);
  pool_reserved_now();
  constexpr size_t kObjs = 300000; /* 200 B each: 60 MB, 30 chunks' worth */
  std::vector<void *> objs;
  objs.reserve(kObjs); /* a large buffer, from hugepool's cache: before the baseline */
  long long before = pool_free_pages();
  long long kib_before = kv::self_hugetlb_kb();
  for (size_t i = 0; i < kObjs; i++) {
    objs.push_back(malloc(200));
    static_cast<char *>(objs.back())[0] = char(i);
  }
  long long at_peak = pool_free_pages();
  CHECK(before - at_peak >= 28); /* the kernel's pool lent the heap ~30 pages */
  CHECK(kv::self_hugetlb_kb() - kib_before >= 28 * 2048);
  for (void *p : objs) free(p);
  /* jemalloc purges after dirty_decay_ms (1 s, gradually): its background
   * thread gives the extents back and whole chunks go to the pool */
  long long now = at_peak;
  for (int i = 0; i < 100 && now < before - 2; i++) {
    usleep(100000);
    now = pool_free_pages();
  }
  INFO("pool free pages: before " << before << ", at the peak " << at_peak << ", after free + decay " << now);
  CHECK(now >= before - 2); /* a chunk or two may keep what thread caches hold */
  CHECK(pl::counter("small heap: chunks given back to pool") >= 26);
}

TEST_CASE("small heap: fork with a live heap and a thread allocating meanwhile", "[smallheap]") {
  kv::PoolGuard pool(64);
  pool_reserved_now();
  std::vector<std::pair<unsigned char *, size_t>> objs;
  for (unsigned i = 0; i < 5000; i++) {
    size_t n = 16 + (i * 97) % 5000;
    auto *p = static_cast<unsigned char *>(malloc(n));
    pl::fill(p, n, i);
    objs.push_back({p, n});
  }
  std::atomic<bool> stop{false};
  std::thread churn([&stop] {
    std::vector<void *> v(256, nullptr);
    for (uint64_t x = 1; !stop.load(); x++) {
      size_t i = (x * 2654435761u) % v.size();
      free(v[i]);
      v[i] = malloc(16 + (x * 31) % 20000);
    }
    for (void *p : v) free(p);
  });
  for (int k = 0; k < 10; k++) {
    int st = pl::in_child([&objs, k] {
      alarm(30); /* a deadlock in the child's allocator fails the test, not the run */
      for (unsigned i = 0; i < objs.size(); i++)
        if (!pl::check(objs[i].first, objs[i].second, i)) return 1;
      for (unsigned i = 0; i < objs.size(); i += 2) free(objs[i].first);
      std::vector<void *> fresh;
      for (int i = 0; i < 3000; i++) {
        fresh.push_back(malloc(64 + size_t(i + k) % 3000));
        pl::fill(fresh.back(), 64, unsigned(i));
      }
      bool huge = pl::on_hugetlb(fresh.back());
      if (!huge)
        fprintf(stderr, "child: pool free %lld, small heap chunks %lld (peak %lld), HugetlbPages %lld kB\n",
                pool_free_pages(), pl::counter("small heap: 2 MB chunks"),
                pl::counter("small heap: 2 MB chunks (peak)"), kv::self_hugetlb_kb());
      for (void *p : fresh) free(p);
      return huge ? 0 : 2;
    });
    CHECK(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 0);
  }
  stop = true;
  churn.join();
  bool ok = true;
  for (unsigned i = 0; i < objs.size(); i++) ok &= pl::check(objs[i].first, objs[i].second, i);
  CHECK(ok);
  for (auto &o : objs) free(o.first);
}

TEST_CASE("small heap: aligned requests and realloc stay on the heap", "[smallheap]") {
  kv::PoolGuard pool(16);
  pool_reserved_now();
  void *a = aligned_alloc(4096, 5000);
  REQUIRE(a);
  CHECK(pl::aligned(a, 4096));
  CHECK(pl::on_hugetlb(a));
  void *b = nullptr;
  CHECK(posix_memalign(&b, 256, 100) == 0);
  CHECK(pl::aligned(b, 256));
  CHECK(pl::on_hugetlb(b));
  free(a);
  free(b);
  auto *p = static_cast<unsigned char *>(malloc(40));
  pl::fill(p, 40, 9);
  for (size_t n = 64; n <= (256 << 10); n *= 2) { /* grows through every kind of jemalloc size */
    p = static_cast<unsigned char *>(realloc(p, n));
    REQUIRE(p);
    CHECK(pl::check(p, 40, 9));
    CHECK(pl::on_hugetlb(p));
    CHECK(malloc_usable_size(p) >= n);
  }
  free(p);
}

// A heap that churns (a few MB live, millions of requests of 16 B - 20 KB)
// keeps a few chunks: jemalloc reuses the extents it has, it does not ask
// the pool for new ones.
TEST_CASE("small heap: a churning heap stays near its live size", "[smallheap]") {
  kv::PoolGuard pool(100);
  pool_reserved_now();
  long long kib_before = kv::self_hugetlb_kb();
  std::vector<void *> v(256, nullptr); /* ~2.5 MB live */
  for (uint64_t x = 1; x < 3000000; x++) {
    size_t i = (x * 2654435761u) % v.size();
    free(v[i]);
    v[i] = malloc(16 + (x * 31) % 20000);
  }
  long long grown = kv::self_hugetlb_kb() - kib_before;
  long long peak = pl::counter("small heap: 2 MB chunks (peak)");
  for (void *p : v) free(p);
  INFO("hugetlb kB grown " << grown << ", peak chunks " << peak);
  CHECK(peak <= 12);
  CHECK(grown <= 12 * 2048);
}

// A chunk may be a 2 MB buffer the program freed into hugepool's cache, full
// of its old bytes: the heap must not tell jemalloc such pages are zero, or
// calloc of a large object would hand the old bytes out.
TEST_CASE("small heap: calloc is zero on chunks that were the program's freed buffers", "[smallheap]") {
  kv::PoolGuard pool(64);
  constexpr size_t kBig = 1536 << 10; /* above the threshold: a 2 MB hugepool buffer */
  std::vector<void *> big;
  for (int i = 0; i < 16; i++) {
    void *p = malloc(kBig);
    REQUIRE(p);
    memset(p, 0xAB, kBig);
    big.push_back(p);
  }
  for (void *p : big) free(p); /* into hugepool's cache, dirty */
  constexpr size_t kObj = 100 << 10;
  std::vector<unsigned char *> objs;
  size_t nonzero = 0;
  for (int i = 0; i < 200; i++) { /* 20 MB: new chunks, from the cache first */
    auto *p = static_cast<unsigned char *>(calloc(1, kObj));
    REQUIRE(p);
    for (size_t j = 0; j < kObj; j++) nonzero += p[j] != 0;
    memset(p, 0xCD, kObj);
    objs.push_back(p);
  }
  CHECK(nonzero == 0);
  CHECK(pl::on_hugetlb(objs.back()));
  for (auto *p : objs) free(p);
}

// Threads: of /proc/<pid>/status, as the process itself (or a program started
// from here, under the same preload) reads it.
static int threads_of(const char *status_path) {
  std::ifstream f(status_path);
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  return -1;
}

TEST_CASE("small heap: a program with a small heap stays single-threaded", "[smallheap]") {
  kv::PoolGuard pool(64);
  pool_reserved_now();
  /* A new program under the same preload (the environment is inherited):
   * grep reads its own status.  With jemalloc's background thread running
   * from the start it said 2. */
  FILE *p = popen("grep '^Threads:' /proc/self/status", "r");
  REQUIRE(p);
  char line[64] = "";
  CHECK(fgets(line, sizeof(line), p) != nullptr);
  pclose(p);
  CHECK(std::string(line) == "Threads:\t1\n");
  /* setpriv keeps its capabilities across setresuid in its own thread
   * (PR_SET_KEEPCAPS, capset) and then calls setgroups: glibc aborted it
   * (setgroups succeeded in one thread and failed in the other). */
  if (geteuid() == 0 && access("/usr/bin/setpriv", X_OK) == 0) {
    int st = system("/usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups true");
    INFO("status " << st);
    CHECK((WIFEXITED(st) && WEXITSTATUS(st) == 0));
  }
  /* Past 16 MB of heap, the background thread starts (and purges: see the
   * test of the freed heap above). */
  std::vector<void *> objs;
  for (size_t i = 0; i < 120000; i++) objs.push_back(malloc(200));
  CHECK(pl::counter("small heap: 2 MB chunks") >= 8);
  CHECK(threads_of("/proc/self/status") >= 2);
  for (void *o : objs) free(o);
}
