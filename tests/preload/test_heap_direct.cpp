// SPDX-License-Identifier: BSD-3-Clause
// The small heap (jemalloc arenas on hugetlb chunks) called directly, without
// the interposer, so that it runs in the ASan and TSan builds too: the same
// 8-thread stress as under the preload, and its pages seen by the kernel.
#include <catch2/catch.hpp>
#include <cstdint>

#include "heap_stress.hpp"
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

bool heap_started() {
  static bool ok = sh_init() == 0;
  return ok;
}

}  // namespace

TEST_CASE("small heap, direct: 8 threads, random sizes 16 B-256 KB, random lifetimes, cross-thread frees", "[heap]") {
  kv::PoolGuard pool(160);
  REQUIRE(heap_started());
  heap_stress::Ops ops{};
  ops.alloc = sh_malloc;
  ops.resize = sh_realloc;
  ops.release = sh_free;
  ops.usable = sh_usable_size;
  ops.owns = sh_owns;
  auto res = heap_stress::run(ops, 8, kRounds);
  CHECK(res.bad == 0);
  CHECK(res.failed == 0);  /* 160 pages: the pool never ran short */
  CHECK(res.aligned == 0); /* never 2 MB aligned */
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
