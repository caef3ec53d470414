// SPDX-License-Identifier: BSD-3-Clause
// realloc under the preload: a hugepool buffer grows by moving page-table
// entries (no copy, no new buffer per step), shrinks by giving pages back;
// a shortage falls back per policy with the data kept.
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "preload_test.hpp"
#include "growth.hpp"

namespace {

constexpr size_t MiB = size_t{1} << 20;

// This process's hugetlb memory per the kernel (HugetlbPages, kB): other
// processes on the machine cannot disturb it, unlike meminfo's counts.
long long process_hugetlb_kb() {
  std::istringstream in(kv::read_file("/proc/self/status"));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("HugetlbPages:", 0) == 0) return std::stoll(line.substr(13));
  return -1;
}

}  // namespace

TEST_CASE("realloc growth in 1 MB steps moves pages instead of copying them", "[default]") {
  kv::PoolGuard pool(40);
  const long long kb0 = process_hugetlb_kb();
  auto *p = static_cast<char *>(malloc(MiB));
  REQUIRE(p);
  size_t size = MiB;
  pl::fill(p, size, 9);
  const long long maps0 = pl::counter("mmap calls");
  for (size_t want = 2 * MiB; want <= 64 * MiB; want += MiB) {
    auto *q = static_cast<char *>(realloc(p, want));
    REQUIRE(q);
    REQUIRE(pl::aligned(q, 2 * MiB));
    pl::fill(q + size, want - size, static_cast<unsigned>(want >> 20));
    p = q;
    size = want;
  }
  CHECK(pl::check(p, MiB, 9));
  for (size_t at = MiB; at < 64 * MiB; at += MiB) CHECK(pl::check(p + at, MiB, static_cast<unsigned>(at >> 20) + 1));
  CHECK(kv::range_view(p, 64 * MiB).hugetlb_kb == 64 * 1024);
  CHECK(process_hugetlb_kb() - kb0 == 32 * 2048);
  // One mmap per added page and no buffer evicted or copied: the issue's
  // symptom was a new buffer (and an eviction) at almost every step.
  CHECK(pl::counter("mmap calls") - maps0 == 31);
  CHECK(pl::counter("realloc: grown without copying") == 31);
  CHECK(pl::counter("realloc: grown by copying") == 0);
  CHECK(pl::counter("cache evictions") == 0);
  CHECK(pl::counter("preload: requests to hugepool") == 1);

  auto *s = static_cast<char *>(realloc(p, 5 * MiB)); /* shrink: pages back now */
  CHECK(s == p);
  CHECK(process_hugetlb_kb() - kb0 == 3 * 2048);
  CHECK(pl::check(s, MiB, 9));
  CHECK(malloc_usable_size(s) == 6 * MiB);
  free(s);
}

// A string appended to a few bytes at a time (awk's `s = s x`, a growing
// line buffer): 7-byte steps from 1000 bytes to 9 MB, 1.3 million reallocs.
// It moves onto hugetlb pages once, at the threshold; after that a step
// within the buffer's pages keeps the pointer and maps nothing, and a page
// is mapped each time it passes 2 MB more.
TEST_CASE("realloc: a string grown 7 bytes at a time past the threshold stays one hugetlb buffer", "[default]") {
  kv::PoolGuard pool(16);
  const long long maps0 = pl::counter("mmap calls");
  const long long grown0 = pl::counter("realloc: grown without copying");
  auto pattern = [](size_t i) { return static_cast<char>((i * 131 + 3) >> 3); };
  size_t size = 1000;
  auto *p = static_cast<char *>(malloc(size));
  REQUIRE(p);
  for (size_t i = 0; i < size; i++) p[i] = pattern(i);
  long long failed = 0, moved_within = 0, moves = 0;
  for (size_t want = size + 7; want <= 9 * MiB; want += 7) {
    auto *q = static_cast<char *>(realloc(p, want));
    if (!q) {
      failed++;
      break;
    }
    if (q != p && size >= MiB) {
      moves++;
      if ((want + 2 * MiB - 1) / (2 * MiB) == (size + 2 * MiB - 1) / (2 * MiB)) moved_within++;
    }
    for (size_t i = size; i < want; i++) q[i] = pattern(i);
    p = q;
    size = want;
  }
  CHECK(failed == 0);
  CHECK(moved_within == 0);
  CHECK(moves <= 1);  // the first growth of a buffer without headroom may move it, then never
  bool intact = true;
  for (size_t i = 0; i < size; i++) intact &= p[i] == pattern(i);
  CHECK(intact);
  CHECK(pl::aligned(p, 2 * MiB));
  CHECK(kv::range_view(p, 10 * MiB).hugetlb_kb == 10 * 1024);
  CHECK(pl::counter("realloc: grown without copying") - grown0 == 4);  // 2 -> 4, 6, 8, 10 MB
  CHECK(pl::counter("mmap calls") - maps0 == 5);                       // and the first 2 MB
  CHECK(pl::counter("preload: requests to hugepool") == 1);
  CHECK(malloc_usable_size(p) == 10 * MiB);
  free(p);
}

TEST_CASE("realloc growth with the pool exactly full, then short: glibc takes over with the data", "[default]") {
  kv::PoolGuard pool(6);
  auto *p = static_cast<char *>(malloc(4 * MiB));
  REQUIRE(p);
  pl::fill(p, 4 * MiB, 4);
  auto *q = static_cast<char *>(realloc(p, 12 * MiB)); /* needs exactly the 4 pages left */
  REQUIRE(q);
  CHECK(pl::check(q, 4 * MiB, 4));
  memset(q + 4 * MiB, 1, 8 * MiB);
  CHECK(kv::range_view(q, 12 * MiB).hugetlb_kb == 12 * 1024);
  CHECK(kv::huge_free() == 0);
  auto *r = static_cast<char *>(realloc(q, 20 * MiB)); /* the pool has no page left */
  REQUIRE(r);
  CHECK(pl::check(r, 4 * MiB, 4));
  CHECK(pl::page_kb(r) == 4);
  CHECK(pl::counter("preload: fallbacks to glibc") == 1);
  auto trim = reinterpret_cast<size_t (*)()>(dlsym(RTLD_DEFAULT, "hugepool_trim"));
  REQUIRE(trim);
  CHECK(trim() == 12 * MiB);                           /* the old hugetlb buffer went to the cache, */
  CHECK(kv::huge_free() == 6);                         /* and from there back to the pool */
  auto *g = static_cast<char *>(realloc(r, 40 * MiB)); /* glibc's own now: stays there */
  REQUIRE(g);
  CHECK(pl::check(g, 4 * MiB, 4));
  free(g);
}

TEST_CASE("realloc of a glibc block past the threshold with the pool empty stays with glibc", "[default]") {
  kv::PoolGuard pool(0);
  auto *p = static_cast<char *>(malloc(100000));
  REQUIRE(p);
  pl::fill(p, 100000, 6);
  auto *q = static_cast<char *>(realloc(p, 8 * MiB));
  REQUIRE(q);
  CHECK(pl::check(q, 100000, 6));
  CHECK(pl::page_kb(q) == 4);
  CHECK(pl::counter("preload: fallbacks to glibc") == 1);
  free(q);
}

TEST_CASE("strict: a growth the pool cannot cover fails with ENOMEM and the buffer intact", "[strict]") {
  kv::PoolGuard pool(4);
  auto *p = static_cast<char *>(malloc(6 * MiB));
  REQUIRE(p);
  pl::fill(p, 6 * MiB, 8);
  auto *q = static_cast<char *>(realloc(p, 8 * MiB)); /* the last page */
  REQUIRE(q);
  errno = 0;
  CHECK(realloc(q, 10 * MiB) == nullptr);
  CHECK(errno == ENOMEM);
  CHECK(pl::check(q, 6 * MiB, 8));
  CHECK(malloc_usable_size(q) == 8 * MiB);
  CHECK(pl::counter("preload: large requests refused") == 1);
  free(q);
}

// Growth to 1 GB through the interposed realloc, in the patterns of
// tests/growth.hpp; before the fix of os_move a buffer made of more than 64
// mappings moved from the wrong address and the process aborted at about
// 200 MB.  The pool covers each test's buffers, so every growth maps pages
// and every move moves them; afterwards nothing is left on hugetlb pages.
namespace {

const growth::Api kLibc{[](size_t n) { return malloc(n); }, [](void *p, size_t n) { return realloc(p, n); },
                        [](void *p) { free(p); }};
constexpr size_t kGiB = size_t{1} << 30;
constexpr long long kPagesPerGiB = kGiB / (2 * MiB);

void check_all_given_back(long long kb0) {
  auto trim = reinterpret_cast<size_t (*)()>(dlsym(RTLD_DEFAULT, "hugepool_trim"));
  REQUIRE(trim);
  trim();
  CHECK(process_hugetlb_kb() == kb0);
  CHECK(pl::counter("preload: fallbacks to glibc") == 0);
}

}  // namespace

TEST_CASE("realloc to 1 GB in 1 MB steps under the preload", "[default][large]") {
  kv::PoolGuard pool(kPagesPerGiB + 40);
  const long long kb0 = process_hugetlb_kb();
  growth::steps(kLibc, kGiB, MiB);
  check_all_given_back(kb0);
}

TEST_CASE("realloc to 1 GB by doubling under the preload", "[default][large]") {
  kv::PoolGuard pool(kPagesPerGiB + 40);
  const long long kb0 = process_hugetlb_kb();
  growth::doubling(kLibc, kGiB);
  check_all_given_back(kb0);
}

TEST_CASE("realloc of two buffers in turn to 1 GB with allocations between under the preload", "[default][large]") {
  kv::PoolGuard pool(2 * kPagesPerGiB + 80);
  const long long kb0 = process_hugetlb_kb();
  growth::interleaved(kLibc, kGiB);
  check_all_given_back(kb0);
}

TEST_CASE("realloc to 1 GB, shrink 8 MB at a time, grow again under the preload", "[default][large]") {
  kv::PoolGuard pool(kPagesPerGiB + 40);
  const long long kb0 = process_hugetlb_kb();
  growth::shrink_regrow(kLibc, kGiB);
  check_all_given_back(kb0);
}

TEST_CASE("realloc of three buffers to 1 GB in three threads under the preload", "[default][large][threads]") {
  kv::PoolGuard pool(3 * kPagesPerGiB + 40);
  const long long kb0 = process_hugetlb_kb();
  growth::threads(kLibc, kGiB);
  check_all_given_back(kb0);
}
