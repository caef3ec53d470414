// The small heap (jemalloc arenas on hugetlb chunks) called directly, without
// the interposer, so that it runs in the ASan and TSan builds too: the same
// 8-thread stress as under the preload, and its pages seen by the kernel.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "kernel_view.hpp"

extern "C" {
// preload/preload.h (C11 atomics there: declared here for C++)
int sh_init(void);
void *sh_malloc(size_t size, bool zero);
void *sh_realloc(void *ptr, size_t size);
void sh_free(void *ptr);
size_t sh_usable_size(const void *ptr);
bool sh_owns(const void *ptr);
struct sh_counters {
  uint64_t chunks, chunks_peak, chunks_returned, bytes_in_extents;
};
void sh_stats(sh_counters *out);
}

namespace {

#if defined(__SANITIZE_THREAD__)
constexpr int kRounds = 3000; /* TSan: every byte checked is instrumented */
#else
constexpr int kRounds = 12000;
#endif

void fill(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = static_cast<unsigned char>((i * 131 + seed) >> 3);
}
bool check(const unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != static_cast<unsigned char>((i * 131 + seed) >> 3)) return false;
  return true;
}

bool heap_started() {
  static bool ok = sh_init() == 0;
  return ok;
}

}  // namespace

TEST_CASE("small heap, direct: 8 threads, random sizes 16 B-256 KB, random lifetimes, cross-thread frees",
          "[heap]") {
  kv::PoolGuard pool(160);
  REQUIRE(heap_started());
  constexpr int kThreads = 8;
  struct Obj {
    unsigned char *p;
    size_t n;
    unsigned seed;
  };
  struct Mailbox {
    std::mutex m;
    std::vector<Obj> objs;
  };
  std::vector<Mailbox> boxes(kThreads);
  std::atomic<long> bad{0}, failed{0}, foreign{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; t++) {
    ts.emplace_back([t, &boxes, &bad, &failed, &foreign] {
      std::vector<Obj> live;
      uint64_t x = 0x2545F4914F6CDD1DULL * uint64_t(t + 1);
      auto next = [&x] { return x ^= x << 13, x ^= x >> 7, x ^= x << 17; };
      auto release = [&bad](const Obj &o) {
        if (!check(o.p, o.n, o.seed) || sh_usable_size(o.p) < o.n || !sh_owns(o.p)) bad++;
        sh_free(o.p);
      };
      for (int r = 0; r < kRounds; r++) {
        uint64_t v = next();
        if (!live.empty() && (v % 100 < 45 || live.size() > 300)) {
          size_t i = (v >> 8) % live.size();
          Obj o = live[i];
          live[i] = live.back();
          live.pop_back();
          if ((v >> 40) % 4 == 0) {
            Mailbox &b = boxes[(size_t(t) + 1 + (v >> 44) % (kThreads - 1)) % kThreads];
            std::lock_guard<std::mutex> g(b.m);
            b.objs.push_back(o);
          } else if ((v >> 40) % 4 == 1) { /* grows or shrinks it first */
            size_t n = o.n / 2 + 1 + (v >> 50) % (o.n + 16);
            if (n > (256 << 10)) n = 256 << 10;
            auto *q = static_cast<unsigned char *>(sh_realloc(o.p, n));
            if (!q) {
              failed++;
              release(o);
              continue;
            }
            if (!check(q, n < o.n ? n : o.n, o.seed)) bad++;
            fill(q, n, o.seed);
            release({q, n, o.seed});
          } else {
            release(o);
          }
        } else {
          unsigned shift = 4 + unsigned((v >> 20) % 15); /* 16 B .. 256 KB */
          size_t n = (size_t(1) << shift) + ((v >> 32) & ((size_t(1) << shift) - 1));
          if (n > (256 << 10)) n = 256 << 10;
          auto *p = static_cast<unsigned char *>(sh_malloc(n, (v & 7) == 0));
          if (!p) {
            failed++;
            continue;
          }
          if ((v & 7) == 0 && p[n - 1] != 0) bad++; /* asked zeroed */
          if (reinterpret_cast<uintptr_t>(p) % (2u << 20) == 0) foreign++; /* never 2 MB aligned */
          unsigned seed = unsigned(v >> 48);
          fill(p, n, seed);
          live.push_back({p, n, seed});
        }
        if (r % 64 == 0) {
          std::vector<Obj> mine;
          {
            std::lock_guard<std::mutex> g(boxes[size_t(t)].m);
            mine.swap(boxes[size_t(t)].objs);
          }
          for (auto &o : mine) release(o);
        }
      }
      for (auto &o : live) release(o);
    });
  }
  for (auto &t : ts) t.join();
  for (auto &b : boxes)
    for (auto &o : b.objs) {
      if (!check(o.p, o.n, o.seed)) bad++;
      sh_free(o.p);
    }
  CHECK(bad == 0);
  CHECK(failed == 0); /* 160 pages: the pool never ran short */
  CHECK(foreign == 0);
  sh_counters c{};
  sh_stats(&c);
  CHECK(c.chunks_peak > 0);
}

TEST_CASE("small heap, direct: objects on hugetlb pages by smaps, not ours once outside", "[heap]") {
  kv::PoolGuard pool(8);
  REQUIRE(heap_started());
  void *p = sh_malloc(100, false);
  REQUIRE(p);
  auto e = kv::smaps_of(p);
  CHECK(e.found);
  CHECK(e.field("KernelPageSize") == 2048);
  CHECK(e.field("Private_Hugetlb") > 0);
  CHECK(sh_owns(p));
  int on_stack = 0;
  CHECK_FALSE(sh_owns(&on_stack));
  std::vector<int> v(10);
  CHECK_FALSE(sh_owns(v.data()));
  sh_free(p);
}
