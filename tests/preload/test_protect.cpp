// SPDX-License-Identifier: BSD-3-Clause
// mprotect and madvise at 4 KB granularity on malloc'd memory: what glibc
// gives a program, the preload gives too.  Judged by the kernel: smaps (the
// page cut becomes 4 KB, the rest stays hugetlb), a forked child that dies
// on the guard page, bytes read back, and the pool's free pages (meminfo).
// The same checks run plain ([plain]): they state glibc's behaviour.
#include <signal.h>
#include <sys/mman.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <vector>

#include "preload_test.hpp"

static constexpr size_t MiB = size_t(1) << 20;
static constexpr size_t KiB4 = 4096;

namespace {
// A malloc'd buffer with a 16 MB page-aligned region in it (glibc's blocks
// start 16 bytes into their mapping; hugepool's on a 2 MB boundary).
struct region {
  void *raw;
  unsigned char *base;
  static constexpr size_t size = 16 * MiB;
  explicit region(unsigned seed) {
    raw = malloc(size + KiB4);
    REQUIRE(raw);
    base = reinterpret_cast<unsigned char *>((reinterpret_cast<uintptr_t>(raw) + KiB4 - 1) & ~(KiB4 - 1));
    pl::fill(base, size, seed);
  }
  ~region() { free(raw); }
};

long long split_counter() { return pl::preloaded() ? pl::counter("preload: 2 MB pages split to 4 KB") : 0; }

void trim() {
  using fn = size_t (*)();
  if (auto f = reinterpret_cast<fn>(dlsym(RTLD_DEFAULT, "hugepool_trim"))) f();
}

// A forked child reading `at`: its wait status.
int child_reads(const unsigned char *at) {
  return pl::in_child([at] {
    signal(SIGSEGV, SIG_DFL); /* the test framework's handler would report it */
    volatile unsigned char v = *at;
    (void)v;
    return 0;
  });
}

// The 2 MB pages a range cuts: the first if it starts inside one, the last
// if it ends inside one (the same page counts once).
long long pages_cut_by(size_t off, size_t len) {
  const size_t m = 2 * MiB - 1;
  size_t end = off + len;
  bool head = (off & m) != 0, tail = (end & m) != 0;
  if (head && tail && (off >> 21) == ((end - 1) >> 21)) return 1;
  return head + tail;
}

struct cut {
  const char *what;
  size_t off, len;
};
// first page, middle, last 4 KB, across a 2 MB boundary, a 2 MB boundary itself
const cut kCuts[] = {{"first page", 0, KiB4},
                     {"middle", 5 * MiB + 3 * KiB4, KiB4},
                     {"last 4 KB", region::size - KiB4, KiB4},
                     {"across 4 MB", 4 * MiB - 2 * KiB4, 4 * KiB4},
                     {"at 8 MB", 8 * MiB, KiB4}};
}  // namespace

TEST_CASE("mprotect(PROT_NONE) of 4 KB inside a large malloc'd buffer makes a guard page, as under glibc",
          "[default][plain]") {
  kv::PoolGuard pool(24);
  long long split_before = split_counter();
  for (const cut &c : kCuts) {
    INFO(c.what);
    region r(7);
    unsigned char *at = r.base + c.off;
    long long held = kv::self_hugetlb_kb();
    REQUIRE(mprotect(at, c.len, PROT_NONE) == 0);
    CHECK(pl::page_kb(at) == 4);
    CHECK(pl::page_kb(at + c.len - 1) == 4);
    int st = child_reads(at);
    CHECK(WIFSIGNALED(st));
    CHECK((WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV));
    st = child_reads(at + c.len - 1);
    CHECK((WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV));
    if (c.off > 0) CHECK(child_reads(at - 1) == 0);
    if (c.off + c.len < region::size) CHECK(child_reads(at + c.len) == 0);
    if (pl::preloaded()) {
      /* the pages cut moved to 4 KB and went back to the pool; 12 MB away is still hugetlb */
      long long pages_cut = pages_cut_by(c.off, c.len);
      /* (the small heap's own chunks come and go meanwhile: not counted there) */
      if (!getenv("HUGEPOOL_SMALL_HEAP")) CHECK(held - kv::self_hugetlb_kb() == pages_cut * 2048);
      CHECK(pl::on_hugetlb(r.base + ((c.off + 12 * MiB) % region::size & ~(2 * MiB - 1))));
    }
    REQUIRE(mprotect(at, c.len, PROT_READ | PROT_WRITE) == 0);
    CHECK(pl::check(r.base, region::size, 7));
    at[0] = 1; /* writable again */
  }
  if (pl::preloaded()) CHECK(split_counter() - split_before >= 4);
}

TEST_CASE("mprotect(PROT_READ) of 4 KB keeps the bytes and refuses writes, the rest stays writable",
          "[default][plain]") {
  kv::PoolGuard pool(16);
  region r(9);
  unsigned char *at = r.base + 6 * MiB + 5 * KiB4;
  REQUIRE(mprotect(at, KiB4, PROT_READ) == 0);
  CHECK(pl::check(r.base, region::size, 9));
  int st = pl::in_child([at] {
    signal(SIGSEGV, SIG_DFL);
    at[10] = 0;
    return 0;
  });
  CHECK((WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV));
  st = pl::in_child([at] {
    at[KiB4] = 0; /* the next page */
    at[-1] = 0;
    return 0;
  });
  CHECK(st == 0);
  REQUIRE(mprotect(at, KiB4, PROT_READ | PROT_WRITE) == 0);
}

TEST_CASE("madvise(MADV_DONTNEED) of 4 KB inside a large malloc'd buffer reads back zero, as under glibc",
          "[default][plain]") {
  kv::PoolGuard pool(16);
  for (const cut &c : kCuts) {
    INFO(c.what);
    region r(11);
    unsigned char *at = r.base + c.off;
    REQUIRE(madvise(at, c.len, MADV_DONTNEED) == 0);
    bool zero = true;
    for (size_t i = 0; i < c.len; i++) zero &= at[i] == 0;
    CHECK(zero);
    /* every other byte is intact */
    CHECK(pl::check(r.base, c.off, 11));
    bool rest = true;
    for (size_t i = c.off + c.len; i < region::size; i++)
      rest &= r.base[i] == static_cast<unsigned char>((i * 131 + 11) >> 3);
    CHECK(rest);
    CHECK(pl::page_kb(at) == 4);
  }
}

TEST_CASE("madvise: a whole 2 MB page reads back zero and stays hugetlb, MADV_FREE and hints answer 0",
          "[default][plain]") {
  kv::PoolGuard pool(16);
  region r(13);
  unsigned char *at = r.base + 6 * MiB;
  if (pl::preloaded()) REQUIRE(pl::aligned(at, 2 * MiB));
  REQUIRE(madvise(at, 2 * MiB, MADV_DONTNEED) == 0);
  bool zero = true;
  for (size_t i = 0; i < 2 * MiB; i++) zero &= at[i] == 0;
  CHECK(zero);
  memset(at, 5, 2 * MiB); /* its reservation stayed: no SIGBUS */
  if (pl::preloaded()) CHECK(pl::on_hugetlb(at));
  CHECK(madvise(r.base + 3 * KiB4, 8 * KiB4, MADV_FREE) == 0);
  CHECK(madvise(r.base + 3 * KiB4, 8 * KiB4, MADV_NOHUGEPAGE) == 0);
  CHECK(madvise(r.base + 3 * KiB4, 8 * KiB4, MADV_RANDOM) == 0);
  CHECK(madvise(r.base + 3 * KiB4, 8 * KiB4, MADV_WILLNEED) == 0);
  CHECK(pl::check(r.base, 6 * MiB, 13) == true); /* MADV_FREE may drop them only under memory pressure */
  errno = 0;
  CHECK(madvise(r.base + 1, KiB4, MADV_DONTNEED) == -1); /* not page aligned: EINVAL everywhere */
  CHECK(errno == EINVAL);
}

TEST_CASE("a buffer with a split page: realloc keeps every byte, free and trim give every pool page back",
          "[default][plain]") {
  kv::PoolGuard pool(40);
  trim();
  /* the kernel's count for this process (the pool is shared); the small heap
   * may give chunks back meanwhile, so it can only fall */
  long long held0 = kv::self_hugetlb_kb();
  size_t n = 10 * MiB;
  auto *p = static_cast<unsigned char *>(malloc(n));
  REQUIRE(p);
  pl::fill(p, n, 17);
  unsigned char *page = reinterpret_cast<unsigned char *>((reinterpret_cast<uintptr_t>(p) + 3 * MiB) & ~(KiB4 - 1));
  REQUIRE(mprotect(page, KiB4, PROT_READ) == 0); /* splits that 2 MB page */
  REQUIRE(mprotect(page, KiB4, PROT_READ | PROT_WRITE) == 0);
  CHECK(pl::page_kb(page) == 4);
  p = static_cast<unsigned char *>(realloc(p, 40 * MiB)); /* grows: moves pages, or maps more after them */
  REQUIRE(p);
  CHECK(pl::check(p, n, 17));
  pl::fill(p, 40 * MiB, 18);
  p = static_cast<unsigned char *>(realloc(p, 5 * MiB)); /* shrinks */
  REQUIRE(p);
  CHECK(pl::check(p, 5 * MiB, 18));
  p = static_cast<unsigned char *>(realloc(p, 24 * MiB));
  REQUIRE(p);
  CHECK(pl::check(p, 5 * MiB, 18));
  volatile uintptr_t where = reinterpret_cast<uintptr_t>(p); /* an address to look at, not to use */
  free(p);
  trim();
  CHECK(kv::self_hugetlb_kb() <= held0);
  if (pl::preloaded()) /* unmapped, not cached */
    CHECK(kv::range_view(reinterpret_cast<const void *>(where), 24 * MiB).mapped == 0);
  /* the next buffer of that size is all hugetlb: the split block was not cached */
  auto *q = static_cast<unsigned char *>(malloc(n));
  REQUIRE(q);
  memset(q, 1, n);
  if (pl::preloaded()) {
    auto v = kv::range_view(q, n);
    CHECK(v.hugetlb_kb == static_cast<long long>(n >> 10));
  }
  free(q);
  trim();
  CHECK(kv::self_hugetlb_kb() <= held0);
}

TEST_CASE("a guard page in a small-heap object (valloc'd) works as under glibc", "[smallheap][plain]") {
  kv::PoolGuard pool(16);
  pl::small_heap_sees_pool();
  std::vector<unsigned char *> objs;
  for (int i = 0; i < 4; i++) {
    void *p = nullptr;
    REQUIRE(posix_memalign(&p, KiB4, 64 * 1024) == 0);
    pl::fill(p, 64 * 1024, unsigned(i));
    objs.push_back(static_cast<unsigned char *>(p));
  }
  unsigned char *guard = objs[1] + 8 * KiB4;
  REQUIRE(mprotect(guard, KiB4, PROT_NONE) == 0);
  int st = child_reads(guard);
  CHECK((WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV));
  CHECK(child_reads(guard - 1) == 0);
  for (int i = 0; i < 4; i++)
    if (i != 1) CHECK(pl::check(objs[size_t(i)], 64 * 1024, unsigned(i)));
  REQUIRE(mprotect(guard, KiB4, PROT_READ | PROT_WRITE) == 0);
  CHECK(pl::check(objs[1], 64 * 1024, 1));
  for (auto *p : objs) free(p);
}
