// SPDX-License-Identifier: BSD-3-Clause
// hugepool_realloc() at the sizes programs reach: buffers grown to 1 GB in
// the usual patterns (tests/growth.hpp), and a move of a buffer made of many
// mappings failing at each of its steps (the OS layer's fault injection):
// the buffer always ends up whole at one address, realloc returns the grown
// buffer or NULL with the old one intact, and no page or mapping is leaked.
#include <sys/mman.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>

#include "core_test.hpp"
#include "growth.hpp"
#include "os.h"

using namespace test;

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

// 1 GB; the patterns other than 1 MB steps use 256 MB in sanitizer builds
// (the same code paths, a quarter of the time).
constexpr size_t kGiB = size_t{1} << 30;
constexpr size_t kTop = kSanitized ? kGiB / 4 : kGiB;

const growth::Api kApi{hugepool_alloc, hugepool_realloc, hugepool_free};

size_t maps_lines() {
  const std::string maps = kv::read_file("/proc/self/maps");
  size_t n = 0;
  for (char c : maps) n += c == '\n';
  return n;
}

// After the buffers are freed and the cache trimmed: no hugetlb page or
// mapping is left in this process.
void check_nothing_left() {
  hugepool_trim();
  CHECK(kv::self_hugetlb_kb() == 0);
  CHECK(kv::read_file("/proc/self/maps").find("anon_hugepage") == std::string::npos);
}

}  // namespace

TEST_CASE("realloc to 1 GB in 1 MB steps", "[realloc][large]") {
  kv::PoolGuard pool(kGiB / (2 * MiB) + 40);
  fresh_state();
  growth::steps(kApi, kGiB, MiB);
  check_nothing_left();
}

TEST_CASE("realloc to 1 GB by doubling", "[realloc][large]") {
  kv::PoolGuard pool(kTop / (2 * MiB) + 40);
  fresh_state();
  growth::doubling(kApi, kTop);
  check_nothing_left();
}

TEST_CASE("realloc of two buffers in turn to 1 GB with allocations between the steps", "[realloc][large]") {
  kv::PoolGuard pool(2 * kTop / (2 * MiB) + kTop / (32 * MiB) + 40);
  fresh_state();
  growth::interleaved(kApi, kTop);
  check_nothing_left();
}

TEST_CASE("realloc to 1 GB, shrinking 8 MB at a time to a quarter, and growing again", "[realloc][large]") {
  kv::PoolGuard pool(kTop / (2 * MiB) + 40);
  fresh_state();
  growth::shrink_regrow(kApi, kTop);
  check_nothing_left();
}

TEST_CASE("realloc of three buffers to 1 GB in three threads at once", "[realloc][large][threads]") {
  kv::PoolGuard pool(3 * kTop / (2 * MiB) + 40);
  fresh_state();
  growth::threads(kApi, kTop);
  check_nothing_left();
}

namespace {

// A buffer of 70 MB made of 34 mappings (4 MB, then 2 MB at a time) with no
// headroom left: its next growth moves it, one mremap per mapping.
struct ManyMappings {
  char *p = nullptr;
  size_t size = 0;
  ManyMappings() {
    p = static_cast<char *>(hugepool_alloc(4 * MiB));
    REQUIRE(p != nullptr);
    growth::fill(p, 0, 4 * MiB, 77);
    size = 4 * MiB;
    for (size_t want = 6 * MiB; want <= 70 * MiB; want += 2 * MiB) {
      auto *q = static_cast<char *>(hugepool_realloc(p, want));
      REQUIRE(q != nullptr);
      growth::fill(q, size, want, 77);
      p = q;
      size = want;
    }
    REQUIRE(kv::range_view(p, size).mappings == 34);
  }
  bool intact() const { return growth::first_bad(p, 0, size, 77) == size; }
};

// The kernel's view of a buffer: all of [p, p + size) on hugetlb pages.
void check_whole(const char *p, size_t size) {
  const kv::RangeView v = kv::range_view(p, size);
  CHECK(v.mapped == size);
  CHECK(v.all_2m);
  CHECK(v.hugetlb_kb == static_cast<long long>(size >> 10));
}

// The calls a move of ManyMappings makes, counted with no fault.
long calls_of_a_move(unsigned ops) {
  ManyMappings b;
  os_inject_faults(ops, 0, 0, 0);
  void *q = hugepool_realloc(b.p, 72 * MiB);
  const long n = os_inject_seen();
  os_inject_faults(0, 0, 0, 0);
  REQUIRE(q != nullptr);
  REQUIRE(q != b.p);
  hugepool_free(q);
  return n;
}

enum class Outcome { kFailed, kGrown };

// Builds the buffer, makes the calls `mask` picks (from call `first` on) fail
// while it grows to 72 MB, and checks the outcome, the bytes, the kernel's
// view, and that freeing leaves no page, mapping or address range behind.
void grow_with_faults(unsigned ops, long first, uint64_t mask, int err, Outcome want) {
  hugepool_trim();
  const long long avail0 = kv::huge_available();
  const size_t lines0 = maps_lines();
  {
    ManyMappings b;
    const hugepool_stats st0 = [] {
      hugepool_stats s;
      hugepool_get_stats(&s);
      return s;
    }();
    os_inject_faults(ops, first, mask, err);
    errno = 0;
    auto *q = static_cast<char *>(hugepool_realloc(b.p, 72 * MiB));
    const int got_errno = errno;
    os_inject_faults(0, 0, 0, 0);
    if (want == Outcome::kFailed) {
      CHECK(q == nullptr);
      CHECK(got_errno == err);
      CHECK(hugepool_owns(b.p));
      CHECK(hugepool_usable_size(b.p) == 70 * MiB);
      CHECK(b.intact());
      check_whole(b.p, 70 * MiB);
      hugepool_stats st;
      hugepool_get_stats(&st);
      CHECK(st.bytes_live == st0.bytes_live);
      // The buffer still grows afterwards.
      q = static_cast<char *>(hugepool_realloc(b.p, 72 * MiB));
      REQUIRE(q != nullptr);
    } else {
      REQUIRE(q != nullptr);
      CHECK(q != b.p);
      CHECK(kv::range_view(b.p, 70 * MiB).mapped == 0);  // nothing left where it was
    }
    CHECK(growth::first_bad(q, 0, 70 * MiB, 77) == 70 * MiB);
    growth::fill(q, 70 * MiB, 72 * MiB, 77);
    check_whole(q, 72 * MiB);
    hugepool_free(q);
  }
  hugepool_trim();
  CHECK(kv::self_hugetlb_kb() == 0);
  // meminfo: no page kept by a stray mapping (other processes may give pages
  // back meanwhile, never take ours: a leak shows as fewer).
  CHECK(kv::huge_available() >= avail0);
  // No reservation or placeholder left (not checked under the sanitizers:
  // their runtimes map memory of their own at any time).
  if (!kSanitized) CHECK(maps_lines() == lines0);
}

}  // namespace

TEST_CASE("a move that the kernel refuses part way leaves the buffer whole", "[realloc][faults]") {
  kv::PoolGuard pool(120);
  fresh_state();
  hugepool_free(hugepool_alloc(2 * MiB));  // the library's tables exist before the first count
  hugepool_trim();
  const long n = calls_of_a_move(HP_OS_FAULT_MREMAP);
  REQUIRE(n == 35);  // the added pages, then the 34 mappings one by one
  constexpr unsigned kRemap = HP_OS_FAULT_MREMAP, kBoth = HP_OS_FAULT_MREMAP | HP_OS_FAULT_MMAP;

  SECTION("the added pages cannot move into the new range") {
    grow_with_faults(kRemap, 1, 1, ENOMEM, Outcome::kFailed);
  }
  SECTION("the first mapping cannot move: nothing has moved") {
    grow_with_faults(kRemap, 2, 1, ENOMEM, Outcome::kFailed);
  }
  SECTION("a mapping in the middle cannot move: the first half moves back") {
    grow_with_faults(kRemap, n / 2, 1, ENOMEM, Outcome::kFailed);
  }
  SECTION("the last mapping cannot move: all the others move back") {
    grow_with_faults(kRemap, n, 1, EFAULT, Outcome::kFailed);
  }
  SECTION("the way back fails too: the move goes forward again and completes") {
    grow_with_faults(kRemap, n / 2, 0x3, ENOMEM, Outcome::kGrown);
  }
  SECTION("no mapping moves either way any more: the pieces moved so far are copied back") {
    grow_with_faults(kRemap, n / 2, ~uint64_t{0}, ENOMEM, Outcome::kFailed);
  }
  SECTION("the range a piece left cannot be kept: the move only goes forward") {
    // Both kinds counted: 1 = the added pages, then mremap, slot for each
    // mapping.  Call 5 keeps the slot of the second mapping (fails), call 6
    // moves the third (fails): no way back, so forward again.
    grow_with_faults(kBoth, 5, 0x3, ENOMEM, Outcome::kGrown);
  }
  SECTION("the slot a piece moving back leaves cannot be kept: the move goes back to the end") {
    const long at = 2 + 2 * 10;  // the mremap of the 11th mapping, then its way back
    grow_with_faults(kBoth, at, 0x5, ENOMEM, Outcome::kFailed);
  }
  SECTION("the kernel refuses every move, map and copy for a while: the move waits and finishes") {
    // Six calls a round (back, forward, two maps each way to copy), then a
    // wait; 37 calls = the failing move and six rounds: the seventh goes back.
    grow_with_faults(kBoth, 2 + 2 * 15, (uint64_t{1} << 37) - 1, ENOMEM, Outcome::kFailed);
  }
}
