// SPDX-License-Identifier: BSD-3-Clause
// Thread safety: a multi-threaded alloc/free stress, and threads racing for
// a short pool while the cache holds the pages.
#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "core_test.hpp"

using namespace test;

TEST_CASE("concurrent alloc/free from many threads keeps every buffer intact", "[threads]") {
  kv::PoolGuard pool(96);
  fresh_state();
  REQUIRE(hugepool_set_cache_limits(8, 32 * MiB) == 0);  // small cache: evictions race with hits
  const long long free0 = kv::huge_free();
  constexpr int kThreads = 6, kIters = 300;
  std::atomic<int> corrupt{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([t, &corrupt, &failed] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::vector<std::pair<unsigned char *, size_t>> held;
      for (int i = 0; i < kIters; i++) {
        if (held.size() < 2 && (rng() & 1)) {
          size_t bytes = (1 + rng() % 4) * 2 * MiB - rng() % 4096;
          auto *p = static_cast<unsigned char *>(hugepool_alloc(bytes));
          if (!p) {
            failed++;
            continue;
          }
          const auto tag = static_cast<unsigned char>(t * 16 + i % 16);
          for (size_t off = 0; off < bytes; off += 4096) p[off] = tag;
          p[bytes - 1] = tag;
          held.emplace_back(p, bytes);
        } else if (!held.empty()) {
          auto [p, bytes] = held.back();
          held.pop_back();
          const unsigned char tag = p[0];
          for (size_t off = 0; off < bytes; off += 4096)
            if (p[off] != tag) corrupt++;
          if (p[bytes - 1] != tag) corrupt++;
          hugepool_free(p);
        }
      }
      for (auto [p, bytes] : held) hugepool_free(p);
    });
  }
  for (auto &th : threads) th.join();
  CHECK(corrupt == 0);
  CHECK(failed == 0);  // 6 threads x 2 buffers x 8 MB + a 32 MB cache fit in 96 pages
  hugepool_stats st;
  hugepool_get_stats(&st);
  CHECK(st.live_buffers == 0);
  CHECK(st.bytes_cached <= 32 * MiB);
  hugepool_trim();
  CHECK(kv::self_hugetlb_kb() == 0);  // nothing left mapped in any thread's cache
  CHECK(kv::huge_free() == free0);
  fresh_state();
}

TEST_CASE("two threads short of pages both succeed once the cache is given back", "[threads][cache]") {
  kv::PoolGuard pool(4);
  fresh_state();
  void *big = hugepool_alloc(8 * MiB);
  REQUIRE(big != nullptr);
  hugepool_free(big);  // cached: the pool has no free page left
  std::atomic<int> failed{0};
  auto work = [&failed] {
    for (int i = 0; i < 500; i++) {
      void *p = hugepool_alloc(2 * MiB);
      if (!p) {
        failed++;
        continue;
      }
      static_cast<char *>(p)[0] = 1;
      hugepool_free(p);
    }
  };
  StderrCapture err;
  std::thread a(work), b(work);
  a.join();
  b.join();
  CHECK(failed == 0);
  CHECK(err.text().empty());
  hugepool_trim();
  CHECK(kv::huge_available() == 4);
}
