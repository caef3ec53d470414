// SPDX-License-Identifier: BSD-3-Clause
// lib/split.c without the interposer, so that it also runs in the ASan and
// TSan builds: split_ends() on a live hugepool_alloc() buffer while writer
// threads store into its 2 MB page and read each store back.  No store may
// be lost; smaps shows 4 KB pages where the page was split, hugetlb in the
// next page.  (The preload's own tests of the same thing, test_split_race.cpp,
// run in the release build only: LD_PRELOAD.)
#include <sys/mman.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdint>
#include <thread>
#include <vector>

#include "hugepool/hugepool.h"
#include "kernel_view.hpp"

extern "C" int split_ends(void *addr, size_t len); /* lib/split.h (C, internal) */

#if defined(__SANITIZE_THREAD__)
#define SPLIT_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SPLIT_UNDER_TSAN 1
#endif
#endif

namespace {
constexpr size_t MiB = size_t(1) << 20;
constexpr size_t KiB4 = 4096;
}  // namespace

TEST_CASE("split_ends loses no store of threads writing into the page it splits") {
#ifdef SPLIT_UNDER_TSAN
  WARN(
      "skipped under TSan: the split copies the page while other threads store into it, on purpose (the "
      "write protection, which TSan cannot see, orders them); TSan would report that copy as a race");
  return;
#else
  kv::PoolGuard pool(16);
  long long lost_total = 0;
  int split_pages = 0;
  for (int round = 0; round < 20; round++) {
    auto *b = static_cast<unsigned char *>(hugepool_alloc(8 * MiB));
    REQUIRE(b);
    memset(b, 0, 8 * MiB);
    std::atomic<bool> stop{false};
    std::atomic<long long> lost{0};
    std::atomic<int> started{0};
    std::vector<std::thread> ts;
    for (int w = 0; w < 2; w++)
      ts.emplace_back([&, w] {
        std::vector<std::atomic<uint64_t> *> slots;
        for (size_t j = 0; j < 16; j++) /* even 4 KB pages of the second and third 2 MB pages */
          for (size_t p = 1; p <= 2; p++)
            slots.push_back(
                reinterpret_cast<std::atomic<uint64_t> *>(b + p * 2 * MiB + (2 + 32 * j) * KiB4 + size_t(w) * 64));
        std::vector<uint64_t> last(slots.size(), 0);
        uint64_t seq = 0;
        long long n_lost = 0;
        started++;
        while (!stop.load(std::memory_order_relaxed))
          for (size_t i = 0; i < slots.size(); i++) {
            if (slots[i]->load(std::memory_order_relaxed) != last[i]) n_lost++;
            slots[i]->store(++seq, std::memory_order_relaxed);
            last[i] = seq;
          }
        for (size_t i = 0; i < slots.size(); i++) n_lost += slots[i]->load() != last[i];
        lost += n_lost;
      });
    while (started.load() < 2) std::this_thread::yield();
    unsigned char *cut = b + 2 * MiB + 33 * KiB4; /* inside the second 2 MB page, no slot there */
    int rc = split_ends(cut, KiB4);
    usleep(200);
    stop = true;
    for (auto &t : ts) t.join();
    CHECK(rc == 1);
    split_pages += kv::smaps_of(cut).field("KernelPageSize") == 4;
    CHECK(kv::smaps_of(b + 4 * MiB).field("KernelPageSize") == 2048);
    lost_total += lost.load();
    hugepool_free(b);
  }
  CHECK(lost_total == 0);
  CHECK(split_pages == 20);
#endif
}
