// SPDX-License-Identifier: BSD-3-Clause
// Thread caches: each thread reuses its own buffers without a shared lock,
// yet the cache limits, trim, reclaim, fork and the statistics cover every
// thread's cache.  Checked from the kernel's view (meminfo, smaps).  Catch's
// assertions are not thread-safe: threads record, the main thread checks.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <thread>
#include <vector>

#include "core_test.hpp"

using namespace test;

TEST_CASE("a buffer freed in one thread is reused by another without a new mapping", "[threads][cache]") {
  kv::PoolGuard pool(8);
  fresh_state();
  const long long avail0 = kv::huge_available();
  char *freed = nullptr;
  std::thread a([&] {
    freed = static_cast<char *>(hugepool_alloc(4 * MiB));
    if (freed) std::memset(freed, 7, 4 * MiB);
    hugepool_free(freed);  // into thread a's own cache
  });
  a.join();  // a has exited: its cache went to the shared cache
  REQUIRE(freed != nullptr);
  CHECK(avail0 - kv::huge_available() == 2);
  void *got = nullptr;
  long long used = -1, page_kb = -1;
  std::thread b([&] {
    got = hugepool_alloc(4 * MiB);
    used = avail0 - kv::huge_available();
    page_kb = kv::smaps_of(got).field("KernelPageSize");
    hugepool_free(got);
  });
  b.join();
  CHECK(got == freed);  // the same mapping ...
  CHECK(used == 2);     // ... and no new pages
  CHECK(page_kb == 2048);
  CHECK(hugepool_trim() == 4 * MiB);
  CHECK(kv::huge_available() == avail0);
  CHECK_FALSE(mapped_at(freed));
  fresh_state();
}

TEST_CASE("a buffer in a live thread's cache is found by another thread", "[threads][cache]") {
  kv::PoolGuard pool(8);
  fresh_state();
  const long long avail0 = kv::huge_available();
  std::atomic<int> phase{0};
  void *freed = nullptr;
  std::thread a([&] {
    freed = hugepool_alloc(4 * MiB);
    hugepool_free(freed);  // stays in a's cache while a lives
    phase = 1;
    while (phase != 2) std::this_thread::yield();
  });
  while (phase != 1) std::this_thread::yield();
  void *p = hugepool_alloc(4 * MiB);
  CHECK(p == freed);
  CHECK(avail0 - kv::huge_available() == 2);
  hugepool_stats st;
  hugepool_get_stats(&st);
  CHECK(st.cache_hits >= 1);
  hugepool_free(p);
  phase = 2;
  a.join();
  hugepool_trim();
  CHECK(kv::huge_available() == avail0);
  fresh_state();
}

// A hit leaves the buffer's entry in the live table marked as the thread
// cache's; another thread must still see it as live, resize it, free it,
// and a second free of it must be refused.  Checked from smaps and meminfo.
TEST_CASE("a buffer a thread's cache handed out is owned, resized and freed by another thread", "[threads][cache]") {
  kv::PoolGuard pool(8);
  fresh_state();
  const long long avail0 = kv::huge_available();
  char *p = nullptr;
  std::atomic<int> phase{0};
  std::string late_free;
  std::thread a([&] {
    void *first = hugepool_alloc(4 * MiB);
    hugepool_free(first);                              // into a's cache
    p = static_cast<char *>(hugepool_alloc(4 * MiB));  // a hit: handed out by a's cache
    if (p != first) p = nullptr;
    if (p) std::memset(p, 5, 4 * MiB);
    phase = 1;
    while (phase != 2) std::this_thread::yield();
    StderrCapture err;
    hugepool_free(first);  // freed by the main thread already: refused
    late_free = err.text();
    phase = 3;
  });
  while (phase != 1) std::this_thread::yield();
  REQUIRE(p != nullptr);
  CHECK(hugepool_owns(p));
  CHECK(hugepool_usable_size(p) == 4 * MiB);
  CHECK(hugepool_kind_of(p) == HUGEPOOL_KIND_HUGE_2M);
  auto *q = static_cast<char *>(hugepool_realloc(p, 8 * MiB));  // taken from a's cache to be resized
  REQUIRE(q != nullptr);
  CHECK(q[0] == 5);
  CHECK(q[4 * MiB - 1] == 5);
  std::memset(q + 4 * MiB, 6, 4 * MiB);
  CHECK(kv::smaps_of(q).field("KernelPageSize") == 2048);
  CHECK(avail0 - kv::huge_available() == 4);
  CHECK(hugepool_usable_size(q) == 8 * MiB);
  hugepool_stats st;
  hugepool_get_stats(&st);
  CHECK(st.live_buffers == 1);
  CHECK(st.bytes_live == 8 * MiB);
  hugepool_free(q);
  CHECK_FALSE(hugepool_owns(q));
  phase = 2;
  while (phase != 3) std::this_thread::yield();
  a.join();
  CHECK(late_free.find("not a live hugepool buffer") != std::string::npos);
  hugepool_get_stats(&st);
  CHECK(st.live_buffers == 0);
  CHECK(st.bytes_live == 0);
  hugepool_trim();
  CHECK(kv::huge_available() == avail0);
  fresh_state();
}

TEST_CASE("the slot and byte limits hold across every thread's cache", "[threads][cache]") {
  kv::PoolGuard pool(16);
  fresh_state();
  REQUIRE(hugepool_set_cache_limits(2, size_t{1} << 30) == 0);
  const long long avail0 = kv::huge_available();
  std::atomic<int> allocated{0}, done{0}, failed{0};
  std::atomic<bool> go_on{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; t++) {
    threads.emplace_back([&, t] {
      void *p = hugepool_alloc(4 * MiB);
      if (!p) failed++;
      if (p) std::memset(p, 1, 4 * MiB);
      allocated++;
      while (allocated != 3 || done != t) std::this_thread::yield();  // all live, then free in turn
      hugepool_free(p);
      done++;
      while (!go_on) std::this_thread::yield();  // alive: the block stays in its cache
    });
  }
  while (done != 3) std::this_thread::yield();
  REQUIRE(failed == 0);
  // Three buffers freed by three live threads, two slots: exactly two stay.
  CHECK(avail0 - kv::huge_available() == 4);
  hugepool_stats st;
  hugepool_get_stats(&st);
  CHECK(st.cached_buffers == 2);
  CHECK(st.bytes_cached == 8 * MiB);
  CHECK(st.live_buffers == 0);
  CHECK(st.frees == st.allocs);
  // Lowering the byte limit takes blocks out of the threads' caches at once.
  REQUIRE(hugepool_set_cache_limits(2, 4 * MiB) == 0);
  CHECK(avail0 - kv::huge_available() == 2);
  go_on = true;
  for (auto &th : threads) th.join();
  CHECK(hugepool_trim() == 4 * MiB);
  CHECK(kv::huge_available() == avail0);
  fresh_state();
}

TEST_CASE("a short pool takes pages back from another thread's cache", "[threads][cache]") {
  kv::PoolGuard pool(4);
  fresh_state();
  std::atomic<int> phase{0};
  void *held = nullptr;
  std::thread a([&] {
    held = hugepool_alloc(8 * MiB);  // the whole pool
    hugepool_free(held);             // cached in a's cache
    phase = 1;
    while (phase != 2) std::this_thread::yield();
  });
  while (phase != 1) std::this_thread::yield();
  const long long avail_before = kv::huge_available();
  void *p = hugepool_alloc(2 * MiB);  // another class: needs a's pages
  const long long page_kb = p ? kv::smaps_of(p).field("KernelPageSize") : -1;
  const bool held_mapped = mapped_at(held);
  hugepool_free(p);
  phase = 2;  // let a go before any check can end the test
  a.join();
  CHECK(avail_before == 0);  // a's cache held the whole pool
  REQUIRE(p != nullptr);
  CHECK(page_kb == 2048);
  CHECK_FALSE(held_mapped);
  hugepool_trim();
  fresh_state();
}

TEST_CASE("fork drops the buffers other threads had cached", "[threads][fork]") {
  kv::PoolGuard pool(8);
  fresh_state();
  std::atomic<int> phase{0};
  void *held = nullptr;
  std::thread a([&] {
    held = hugepool_alloc(4 * MiB);
    std::memset(held, 3, 4 * MiB);
    hugepool_free(held);
    phase = 1;
    while (phase != 2) std::this_thread::yield();
  });
  while (phase != 1) std::this_thread::yield();
  pid_t pid = fork();
  if (pid == 0) {
    alarm(20);
    int bad = mapped_at(held) ? 1 : 0;  // the child has no view of the parent's cached pages
    hugepool_stats st;
    hugepool_get_stats(&st);
    bad += st.cached_buffers != 0 ? 2 : 0;
    void *q = hugepool_alloc(4 * MiB);  // and maps its own
    bad += q && kv::smaps_of(q).field("KernelPageSize") == 2048 ? 0 : 4;
    hugepool_free(q);
    _exit(bad);
  }
  int status = 0;
  const bool waited = pid > 0 && waitpid(pid, &status, 0) == pid;
  const bool still_mapped = mapped_at(held);  // still in a's cache in the parent
  phase = 2;                                  // let a go before any check can end the test
  a.join();
  REQUIRE(waited);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(still_mapped);
  hugepool_trim();
  CHECK(kv::huge_rsvd() == 0);
  fresh_state();
}

TEST_CASE("the slot limit goes beyond 4096", "[cache]") {
  fresh_state();
  CHECK(hugepool_set_cache_limits(100000, size_t{1} << 30) == 0);
  hugepool_stats st;
  hugepool_get_stats(&st);
  CHECK(st.cache_max_slots == 100000);
  std::string out;
  CHECK(run(std::string("HUGEPOOL_CACHE_SLOTS=100000 ") + HUGEPOOL_PROBE + " 2097152 0", out) == 0);
  CHECK(out.find("slots 100000") != std::string::npos);
  fresh_state();
}
