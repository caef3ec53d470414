// SPDX-License-Identifier: BSD-3-Clause
// The small heap (jemalloc arenas on hugetlb chunks) called directly, without
// the interposer, so that it runs in the ASan and TSan builds too: the same
// 8-thread stress as under the preload, and its pages seen by the kernel.
#include <catch2/catch.hpp>
#include <cstdint>

#include "heap_stress.hpp"
#include "kernel_view.hpp"

#include "small-heap-bridge.h"

extern "C" {
// The two sides of preload/small-heap-bridge.h, linked here without the
// interposer: the core's calls (small-heap-core.c) and the heap's entry.
const hp_small_heap_core *hpl_small_heap_core(void);
const hp_small_heap_ops *hugepool_small_heap_entry(const hp_small_heap_core *core);
}

namespace {

#if defined(__SANITIZE_THREAD__)
constexpr int kRounds = 3000; /* TSan: every byte checked is instrumented */
#else
constexpr int kRounds = 12000;
#endif

const hp_small_heap_ops *heap() {
  static const hp_small_heap_ops *ops = hugepool_small_heap_entry(hpl_small_heap_core());
  return ops;
}

bool heap_started() {
  static bool ok = heap() && heap()->init() == 0;
  return ok;
}

// heap_stress::Ops takes plain functions.
void *sh_malloc(size_t size, bool zero) { return heap()->malloc(size, zero); }
void *sh_realloc(void *ptr, size_t size) { return heap()->realloc(ptr, size); }
void sh_free(void *ptr) { heap()->free(ptr); }
size_t sh_usable_size(const void *ptr) { return heap()->usable_size(ptr); }
bool sh_owns(const void *ptr) { return heap()->owns(ptr); }

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
  hp_small_heap_counters c{};
  heap()->stats(&c);
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
