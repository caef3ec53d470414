// SPDX-License-Identifier: BSD-3-Clause
// hugepool_realloc(): growth moves page-table entries (the kernel's page
// frames stay the same), needs only the added pages, keeps the data; shrink
// gives pages back; errors leave the old buffer intact; threads and fork.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "core_test.hpp"
#include "alloc.h"
#include "live.h"
#include "registry.h"

using namespace test;

namespace {

// The physical frame behind a virtual address (root reads frame numbers).
uint64_t frame_of(const void *addr) {
  int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  uint64_t entry = 0;
  const auto off = static_cast<off_t>(reinterpret_cast<uintptr_t>(addr) / 4096 * 8);
  bool ok = fd >= 0 && ::pread(fd, &entry, sizeof(entry), off) == static_cast<ssize_t>(sizeof(entry));
  if (fd >= 0) ::close(fd);
  return ok && (entry >> 63) ? entry & ((uint64_t{1} << 55) - 1) : 0;
}

// One 64-bit word per 64 KiB: cheap to write and check over large buffers.
constexpr size_t kStride = 64 << 10;
void fill(char *p, size_t from, size_t to, uint64_t salt) {
  for (size_t off = from; off < to; off += kStride) {
    const uint64_t w = salt + off;
    std::memcpy(p + off, &w, sizeof(w));
  }
}
bool intact(const char *p, size_t to, uint64_t salt) {
  for (size_t off = 0; off < to; off += kStride) {
    uint64_t w;
    std::memcpy(&w, p + off, sizeof(w));
    if (w != salt + off) return false;
  }
  return true;
}

// Whether any hugetlb mapping is left (with kv::self_hugetlb_kb: unlike the
// node-wide meminfo counts, other processes on the machine cannot move it).
bool any_hugetlb_mapping() { return kv::read_file("/proc/self/maps").find("anon_hugepage") != std::string::npos; }

hugepool_stats stats() {
  hugepool_stats st;
  hugepool_get_stats(&st);
  return st;
}

}  // namespace

TEST_CASE("realloc growth moves the pages, keeps the data, and shrink gives pages back", "[realloc]") {
  kv::PoolGuard pool(64);
  fresh_state();
  REQUIRE(kv::self_hugetlb_kb() == 0);
  const hugepool_stats st0 = stats();
  auto *p = static_cast<char *>(hugepool_alloc(3 * MiB));
  REQUIRE(p != nullptr);
  fill(p, 0, 3 * MiB, 11);
  const uint64_t frame0 = frame_of(p);
  REQUIRE(frame0 != 0);
  size_t size = 3 * MiB;
  // 1 MB steps to 100 MB: past the first headroom (3 x 4 MB + 64 MB), so the
  // buffer also moves once while made of many mappings.
  for (size_t want = 4 * MiB; want <= 100 * MiB; want += MiB) {
    auto *q = static_cast<char *>(hugepool_realloc(p, want));
    REQUIRE(q != nullptr);
    REQUIRE(intact(q, size, 11));
    REQUIRE(reinterpret_cast<uintptr_t>(q) % (2 * MiB) == 0);
    fill(q, size, want, 11);
    p = q;
    size = want;
  }
  CHECK(frame_of(p) == frame0);  // the first page is the same page frame: moved, not copied
  kv::RangeView v = kv::range_view(p, 100 * MiB);
  CHECK(v.mapped == 100 * MiB);
  CHECK(v.all_2m);
  CHECK(v.hugetlb_kb == 100 * 1024);
  CHECK(kv::self_hugetlb_kb() == 50 * 2048);  // the kernel's count: 50 pages in use, no more
  CHECK(hugepool_usable_size(p) == 100 * MiB);
  const hugepool_stats st1 = stats();
  CHECK(st1.realloc_grows - st0.realloc_grows == 48);  // one per added page: 6, 8, ..., 100 MB
  CHECK(st1.realloc_copies == st0.realloc_copies);
  CHECK(st1.bytes_live == 100 * MiB);

  // Shrink: the pages past the new end go back to the pool at once.
  auto *s = static_cast<char *>(hugepool_realloc(p, 10 * MiB + 1));
  REQUIRE(s == p);  // shrinking never moves
  CHECK(intact(s, 10 * MiB, 11));
  CHECK(kv::self_hugetlb_kb() == 6 * 2048);
  CHECK(kv::range_view(s, 12 * MiB).hugetlb_kb == 12 * 1024);
  CHECK(hugepool_usable_size(s) == 12 * MiB);
  CHECK(stats().realloc_shrinks - st0.realloc_shrinks == 1);
  // Same number of pages: the same buffer, nothing else.
  CHECK(hugepool_realloc(s, 11 * MiB) == s);
  CHECK(kv::self_hugetlb_kb() == 6 * 2048);
  // Grows again into the headroom the shrink left.
  auto *g = static_cast<char *>(hugepool_realloc(s, 40 * MiB));
  CHECK(g == s);
  CHECK(intact(g, 10 * MiB, 11));

  hugepool_free(g);
  hugepool_trim();
  CHECK(kv::self_hugetlb_kb() == 0);  // no page kept,
  CHECK(!any_hugetlb_mapping());      // and no mapping that could hold a reservation
}

TEST_CASE("realloc growth with the pool exactly full needs only the added pages", "[realloc]") {
  kv::PoolGuard pool(10);
  fresh_state();
  const long long avail0 = kv::huge_available();
  auto *p = static_cast<char *>(hugepool_alloc(8 * MiB));
  REQUIRE(p != nullptr);
  fill(p, 0, 8 * MiB, 5);
  REQUIRE(kv::huge_available() == 6);

  SECTION("the textbook way (map the new size, move the old pages in) would fail here") {
    void *m = mmap(nullptr, 20 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
    CHECK(m == MAP_FAILED);
    if (m != MAP_FAILED) munmap(m, 20 * MiB);
    hugepool_free(p);
  }
  SECTION("growth to all 10 pages succeeds and every page is usable") {
    auto *q = static_cast<char *>(hugepool_realloc(p, 20 * MiB));
    REQUIRE(q != nullptr);
    CHECK(intact(q, 8 * MiB, 5));
    std::memset(q + 8 * MiB, 0x5a, 12 * MiB);  // reserved pages: no SIGBUS
    CHECK(kv::huge_free() == 0);
    CHECK(kv::range_view(q, 20 * MiB).hugetlb_kb == 20 * 1024);
    // One page more than the pool has: NULL, ENOMEM, the buffer as it was.
    const hugepool_stats st = stats();
    errno = 0;
    CHECK(hugepool_realloc(q, 22 * MiB) == nullptr);
    CHECK(errno == ENOMEM);
    CHECK(hugepool_owns(q));
    CHECK(hugepool_usable_size(q) == 20 * MiB);
    CHECK(intact(q, 8 * MiB, 5));
    CHECK(kv::range_view(q, 20 * MiB).mapped == 20 * MiB);
    CHECK(stats().failures == st.failures + 1);
    CHECK(stats().bytes_live == 20 * MiB);
    hugepool_free(q);
  }
  SECTION("cached pages make up the shortfall") {
    void *other = hugepool_alloc(12 * MiB);
    REQUIRE(other != nullptr);
    hugepool_free(other);  // cached: the pool has no free page left
    REQUIRE(kv::huge_available() == 0);
    auto *q = static_cast<char *>(hugepool_realloc(p, 14 * MiB));
    REQUIRE(q != nullptr);
    CHECK(intact(q, 8 * MiB, 5));
    CHECK(stats().cached_buffers == 0);
    hugepool_free(q);
  }
  SECTION("with policy small, a growth the pool cannot cover is copied onto 4 KB pages") {
    REQUIRE(hugepool_set_policy(HUGEPOOL_POLICY_SMALL) == 0);
    const hugepool_stats st = stats();
    auto *q = static_cast<char *>(hugepool_realloc(p, 40 * MiB));
    REQUIRE(q != nullptr);
    CHECK(q != p);
    CHECK(hugepool_kind_of(q) == HUGEPOOL_KIND_SMALL);
    CHECK(intact(q, 8 * MiB, 5));
    CHECK(!hugepool_owns(p));
    CHECK(stats().realloc_copies == st.realloc_copies + 1);
    // A fallback buffer grows too (anonymous pages move the same way).
    auto *r = static_cast<char *>(hugepool_realloc(q, 80 * MiB));
    REQUIRE(r != nullptr);
    CHECK(intact(r, 8 * MiB, 5));
    CHECK(reinterpret_cast<uintptr_t>(r) % (2 * MiB) == 0);
    CHECK(kv::range_view(r, 80 * MiB).mapped == 80 * MiB);
    hugepool_free(r);
    hugepool_set_policy(HUGEPOOL_POLICY_STRICT);
  }
  hugepool_trim();
  CHECK(kv::huge_available() == avail0);
}

TEST_CASE("realloc: NULL, zero bytes, foreign pointers, impossible sizes and errno", "[realloc]") {
  kv::PoolGuard pool(4);
  fresh_state();
  errno = 1234;
  auto *p = static_cast<char *>(hugepool_realloc(nullptr, 3 * MiB));  // NULL: an allocation
  REQUIRE(p != nullptr);
  CHECK(hugepool_owns(p));
  CHECK(errno == 1234);  // success leaves errno alone
  std::memset(p, 7, 3 * MiB);
  p = static_cast<char *>(hugepool_realloc(p, 6 * MiB));
  REQUIRE(p != nullptr);
  CHECK(errno == 1234);

  errno = 0;
  CHECK(hugepool_realloc(p, SIZE_MAX - 10) == nullptr);  // rounds past the address space
  CHECK(errno == ENOMEM);
  CHECK(hugepool_owns(p));
  CHECK(p[3 * MiB - 1] == 7);

  int local = 0;
  {
    StderrCapture err;
    errno = 0;
    CHECK(hugepool_realloc(&local, 4 * MiB) == nullptr);
    CHECK(errno == EINVAL);
    CHECK(err.text().find("not a live hugepool buffer") != std::string::npos);
  }

  errno = 77;
  CHECK(hugepool_realloc(p, 0) == nullptr);  // frees, like glibc
  CHECK(errno == 77);
  CHECK(!hugepool_owns(p));
  hugepool_trim();
  CHECK(kv::self_hugetlb_kb() == 0);
  CHECK(!any_hugetlb_mapping());
}

TEST_CASE("a buffer being resized cannot be freed or resized by another call", "[realloc][threads]") {
  kv::PoolGuard pool(4);
  fresh_state();
  void *p = hugepool_alloc(2 * MiB);
  REQUIRE(p != nullptr);
  hp_block b;
  REQUIRE(live_begin_resize(p, &b) == 0);  // what hugepool_realloc() holds while it works
  {
    StderrCapture err;
    hugepool_free(p);  // a program error: refused, reported
    CHECK(err.text().find("another thread is resizing") != std::string::npos);
  }
  CHECK(hugepool_owns(p));
  {
    StderrCapture err;
    errno = 0;
    CHECK(hugepool_realloc(p, 8 * MiB) == nullptr);
    CHECK(errno == EBUSY);
    errno = 0;
    CHECK(hugepool_realloc(p, MiB) == nullptr);  // the same pages: refused as well
    CHECK(errno == EBUSY);
  }
  live_end_resize(&b, &b);  // kept in place: no statistics change
  void *q = hugepool_realloc(p, 8 * MiB);
  REQUIRE(q != nullptr);
  hugepool_free(q);
  hugepool_trim();
}

// A string appended to a few bytes at a time: a realloc that keeps the
// block's pages takes the short path (one registry visit); it must change no
// mapping and keep the statistics exact, with threads doing it at once, and
// also for a block a thread cache handed out (whose registry entry is the
// cache's until a resize detaches it).
TEST_CASE("realloc within a buffer's pages maps nothing and keeps the statistics exact, in 4 threads",
          "[realloc][threads]") {
  constexpr int kThreads = 4;
  kv::PoolGuard pool(4 * kThreads);
  fresh_state();
  const hugepool_stats st0 = stats();
  const long long kb0 = kv::self_hugetlb_kb();
  std::vector<char *> bufs(kThreads);
  std::vector<size_t> last(kThreads);
  std::atomic<int> moved{0}, lost{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      char *p = static_cast<char *>(hugepool_alloc(3 * MiB));
      if (t % 2) {  // from this thread's cache: freed, then taken again
        hugepool_free(p);
        p = static_cast<char *>(hugepool_alloc(3 * MiB));
      }
      if (!p) {
        lost++;
        return;
      }
      size_t size = 3 * MiB;
      std::memset(p, 'a' + t, size);
      const uint64_t frame = frame_of(p);
      for (size_t want = size + 4099; want <= 4 * MiB; want += 4099) {  // grows within its 2 pages
        if (hugepool_realloc(p, want) != p) moved++;
        std::memset(p + size, 'a' + t, want - size);
        size = want;
      }
      for (size_t want = size; want > 2 * MiB; want -= 65537) {  // and shrinks within them
        if (hugepool_realloc(p, want) != p) moved++;
        size = want;
      }
      for (size_t at = 0; at < size; at += 4096)
        if (p[at] != 'a' + t) lost++;
      if (frame_of(p) != frame) moved++;
      bufs[t] = p;
      last[t] = size;
    });
  }
  for (auto &th : threads) th.join();
  CHECK(moved == 0);
  CHECK(lost == 0);
  const hugepool_stats st1 = stats();
  CHECK(st1.maps - st0.maps == kThreads * 1);  // one mapping of 2 pages each, nothing since
  CHECK(st1.realloc_grows == st0.realloc_grows);
  CHECK(st1.realloc_shrinks == st0.realloc_shrinks);
  size_t asked = 0;
  for (size_t n : last) asked += n;
  CHECK(st1.bytes_requested - st0.bytes_requested == asked);
  CHECK(st1.bytes_slack - st0.bytes_slack == kThreads * 4 * MiB - asked);
  CHECK(kv::self_hugetlb_kb() - kb0 == kThreads * 2 * 2048);
  for (char *p : bufs) hugepool_free(p);
  const hugepool_stats st2 = stats();
  CHECK(st2.bytes_requested == st0.bytes_requested);
  CHECK(st2.bytes_slack == st0.bytes_slack);
  hugepool_trim();
  CHECK(kv::self_hugetlb_kb() == kb0);
}

// Legal: one thread grows and shrinks its buffer while others allocate, free
// and resize their own.  (Freeing the buffer being resized is the program's
// error: the test above shows it is refused.)
TEST_CASE("realloc of one buffer while other threads free and resize theirs", "[realloc][threads]") {
  kv::PoolGuard pool(200);
  fresh_state();
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  auto other = [&](unsigned seed) {
    std::vector<char *> mine;
    while (!stop.load()) {
      seed = seed * 1103515245 + 12345;
      size_t n = (1 + seed % 6) * MiB;
      if (mine.size() < 4) {
        auto *b = static_cast<char *>(hugepool_alloc(n));
        if (b) {
          std::memset(b, static_cast<int>(seed & 0x7f), 64);
          mine.push_back(b);
        }
      } else {
        size_t i = seed % mine.size();
        if (seed & 1) {
          hugepool_free(mine[i]);
          mine.erase(mine.begin() + static_cast<long>(i));
        } else {
          char c = mine[i][0];
          auto *r = static_cast<char *>(hugepool_realloc(mine[i], n));
          if (r) {
            bad += r[0] != c;
            mine[i] = r;
          }
        }
      }
    }
    for (char *b : mine) hugepool_free(b);
  };
  std::thread t1(other, 1), t2(other, 2);
  auto *p = static_cast<char *>(hugepool_alloc(2 * MiB));
  REQUIRE(p != nullptr);
  size_t size = 2 * MiB;
  fill(p, 0, size, 99);
  for (int round = 0; round < 300; round++) {
    size_t want = (2 + static_cast<size_t>((round * 7) % 40)) * MiB;
    auto *q = static_cast<char *>(hugepool_realloc(p, want));
    if (!q) continue;  // the others may hold the pool for a moment
    if (!intact(q, std::min(size, want), 99)) bad++;
    if (want > size) fill(q, size, want, 99);
    p = q;
    size = want;
  }
  stop = true;
  t1.join();
  t2.join();
  CHECK(bad == 0);
  CHECK(kv::range_view(p, size).mapped == size);
  hugepool_free(p);
  hugepool_trim();
  CHECK(stats().live_buffers == 0);
  CHECK(kv::self_hugetlb_kb() == 0);
  CHECK(!any_hugetlb_mapping());
}

// 1 GB pages grow as 2 MB pages do, a whole 1 GB page at a time.  Where
// the kernel has no 1 GB pages (no hugepages-1048576kB in sysfs) or cannot
// find 1 GB of contiguous memory for one at run time, the test says so and
// checks only what the kernel allows: that the page size is refused.
TEST_CASE("realloc of a 1 GB-page buffer adds whole 1 GB pages, or fails with the buffer intact", "[realloc][1g]") {
  fresh_state();
  if (access("/sys/kernel/mm/hugepages/hugepages-1048576kB", F_OK) != 0) {
    CHECK(hugepool_set_page_size(size_t{1} << 30) == -1);
    CHECK(errno == ENOTSUP);
    WARN("skipped: this kernel has no 1 GB hugetlb pages (/sys/kernel/mm/hugepages/hugepages-1048576kB is absent)");
    return;
  }
  std::unique_ptr<kv::PoolGuard> pool;
  try {
    pool = std::make_unique<kv::PoolGuard>(1, 1024 * 1024);
  } catch (const std::exception &e) {
    WARN("skipped: no 1 GB page could be reserved on this node (" << e.what() << ")");
    return;
  }
  REQUIRE(hugepool_set_page_size(size_t{1} << 30) == 0);
  const size_t gib = size_t{1} << 30;
  auto *p = static_cast<char *>(hugepool_alloc(100 * MiB));
  REQUIRE(p != nullptr);
  fill(p, 0, gib, 41);
  const uint64_t frame0 = frame_of(p);
  // The pool is empty: growth by one page is ENOMEM, the buffer as it was.
  errno = 0;
  CHECK(hugepool_realloc(p, gib + 1) == nullptr);
  CHECK(errno == ENOMEM);
  CHECK(hugepool_usable_size(p) == gib);
  CHECK(intact(p, gib, 41));
  bool more = true;
  try {
    pool->set_free(1);
  } catch (const std::exception &e) {
    more = false;
    WARN("only the shortage was checked: no second 1 GB page (" << e.what() << ")");
  }
  if (more) {
    auto *q = static_cast<char *>(hugepool_realloc(p, gib + 1));
    REQUIRE(q != nullptr);
    CHECK(intact(q, gib, 41));
    CHECK(frame_of(q) == frame0);  // moved, not copied
    CHECK(hugepool_usable_size(q) == 2 * gib);
    auto e = kv::smaps_of(q);
    CHECK(e.field("KernelPageSize") == 1024 * 1024);
    p = q;
  }
  hugepool_free(p);
  hugepool_trim();
  CHECK(!any_hugetlb_mapping());
  fresh_state();
}

// A buffer that grows past its headroom moves, and its old range goes back
// to the kernel before the registry learns the new address: a buffer another
// thread maps at that moment lands there, and for a while two registry
// entries share one address.  Every thread here allocates, grows (a fresh
// buffer has no headroom: the first growth moves it), shrinks and frees
// buffers of the same few sizes, so new buffers keep landing on ranges just
// vacated.  Each call must act on the caller's own buffer: no free refused,
// no realloc refused, no byte lost, nothing left live at the end.
TEST_CASE("realloc moving buffers while other threads map the ranges they leave", "[realloc][threads]") {
  kv::PoolGuard pool(96);
  fresh_state();
  REQUIRE(hugepool_set_cache_limits(4, 16 * MiB) == 0);
  constexpr int kThreads = 3;
  constexpr int kRounds = 400;
  std::atomic<int> refused{0}, lost{0};
  auto work = [&](unsigned seed) {
    for (int round = 0; round < kRounds; round++) {
      seed = seed * 1103515245 + 12345;
      const size_t first = (1 + seed % 3) * 2 * MiB;  // 2, 4 or 6 MB
      auto *p = static_cast<char *>(hugepool_alloc(first));
      if (!p) {
        refused++;
        continue;
      }
      const uint64_t salt = seed;
      fill(p, 0, first, salt);
      size_t size = first;
      for (size_t want : {first + 2 * MiB, first + 6 * MiB, first, first + 4 * MiB}) {
        auto *q = static_cast<char *>(hugepool_realloc(p, want));
        if (!q) {  // the pool holds every thread's largest buffer: never short
          refused++;
          break;
        }
        if (!intact(q, std::min(size, want), salt)) lost++;
        if (want > size) fill(q, size, want, salt);
        p = q;
        size = want;
      }
      if (!hugepool_owns(p)) refused++;
      hugepool_free(p);
    }
  };
  const hugepool_stats st0 = stats();
  std::string warnings;
  {
    StderrCapture err;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; t++) threads.emplace_back(work, 17u * static_cast<unsigned>(t) + 1);
    for (auto &t : threads) t.join();
    warnings = err.text();
  }
  INFO(warnings.substr(0, 2000));
  CHECK(refused == 0);
  CHECK(lost == 0);
  CHECK(warnings.find("resizing") == std::string::npos);
  CHECK(warnings.find("not a live") == std::string::npos);
  const hugepool_stats st1 = stats();
  CHECK(st1.live_buffers == 0);
  CHECK(st1.failures == st0.failures);
  CHECK(st1.frees - st0.frees == static_cast<uint64_t>(kThreads) * kRounds);
  hugepool_trim();
  CHECK(kv::self_hugetlb_kb() == 0);
  CHECK(!any_hugetlb_mapping());
  fresh_state();
}

// The resize lock fork() takes is the parent thread's: a child (a new
// thread id) that forks again, and its child again, must not find it held
// (a shell under hugepool-run forks at every level).
TEST_CASE("fork in a child and a grandchild after a resize: nothing is left held", "[realloc][fork]") {
  kv::PoolGuard pool(64);
  fresh_state();
  auto *p = static_cast<char *>(hugepool_alloc(2 * MiB));
  REQUIRE(p);
  p = static_cast<char *>(hugepool_realloc(p, 4 * MiB));
  REQUIRE(p);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(20); // a hang is a failure, not a stuck test
    for (int level = 0; level < 3; level++) {
      void *q = hugepool_realloc(p, (6 + 2 * static_cast<size_t>(level)) * MiB);
      if (!q) _exit(10 + level);
      p = static_cast<char *>(q);
      pid_t next = fork();
      if (next < 0) _exit(20 + level);
      if (next > 0) {
        int st = 0;
        if (waitpid(next, &st, 0) != next) _exit(30 + level);
        _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 40 + level);
      }
    }
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  INFO("status " << status);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  hugepool_free(p);
  hugepool_trim();
  CHECK(kv::self_hugetlb_kb() == 0);
}

// fork() while another thread grows a buffer: the child sees each live
// buffer whole (fork waits for a resize in flight), can write all of it,
// and the registry it inherits has nothing half-done.
TEST_CASE("fork during growth: the child inherits whole buffers", "[realloc][fork]") {
  kv::PoolGuard pool(160);
  fresh_state();
  std::atomic<bool> stop{false};
  std::atomic<size_t> valid{0};  // bytes of the growing buffer known to hold the pattern
  std::atomic<bool> started{false};
  std::thread grower([&] {
    auto *p = static_cast<char *>(hugepool_alloc(2 * MiB));
    size_t size = 2 * MiB;
    fill(p, 0, size, 3);
    valid = size;
    started = true;
    for (int round = 0; !stop.load(); round++) {
      size_t want = (2 + static_cast<size_t>(round % 30)) * MiB;
      if (want < size) valid = want;
      auto *q = static_cast<char *>(hugepool_realloc(p, want));
      if (!q) continue;
      if (want > size) fill(q, size, want, 3);
      p = q;
      size = want;
      valid = size;
    }
    hugepool_free(p);
  });
  while (!started.load()) std::this_thread::yield();
  int failures = 0;
  for (int i = 0; i < 40; i++) {
    pid_t pid = fork();
    if (pid == 0) {
      struct Seen {
        size_t ok_bytes;
        int bad, live;
      } seen{valid.load(), 0, 0};
      registry_walk(
          [](hp_block *b, void *arg) {
            auto *s = static_cast<Seen *>(arg);
            s->live++;
            if (b->resizing) s->bad |= 1;
            if (kv::range_view(b->addr, b->size).mapped != b->size) s->bad |= 2;
            if (!intact(static_cast<char *>(b->addr), std::min(s->ok_bytes, b->size), 3)) s->bad |= 4;
            std::memset(b->addr, 1, b->size);  // every page writable: no SIGBUS
          },
          &seen);
      _exit(seen.live == 1 ? seen.bad : 8);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      failures++;
      UNSCOPED_INFO("child " << i << ": status " << status);
    }
    usleep(2000);
  }
  stop = true;
  grower.join();
  CHECK(failures == 0);
  hugepool_trim();
  CHECK(kv::self_hugetlb_kb() == 0);
  CHECK(!any_hugetlb_mapping());
}
