// SPDX-License-Identifier: BSD-3-Clause
// Growth by realloc: one buffer grown from 1 MB to --to in --step steps,
// each step writing the bytes it added (what a program appending data does),
// then freed.  Time per growth run; the first run is a warm-up.
//
//   --api malloc    realloc/free: run it plain, with GLIBC_TUNABLES=
//                   glibc.malloc.hugetlb=2, with jemalloc / mimalloc / the
//                   hugepool preload (LD_PRELOAD), --peer names the row
//   --api hugepool  hugepool_realloc/hugepool_free (-ext binary)
//   --api ghp       libhugetlbfs get_huge_pages: it has no realloc, so a
//                   grow is get_huge_pages + memcpy + free_huge_pages (-ext)
//   --to 64M,512M,2G  --step 1M  --reps 5  --prewarm 1 (touch the free pool first)
//   --budget 30: if the warm-up run takes longer (seconds), it is the only
//                run; else as many runs as fit in 3 x budget (at most --reps)
//
// Each row: the median/min/max time of a whole growth run, and the kernel's
// count of hugetlb memory (smaps) behind the buffer at its largest.
#include "bench_util.hpp"

#ifdef HUGEPOOL_BENCH_HAVE_HUGETLBFS
extern "C" {  // the header has no C++ guard
#include <hugetlbfs.h>
}
#endif

namespace hb {
namespace {

enum class Api { malloc_free, hugepool, ghp };
Api g_api = Api::malloc_free;
std::string g_peer;

void *grow(void *p, size_t old_size, size_t size) {
  switch (g_api) {
    case Api::malloc_free: return std::realloc(p, size);
    case Api::hugepool:
#ifdef HUGEPOOL_BENCH_HAVE_LIB
      return p ? hugepool_realloc(p, size) : hugepool_alloc(size);
#else
      return nullptr;
#endif
    case Api::ghp: {
#ifdef HUGEPOOL_BENCH_HAVE_HUGETLBFS
      void *q = get_huge_pages(round_up(size, kHuge2M), GHP_DEFAULT);
      if (q && p) {
        std::memcpy(q, p, old_size);
        free_huge_pages(p);
      }
      return q;
#else
      (void)old_size;
      return nullptr;
#endif
    }
  }
  return nullptr;
}

void release(void *p) {
  switch (g_api) {
    case Api::malloc_free: std::free(p); return;
    case Api::hugepool:
#ifdef HUGEPOOL_BENCH_HAVE_LIB
      hugepool_free(p);
#endif
      return;
    case Api::ghp:
#ifdef HUGEPOOL_BENCH_HAVE_HUGETLBFS
      free_huge_pages(p);
#endif
      return;
  }
}

// The kernel's hugetlb kB behind [p, p + n), over every mapping there
// (from /proc/self/smaps: the buffer alone, not what a cache holds).
long hugetlb_kb(const void *p, size_t n) {
  const auto lo = reinterpret_cast<uintptr_t>(p), hi = lo + n;
  std::ifstream in("/proc/self/smaps");
  std::string line;
  long kb = 0, v = 0;
  bool inside = false;
  while (std::getline(in, line)) {
    unsigned long s = 0, e = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &s, &e) == 2 && line.find(':') > line.find(' ')) {
      inside = e > lo && s < hi;
      continue;
    }
    if (inside && (std::sscanf(line.c_str(), "Private_Hugetlb: %ld", &v) == 1 ||
                   std::sscanf(line.c_str(), "Shared_Hugetlb: %ld", &v) == 1))
      kb += v;
  }
  return kb;
}

// Touches every free pool page once, so that no peer pays this VM's host
// faults on pages first touched during its timed runs (the guest gives idle
// memory back to its host; a long-running job's pool is warm).
void prewarm_pool() {
  const long pages = pool_available(2048);
  if (pages <= 0) return;
  const size_t len = static_cast<size_t>(pages) * kHuge2M;
  void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_HUGE_2MB, -1, 0);
  if (p == MAP_FAILED) return;
  std::memset(p, 0, len);
  munmap(p, len);
}

// One growth run; returns its time in ns, or -1 if an allocation failed.
// *huge_kb: the kernel's hugetlb kB behind the buffer at its largest.
double run_once(size_t to, size_t step, long *huge_kb) {
  const uint64_t t0 = now_ns();
  char *p = nullptr;
  size_t size = 0;
  for (size_t want = std::min(step, to); want <= to; want += step) {
    auto *q = static_cast<char *>(grow(p, size, want));
    if (!q) {
      if (p) release(p);
      return -1;
    }
    std::memset(q + size, static_cast<int>(want >> 20), want - size);
    p = q;
    size = want;
  }
  const uint64_t t1 = now_ns();
  *huge_kb = hugetlb_kb(p, size);
  // Every step's bytes are still there (outside the timed part).
  for (size_t at = 0; at + step <= size; at += step)
    if (p[at] != static_cast<char>((at + step) >> 20)) die("data lost at " + std::to_string(at));
  release(p);
  return static_cast<double>(t1 - t0);
}

}  // namespace
}  // namespace hb

int main(int argc, char **argv) {
  using namespace hb;
  Args a(argc, argv, 1);
  const std::string api = a.get("api", "malloc");
  if (api == "malloc") g_api = Api::malloc_free;
  else if (api == "hugepool") g_api = Api::hugepool;
  else if (api == "ghp") g_api = Api::ghp;
  else die("unknown --api " + api);
  g_peer = a.get("peer", api);
#ifndef HUGEPOOL_BENCH_HAVE_HUGETLBFS
  if (g_api == Api::ghp) {
    skip("realloc", g_peer, "built without libhugetlbfs");
    return 0;
  }
#endif
#ifndef HUGEPOOL_BENCH_HAVE_LIB
  if (g_api == Api::hugepool) {
    skip("realloc", g_peer, "built without the hugepool library");
    return 0;
  }
#endif
  const size_t step = parse_size(a.get("step", "1M"));
  if (a.num("prewarm", 1)) prewarm_pool();
  const long reps = a.num("reps", 5);
  const double budget_s = static_cast<double>(a.num("budget", 30));
  for (size_t to : parse_sizes(a.get("to", "64M,512M"))) {
    std::vector<double> t;
    long huge_kb = -1;
    bool failed = false;
    bool over = false;
    long runs = reps + 1;
    for (long r = 0; r < runs && !failed; ++r) {  // run 0 is a warm-up
      double ns = run_once(to, step, &huge_kb);
      failed = ns < 0;
      if (failed) break;
      if (r) t.push_back(ns);
      if (r == 0) {
        // Too slow to repeat within the budget: that one run is the row;
        // else as many runs as fit in 3 budgets (the pool lock stays short).
        over = ns > budget_s * 1e9;
        if (over) {
          t.push_back(ns);
          break;
        }
        runs = 1 + std::max(1L, std::min(reps, static_cast<long>(3 * budget_s * 1e9 / ns)));
      }
    }
    if (failed) {
      skip("realloc", g_peer + " to " + size_name(to), "an allocation failed");
      continue;
    }
    Json()
        .str("bench", "realloc")
        .str("peer", g_peer)
        .integer("size", static_cast<long long>(to))
        .integer("step", static_cast<long long>(step))
        .integer("hugetlb_kb", huge_kb)
        .integer("over_budget", over ? 1 : 0)
        .stats("grow_ns", "ns", summarise(t))
        .emit();
  }
  return 0;
}
