// SPDX-License-Identifier: BSD-3-Clause
// The cache: a hit reuses the very mapping with no new page; eviction, trim
// and the caps give pages back to the kernel's pool.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <sstream>
#include <thread>
#include <vector>

#include "alloc.h"  // alloc_set_decay: HUGEPOOL_CACHE_DECAY as init.c applies it
#include "core_test.hpp"

using namespace test;

// The hugetlb lines of /proc/self/maps (other mappings come and go with the
// test harness's own allocations, e.g. under ASan).
static std::string hugetlb_maps() {
  std::istringstream in(kv::read_file("/proc/self/maps"));
  std::string line, out;
  while (std::getline(in, line))
    if (line.find("anon_hugepage") != std::string::npos) out += line + "\n";
  return out;
}

// A new buffer of `bytes` with every byte set to `value`.
static char *filled(size_t bytes, int value) {
  auto *p = static_cast<char *>(hugepool_alloc(bytes));
  REQUIRE(p != nullptr);
  std::memset(p, value, bytes);
  return p;
}

TEST_CASE("a cache hit returns the same mapping and takes no new page or fault", "[cache]") {
  kv::PoolGuard pool(8);
  fresh_state();
  auto *p = filled(8 * MiB, 0x42);
  hugepool_free(p);
  const auto mem0 = kv::meminfo();
  const std::string maps0 = hugetlb_maps();
  const long faults0 = minor_faults();

  auto *q = static_cast<char *>(hugepool_alloc(8 * MiB));
  REQUIRE(q == p);
  std::memset(q, 0x17, 8 * MiB);  // touching it again needs no fault: the pages are still there

  const long faults1 = minor_faults();
  const auto mem1 = kv::meminfo();
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  CHECK(faults1 == faults0);  // (under ASan/TSan the first touches of the sanitizer's own shadow pages fault)
#else
  (void)faults0;
  (void)faults1;
#endif
  CHECK(mem1.at("HugePages_Free") == mem0.at("HugePages_Free"));
  CHECK(mem1.at("HugePages_Rsvd") == mem0.at("HugePages_Rsvd"));
  CHECK(hugetlb_maps() == maps0);  // no hugetlb mmap, no munmap
  hugepool_stats st;
  hugepool_get_stats(&st);
  CHECK(st.cache_hits >= 1);
  hugepool_free(q);
  hugepool_trim();
}

// n blocks of 2 MiB, block i filled with i + 1, freed first to last: their
// addresses, in the order they were freed.
static std::vector<char *> freed_in_order(int n) {
  std::vector<char *> blocks;
  for (int i = 0; i < n; i++) {
    auto *p = filled(2 * MiB, i + 1);
    blocks.push_back(p);
  }
  for (char *p : blocks) hugepool_free(p);
  return blocks;
}

// The last block freed is the first handed out again (LIFO, as glibc's bins
// and jemalloc's caches do): of equal blocks it is the one most recently
// written, in this thread's cache and in the shared one past it.
TEST_CASE("of equal cached blocks the last freed is handed out first", "[cache]") {
  kv::PoolGuard pool(12);
  fresh_state();
  constexpr int n = 8;  // beyond a thread cache's entries: the shared cache takes the rest
  const std::vector<char *> blocks = freed_in_order(n);
  const auto mem0 = kv::meminfo();
  const std::string maps0 = hugetlb_maps();
  std::vector<char *> again;
  for (int i = 0; i < n; i++) {
    auto *q = static_cast<char *>(hugepool_alloc(2 * MiB));
    REQUIRE(q != nullptr);
    again.push_back(q);
  }
  for (int i = 0; i < n; i++) {
    INFO("allocation " << i);
    CHECK(again[static_cast<size_t>(i)] == blocks[static_cast<size_t>(n - 1 - i)]);
    CHECK(again[static_cast<size_t>(i)][4096] == n - i);  // its pages: the contents written last
  }
  CHECK(hugetlb_maps() == maps0);  // all from the cache: no hugetlb mmap, no munmap
  CHECK(kv::meminfo().at("HugePages_Free") == mem0.at("HugePages_Free"));
  for (char *q : again) hugepool_free(q);
  hugepool_trim();
}

// Another thread's cached blocks: a thread whose own cache and the shared one
// are empty takes them from the owner's cache, again the last freed first.
TEST_CASE("a block taken from another thread's cache is its last freed", "[cache]") {
  kv::PoolGuard pool(6);
  fresh_state();
  constexpr int n = 4;  // a thread cache's entries: all stay in this thread's cache
  const std::vector<char *> blocks = freed_in_order(n);
  const auto mem0 = kv::meminfo();
  const std::string maps0 = hugetlb_maps();
  std::vector<char *> taken;
  std::vector<int> seen;
  std::thread other([&] {  // its own cache is empty, and so is the shared one
    for (int i = 0; i < n; i++) {
      auto *q = static_cast<char *>(hugepool_alloc(2 * MiB));
      taken.push_back(q);
      seen.push_back(q ? q[4096] : -1);
    }
    for (char *q : taken) hugepool_free(q);
  });
  other.join();
  REQUIRE(taken.size() == static_cast<size_t>(n));
  for (int i = 0; i < n; i++) {
    INFO("allocation " << i << " in the other thread");
    CHECK(taken[static_cast<size_t>(i)] == blocks[static_cast<size_t>(n - 1 - i)]);
    CHECK(seen[static_cast<size_t>(i)] == n - i);  // its pages: the contents written last
  }
  CHECK(hugetlb_maps() == maps0);  // all from this thread's cache: no hugetlb mmap, no munmap
  CHECK(kv::meminfo().at("HugePages_Free") == mem0.at("HugePages_Free"));
  hugepool_trim();
}

static size_t count_lines(const std::string &text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

// HUGEPOOL_CACHE_DECAY for one test (init.c sets it from the environment; the
// library's default, 0, comes back at the end).
struct DecaySet {
  explicit DecaySet(long long ms) { alloc_set_decay(ms); }
  ~DecaySet() { alloc_set_decay(0); }
  DecaySet(const DecaySet &) = delete;
  DecaySet &operator=(const DecaySet &) = delete;
};

// Long enough for a block to be idle past a decay of ms at the next slow
// path, also when it moved to the shared cache (its time starts again).
static void sleep_past_decay(long long ms) { std::this_thread::sleep_for(std::chrono::milliseconds(2 * ms + 50)); }

// HUGEPOOL_CACHE_DECAY: a cached buffer left unused for longer than the decay
// goes back to the kernel at the next new mapping; one freed just before
// stays cached.  From the kernel's view: the hugetlb mappings and
// HugePages_Free.  With no decay (the library's default) both stay.
TEST_CASE("a buffer left in the cache past HUGEPOOL_CACHE_DECAY goes back at the next new mapping", "[cache]") {
  for (long long decay : {300LL, 0LL}) {
    INFO("decay " << decay << " ms");
    kv::PoolGuard pool(12);
    fresh_state();
    const DecaySet decay_set(decay);
    auto *a = filled(8 * MiB, 1);
    hugepool_free(a);
    const auto freed = std::chrono::steady_clock::now();
    auto *b = static_cast<char *>(hugepool_alloc(2 * MiB));  // a new mapping: a was freed just now
    REQUIRE(b != nullptr);
    CHECK(b != a);
    const bool stalled = decay && std::chrono::steady_clock::now() - freed >= std::chrono::milliseconds(decay - 20);
    if (stalled)  // a machine that stalled for the decay between two calls: a may have gone back
      WARN("the free and the next mapping were " << decay << " ms or more apart");
    else
      CHECK(mapped_at(a));  // kept in the cache
    std::memset(b, 2, 2 * MiB);
    hugepool_free(b);
    CHECK(count_lines(hugetlb_maps()) == 2);  // a and b, cached
    sleep_past_decay(300);
    const auto free0 = kv::huge_free();
    hugepool_stats st0, st1;
    hugepool_get_stats(&st0);
    auto *c = static_cast<char *>(hugepool_alloc(4 * MiB));  // neither a nor b fits: a new mapping
    REQUIRE(c != nullptr);
    hugepool_get_stats(&st1);
    if (decay) {
      CHECK(count_lines(hugetlb_maps()) == 1);      // c alone: a and b went back
      CHECK(kv::huge_free() == free0 + 4 + 1 - 2);  // a's 4 pages and b's 1 back, c's 2 taken
      CHECK(st1.cache_evictions == st0.cache_evictions + 2);
      CHECK(st1.cached_buffers == 0);
    } else {
      CHECK(count_lines(hugetlb_maps()) == 3);
      CHECK(kv::huge_free() == free0 - 2);
      CHECK(st1.cached_buffers == 2);
    }
    hugepool_free(c);
    hugepool_trim();
  }
}

// The decay's other slow path: a free the thread's cache cannot keep (its
// entries are full) gives back what lies idle in the thread's cache and in
// the shared cache.  Of 8 blocks freed, the thread cache keeps the last 4
// and the shared cache the first 4; the free of a live 8 MiB buffer moves
// the oldest of the thread's (block 4) to the shared cache, where its idle
// time starts again, and takes its entry.  With no decay all stay.
TEST_CASE("cached buffers idle past the decay go back at a free the thread's cache cannot keep", "[cache]") {
  for (long long decay : {300LL, 0LL}) {
    INFO("decay " << decay << " ms");
    kv::PoolGuard pool(18);
    fresh_state();
    const DecaySet decay_set(decay);
    auto *live = filled(8 * MiB, 9);
    const std::vector<char *> blocks = freed_in_order(8);
    sleep_past_decay(300);
    const auto free0 = kv::huge_free();
    hugepool_stats st0, st1;
    hugepool_get_stats(&st0);
    hugepool_free(live);  // no map: only the free's slow path can give anything back
    hugepool_get_stats(&st1);
    CHECK(mapped_at(live));       // freed just now: cached
    CHECK(mapped_at(blocks[4]));  // moved to the shared cache just now: its idle time starts again
    for (size_t i : {0u, 1u, 2u, 3u, 5u, 6u, 7u}) {
      INFO("block " << i << (i < 4 ? " (shared cache)" : " (thread cache)"));
      CHECK(mapped_at(blocks[i]) == (decay == 0));
    }
    if (decay) {
      CHECK(kv::huge_free() == free0 + 7);
      CHECK(st1.cache_evictions == st0.cache_evictions + 7);
      CHECK(st1.cached_buffers == 2);
    } else {
      CHECK(kv::huge_free() == free0);
      CHECK(st1.cached_buffers == 9);
    }
    hugepool_trim();
  }
}

// A growth by hugepool_realloc maps the added pages: a slow path like a new
// buffer's, where idle cached buffers go back to the pool first.
TEST_CASE("a growth by realloc gives back cached buffers idle past the decay", "[cache][realloc]") {
  for (long long decay : {300LL, 0LL}) {
    INFO("decay " << decay << " ms");
    kv::PoolGuard pool(12);
    fresh_state();
    const DecaySet decay_set(decay);
    auto *buf = filled(2 * MiB, 5);
    auto *idle = filled(4 * MiB, 6);
    hugepool_free(idle);
    sleep_past_decay(300);
    // Pages no mapping holds: free and not reserved (the growth's are
    // reserved at mmap and faulted at first touch).
    auto unheld = [] {
      const auto m = kv::meminfo();
      return m.at("HugePages_Free") - m.at("HugePages_Rsvd");
    };
    const auto unheld0 = unheld();
    auto *grown = static_cast<char *>(hugepool_realloc(buf, 6 * MiB));  // 2 pages added, mapped
    REQUIRE(grown != nullptr);
    CHECK(grown[2 * MiB - 1] == 5);  // the contents kept
    CHECK(mapped_at(idle) == (decay == 0));
    CHECK(unheld() == unheld0 - 2 + (decay ? 2 : 0));  // the growth's 2 pages; idle's 2 back
    hugepool_free(grown);
    hugepool_trim();
  }
}

TEST_CASE("hugepool_calloc clears a reused buffer", "[cache]") {
  kv::PoolGuard pool(2);
  fresh_state();
  auto *p = static_cast<unsigned char *>(hugepool_alloc(2 * MiB));
  REQUIRE(p != nullptr);
  std::memset(p, 0xff, 2 * MiB);
  hugepool_free(p);
  auto *q = static_cast<unsigned char *>(hugepool_calloc(1024, 2048));
  REQUIRE(q == p);
  CHECK(std::all_of(q, q + 2 * MiB, [](unsigned char c) { return c == 0; }));
  hugepool_free(q);
  hugepool_trim();
}

// A miss takes the front of the block freed last when that block is at most
// twice the size asked: its pages are the ones written last (bench/RESULTS.md
// section 29).  The rest stays cached, a block of its own; nothing is mapped
// or unmapped, no page taken or given back.  A block more than twice the size
// is left whole, and a class no block holds maps.
TEST_CASE("a miss takes the front of the block freed last, up to twice the size, and caches the rest", "[cache]") {
  kv::PoolGuard pool(13);  // big 8 pages, a 2, d 3: all at once
  fresh_state();
  auto *big = static_cast<char *>(hugepool_alloc(16 * MiB));  // freed first: not the last freed block
  REQUIRE(big != nullptr);
  auto *a = filled(4 * MiB, 7);
  hugepool_free(big);
  hugepool_free(a);
  const auto mem0 = kv::meminfo();
  const std::string maps0 = hugetlb_maps();
  hugepool_stats st0;
  hugepool_get_stats(&st0);
  auto *b = static_cast<char *>(hugepool_alloc(2 * MiB));  // no 2 MB block is cached
  REQUIRE(b == a);                                          // a's front
  CHECK(b[0] == 7);
  CHECK(b[2 * MiB - 1] == 7);
  CHECK(hugepool_usable_size(b) == 2 * MiB);
  auto *c = static_cast<char *>(hugepool_alloc(2 * MiB));  // the rest, cached as a 2 MB block
  REQUIRE(c == a + 2 * MiB);
  CHECK(c[0] == 7);
  CHECK(hugetlb_maps() == maps0);  // no hugetlb mmap, no munmap
  CHECK(kv::meminfo().at("HugePages_Free") == mem0.at("HugePages_Free"));
  CHECK(kv::meminfo().at("HugePages_Rsvd") == mem0.at("HugePages_Rsvd"));
  hugepool_stats st;
  hugepool_get_stats(&st);
  CHECK(st.cache_hits == st0.cache_hits + 2);
  CHECK(st.cache_misses == st0.cache_misses);  // nothing mapped
  auto *d = static_cast<char *>(hugepool_alloc(6 * MiB));  // big (16 MB) is more than twice: a new mapping
  REQUIRE(d != nullptr);
  CHECK((d < big || d >= big + 16 * MiB));
  CHECK(mapped_at(big));
  std::memset(b, 1, 2 * MiB);  // the two parts are separate buffers
  std::memset(c, 2, 2 * MiB);
  CHECK(b[2 * MiB - 1] == 1);
  CHECK(c[0] == 2);
  hugepool_free(b);
  hugepool_free(c);
  hugepool_free(d);
  hugepool_trim();  // every part goes back: the pool is whole again
  CHECK(kv::huge_available() == 13);
  CHECK(count_lines(hugetlb_maps()) == 0);
}

// The two parts of a split block, both cached again (the front in the
// thread's cache, the rest in the shared one), serve a request of their sum
// as one buffer: a program alternating a 4 MiB and a 2 MiB buffer keeps one
// 4 MiB mapping, with no new mapping for the next 4 MiB request.
TEST_CASE("the parts of a split block are joined again for a request of their sum", "[cache]") {
  kv::PoolGuard pool(8);
  fresh_state();
  auto *a = filled(4 * MiB, 1);
  hugepool_free(a);
  auto *front = static_cast<char *>(hugepool_alloc(2 * MiB));
  REQUIRE(front == a);
  std::memset(front, 2, 2 * MiB);
  hugepool_free(front);
  const auto mem0 = kv::meminfo();
  const std::string maps0 = hugetlb_maps();
  auto *whole = static_cast<char *>(hugepool_alloc(4 * MiB));
  REQUIRE(whole == a);
  CHECK(hugepool_usable_size(whole) == 4 * MiB);
  CHECK(whole[0] == 2);            // the front's last contents
  CHECK(whole[4 * MiB - 1] == 1);  // the rest's
  std::memset(whole, 3, 4 * MiB);  // one buffer
  CHECK(hugetlb_maps() == maps0);  // no hugetlb mmap, no munmap
  CHECK(kv::meminfo().at("HugePages_Free") == mem0.at("HugePages_Free"));
  CHECK(kv::meminfo().at("HugePages_Rsvd") == mem0.at("HugePages_Rsvd"));
  hugepool_free(whole);
  hugepool_trim();
  CHECK(kv::huge_available() == 8);
  CHECK(count_lines(hugetlb_maps()) == 0);
}

// The front of a split block is a buffer like any other while its rest lies
// cached in the same mapping: it grows by hugepool_realloc (the growth moves
// it, mapping by mapping, as the rest holds the address space after it), a
// forked child gets a private hugetlb copy of it, and every page comes back
// at the end (HugePages_Free and Rsvd as before).
TEST_CASE("a split front grows, forks and frees with its rest cached beside it", "[cache][realloc][fork]") {
  kv::PoolGuard pool(12);
  fresh_state();
  const auto mem0 = kv::meminfo();
  auto *a = filled(4 * MiB, 4);
  hugepool_free(a);
  auto *front = static_cast<char *>(hugepool_alloc(2 * MiB));
  REQUIRE(front == a);
  std::memset(front, 5, 2 * MiB);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    alarm(20);
    int bad = front[2 * MiB - 1] != 5;
    bad += kv::smaps_of(front).field("KernelPageSize") == 2048 ? 0 : 10;
    std::memset(front, 6, 2 * MiB);  // its own copy
    _exit(bad);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(front[0] == 5);  // the child's writes stayed in the child
  auto *grown = static_cast<char *>(hugepool_realloc(front, 10 * MiB));
  REQUIRE(grown != nullptr);
  CHECK(grown[0] == 5);
  CHECK(grown[2 * MiB - 1] == 5);
  std::memset(grown + 2 * MiB, 7, 8 * MiB);
  CHECK(kv::smaps_of(grown + 9 * MiB).field("KernelPageSize") == 2048);
  auto *rest = static_cast<char *>(hugepool_alloc(2 * MiB));  // the rest, still cached and untouched
  REQUIRE(rest == a + 2 * MiB);
  CHECK(rest[0] == 4);
  CHECK(rest[2 * MiB - 1] == 4);
  hugepool_free(rest);
  hugepool_free(grown);
  hugepool_trim();
  const auto mem1 = kv::meminfo();
  CHECK(mem1.at("HugePages_Free") == mem0.at("HugePages_Free"));
  CHECK(mem1.at("HugePages_Rsvd") == mem0.at("HugePages_Rsvd"));
  CHECK(count_lines(hugetlb_maps()) == 0);
}

// ... but not of a block left idle past HUGEPOOL_CACHE_DECAY: its lines are
// long gone from the CPU's caches, and it goes back to the pool instead.
TEST_CASE("a block idle past the decay is not split: it goes back, and the request maps", "[cache]") {
  kv::PoolGuard pool(8);
  fresh_state();
  const DecaySet decay_set(300);
  auto *a = filled(4 * MiB, 3);
  hugepool_free(a);
  sleep_past_decay(300);
  auto *b = static_cast<char *>(hugepool_alloc(2 * MiB));
  REQUIRE(b != nullptr);
  CHECK(b != a);
  CHECK_FALSE(mapped_at(a));  // given back before the new mapping
  CHECK(count_lines(hugetlb_maps()) == 1);
  hugepool_free(b);
  hugepool_trim();
}

TEST_CASE("a drifting size reuses a cached block up to a quarter larger, never a smaller one", "[cache]") {
  kv::PoolGuard pool(56);  // a, b and c at once: 18 + 8 + 20 pages
  fresh_state();
  void *a = hugepool_alloc(36 * MiB);
  REQUIRE(a != nullptr);
  std::memset(a, 1, 36 * MiB);
  hugepool_free(a);
  const auto mem0 = kv::meminfo();
  const std::string maps0 = hugetlb_maps();
  for (size_t mb : {30, 31, 33, 35, 36}) {  // 30 MB * 1.25 = 37.5 MB: the 36 MB block serves them all
    void *p = hugepool_alloc(mb * MiB);
    REQUIRE(p == a);
    std::memset(p, 2, mb * MiB);
    CHECK(hugepool_usable_size(p) == 36 * MiB);
    hugepool_free(p);
  }
  CHECK(hugetlb_maps() == maps0);  // no hugetlb mmap, no munmap
  CHECK(kv::meminfo().at("HugePages_Free") == mem0.at("HugePages_Free"));
  void *b = hugepool_alloc(16 * MiB);  // 16 MB * 1.25 = 20 MB, and 36 MB is over twice 16: not from a
  REQUIRE(b != nullptr);
  CHECK(b != a);
  void *c = hugepool_alloc(40 * MiB);  // a cached block is never smaller than asked
  REQUIRE(c != nullptr);
  CHECK(c != a);
  hugepool_free(c);
  void *d = hugepool_alloc(34 * MiB);  // a (36 MB) and c (40 MB) fit: the smaller one serves
  CHECK(d == a);
  hugepool_free(d);
  hugepool_free(b);
  hugepool_trim();
}

TEST_CASE("a short pool is tried again at once after this process gives pages back, else after a wait", "[cache]") {
  kv::PoolGuard pool(2);
  fresh_state();
  void *a = hugepool_alloc(4 * MiB);  // both pages
  REQUIRE(a != nullptr);
  errno = 0;
  CHECK(hugepool_alloc(2 * MiB) == nullptr);  // the pool is short: later requests wait before the next try
  CHECK(errno == ENOMEM);
  hugepool_free(a);
  hugepool_trim();  // two pages back in the pool: the wait is over
  void *b = hugepool_alloc(2 * MiB);
  CHECK(b != nullptr);
  errno = 0;
  CHECK(hugepool_alloc(4 * MiB) == nullptr);  // one free page: short again
  CHECK(errno == ENOMEM);
  pool.set_free(2);  // pages reserved meanwhile (by the administrator, or freed elsewhere)
  usleep(150000);    // past the longest wait
  void *c = hugepool_alloc(4 * MiB);
  CHECK(c != nullptr);
  if (c) CHECK(kv::smaps_of(c).field("KernelPageSize") == 2048);
  hugepool_free(b);
  hugepool_free(c);
  hugepool_trim();
}

TEST_CASE("a strict caller sees pages reserved right after a refusal", "[cache]") {
  kv::PoolGuard pool(1);
  fresh_state();
  REQUIRE(hugepool_get_policy() == HUGEPOOL_POLICY_STRICT);
  errno = 0;
  CHECK(hugepool_alloc(4 * MiB) == nullptr);  // one free page
  CHECK(errno == ENOMEM);
  pool.set_free(2);  // the administrator (or hugepool-reserve) grows the pool
  void *p = hugepool_alloc(4 * MiB);  // at once: no backoff under the strict policy
  CHECK(p != nullptr);
  if (p) CHECK(kv::smaps_of(p).field("KernelPageSize") == 2048);
  hugepool_free(p);
  hugepool_trim();
}

TEST_CASE("when the slots are full a round-robin victim goes back to the pool", "[cache]") {
  kv::PoolGuard pool(6);
  fresh_state();
  REQUIRE(hugepool_set_cache_limits(2, size_t{1} << 30) == 0);
  const long long free0 = kv::huge_free();
  char *bufs[3];
  for (auto &b : bufs) {
    b = static_cast<char *>(hugepool_alloc(4 * MiB));
    REQUIRE(b != nullptr);
    std::memset(b, 1, 4 * MiB);
  }
  CHECK(free0 - kv::huge_free() == 6);
  for (auto *b : bufs) hugepool_free(b);
  // Two 4 MB buffers stay cached; the round-robin victim (the first one
  // cached) is unmapped and its 2 pages are back in the pool.
  CHECK(free0 - kv::huge_free() == 4);
  CHECK_FALSE(mapped_at(bufs[0]));
  CHECK(mapped_at(bufs[1]));
  CHECK(mapped_at(bufs[2]));
  hugepool_stats st;
  hugepool_get_stats(&st);
  CHECK(st.cached_buffers == 2);
  CHECK(st.cache_evictions >= 1);

  CHECK(hugepool_trim() == 8 * MiB);
  CHECK(kv::huge_free() == free0);
  CHECK_FALSE(mapped_at(bufs[1]));
  fresh_state();
}

TEST_CASE("the byte cap holds", "[cache]") {
  kv::PoolGuard pool(12);
  fresh_state();
  REQUIRE(hugepool_set_cache_limits(64, 8 * MiB) == 0);
  const long long free0 = kv::huge_available();
  std::vector<char *> bufs;
  for (int i = 0; i < 6; i++) {
    bufs.push_back(static_cast<char *>(hugepool_alloc(4 * MiB)));
    REQUIRE(bufs.back() != nullptr);
    bufs.back()[0] = 1;
  }
  for (auto *b : bufs) hugepool_free(b);
  // At most 8 MB (4 pages) may stay out of the pool.
  const long long total = kv::huge_total();
  CHECK(total - kv::huge_available() <= 4 + (total - free0));
  CHECK(free0 - kv::huge_available() == 4);
  hugepool_stats st;
  hugepool_get_stats(&st);
  CHECK(st.bytes_cached == 8 * MiB);

  // A buffer larger than the cap is never cached.
  char *big = static_cast<char *>(hugepool_alloc(16 * MiB));
  REQUIRE(big != nullptr);
  hugepool_free(big);
  CHECK_FALSE(mapped_at(big));

  // Lowering the cap evicts at once.
  REQUIRE(hugepool_set_cache_limits(64, 4 * MiB) == 0);
  CHECK(free0 - kv::huge_available() == 2);
  REQUIRE(hugepool_set_cache_limits(0, 4 * MiB) == 0);  // 0 slots: no caching at all
  CHECK(kv::huge_available() == free0);
  void *p = hugepool_alloc(2 * MiB);
  hugepool_free(p);
  CHECK(kv::huge_available() == free0);
  CHECK(hugepool_set_cache_limits(size_t{1} << 21, 1) == -1);  // more than HP_CACHE_SLOTS_MAX
  CHECK(errno == EINVAL);
  fresh_state();
}

TEST_CASE("a full pool is freed from the cache before ENOMEM", "[cache]") {
  kv::PoolGuard pool(4);
  fresh_state();
  void *a = hugepool_alloc(8 * MiB);  // all 4 pages
  REQUIRE(a != nullptr);
  hugepool_free(a);  // cached: the pool is empty now
  CHECK(kv::huge_free() - kv::huge_rsvd() == 0);
  void *b = hugepool_alloc(2 * MiB);  // needs the cached pages back
  REQUIRE(b != nullptr);
  CHECK(hugepool_kind_of(b) == HUGEPOOL_KIND_HUGE_2M);
  CHECK_FALSE(mapped_at(a));
  hugepool_free(b);
  hugepool_trim();
}

TEST_CASE("freeing a pointer hugepool does not own is reported and changes nothing", "[cache]") {
  kv::PoolGuard pool(2);
  fresh_state();
  int local = 0;
  StderrCapture err;
  errno = 1234;
  hugepool_free(&local);
  CHECK(errno == 1234);
  std::string text = err.text();
  CHECK(text.find("not a live hugepool buffer") != std::string::npos);
  errno = 77;
  hugepool_free(nullptr);
  CHECK(errno == 77);
  CHECK(hugepool_usable_size(&local) == 0);
  CHECK(hugepool_kind_of(&local) == HUGEPOOL_KIND_NONE);
}

TEST_CASE("a block that would need too many evictions is released, and the cache keeps its blocks", "[cache]") {
  kv::PoolGuard pool(140);
  fresh_state();
  REQUIRE(hugepool_set_cache_limits(128, 140 * MiB) == 0);
  std::vector<char *> small;
  for (int i = 0; i < 70; i++) {
    small.push_back(static_cast<char *>(hugepool_alloc(2 * MiB)));
    REQUIRE(small.back() != nullptr);
  }
  for (auto *p : small) hugepool_free(p);                      // 70 x 2 MB cached = the byte cap
  auto *big = static_cast<char *>(hugepool_alloc(138 * MiB));  // 69 pages: fits beside the cache
  REQUIRE(big != nullptr);
  hugepool_free(big);  // caching it would take 69 evictions in one call
  CHECK_FALSE(mapped_at(big));
  int still = 0;
  for (auto *p : small) still += mapped_at(p);
  CHECK(still == 70);  // nothing was evicted for nothing
  hugepool_trim();
  fresh_state();
}

TEST_CASE("a short pool takes back only as many cached buffers as the request needs", "[cache]") {
  kv::PoolGuard pool(8);
  fresh_state();
  std::vector<char *> cached;
  for (int i = 0; i < 4; i++) {
    cached.push_back(static_cast<char *>(hugepool_alloc(4 * MiB)));
    REQUIRE(cached.back() != nullptr);
  }
  for (auto *p : cached) hugepool_free(p);  // 8 pages cached, none free
  REQUIRE(kv::huge_available() == 0);
  void *p = hugepool_alloc(6 * MiB);  // larger than every cached block: it maps 3 pages
  REQUIRE(p != nullptr);
  int still = 0;
  for (auto *c : cached) still += mapped_at(c);
  CHECK(still == 2);                 // two 4 MB victims were enough
  CHECK(kv::huge_available() == 1);  // their 4 pages went back, the request took 3
  hugepool_free(p);
  hugepool_trim();
}

// Two processes on one pool, neither an MPI rank.  A caches nearly the whole
// pool; B then takes the last free pages, and the pool is low (no free page,
// against the 18 A could give back).  On A's next
// allocator call that maps, A gives its cached pages back, so B's next
// request is served on 2 MB pages.  Checked from the kernel's view
// (meminfo's free pool, B's smaps); before the pressure check A gave back only
// the page it needed and B's request failed.
TEST_CASE("a process gives its cached pages back when the node's free pool runs low", "[cache][pressure]") {
  kv::PoolGuard pool(20);
  fresh_state();
  int to_b[2], to_a[2];
  REQUIRE(pipe(to_b) == 0);
  REQUIRE(pipe(to_a) == 0);
  pid_t b = fork();
  REQUIRE(b >= 0);
  if (b == 0) {  // B: a separate process with its own hugepool state
    char c = 0;
    int rc = 0;
    if (read(to_b[0], &c, 1) != 1) _exit(10);
    void *first = hugepool_alloc(4 * MiB);  // the last two free pages
    if (!first) _exit(11);
    std::memset(first, 1, 4 * MiB);
    if (write(to_a[1], "b", 1) != 1) _exit(12);
    if (read(to_b[0], &c, 1) != 1) _exit(13);
    void *more = hugepool_alloc(16 * MiB);  // needs what A cached
    if (!more)
      rc = 20;
    else {
      std::memset(more, 2, 16 * MiB);
      if (kv::smaps_of(more).field("KernelPageSize") != 2048) rc = 21;
      hugepool_free(more);
    }
    hugepool_free(first);
    hugepool_trim();
    _exit(rc);
  }
  const long long avail0 = kv::huge_available();
  REQUIRE(avail0 == 20);
  std::vector<void *> mine;
  for (int i = 0; i < 9; i++) {  // 18 pages, written, then cached
    void *p = hugepool_alloc(4 * MiB);
    REQUIRE(p != nullptr);
    std::memset(p, 3, 4 * MiB);
    mine.push_back(p);
  }
  for (void *p : mine) hugepool_free(p);
  hugepool_stats st;
  hugepool_get_stats(&st);
  CHECK(st.bytes_cached == 36 * MiB);
  CHECK(kv::huge_available() == 2);
  REQUIRE(write(to_b[1], "g", 1) == 1);  // B takes the last two pages
  char c = 0;
  REQUIRE(read(to_a[0], &c, 1) == 1);
  CHECK(kv::huge_available() == 0);
  usleep(20000);                          // past the rate limit of the pool reads
  void *small = hugepool_alloc(2 * MiB);  // A's next call: a miss, so it maps
  REQUIRE(small != nullptr);
  CHECK(kv::huge_available() == 17);  // 18 cached pages back, one new page mapped
  hugepool_get_stats(&st);
  CHECK(st.bytes_cached == 0);
  REQUIRE(write(to_b[1], "g", 1) == 1);  // B needs 8 pages now
  int status = 0;
  REQUIRE(waitpid(b, &status, 0) == b);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  hugepool_free(small);
  hugepool_trim();
  CHECK(kv::huge_available() == avail0);
  for (int fd : {to_b[0], to_b[1], to_a[0], to_a[1]}) close(fd);
  fresh_state();
}
