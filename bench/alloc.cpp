// SPDX-License-Identifier: BSD-3-Clause
// Allocator comparison for communication buffers.
//
//   --api malloc    malloc/free; run it plain, with GLIBC_TUNABLES=
//                   glibc.malloc.hugetlb=2, or with jemalloc / mimalloc
//                   preloaded (--peer names the row)
//   --api reuse     one buffer allocated once and never freed: the baseline a
//                   hand-written cache can at best reach
//   --api ghp       libhugetlbfs get_huge_pages/free_huge_pages (-ext binary)
//   --api hugepool  hugepool_alloc/hugepool_free (-ext binary)
//
// Tests: "cached" = alloc+free of the same size in a loop (no touch), per op;
//        "memset" = alloc + memset of the whole buffer + free, per iteration;
//        "mixed"  = an application-like step: several comm buffers of mixed
//                   sizes alive at once and fully written, small mallocs in
//                   between, freed in another order; time per step.
//        "threads" = "cached" from 1, 2 and --threads-max threads at once,
//                   each with its own buffer; wall time per pair per thread
//                   (equal to the 1-thread row when nothing is shared);
//        "depth"  = "cached" of a 4 MB buffer while N other freed 2 MB
//                   buffers are cached (--depths), per pair.
#include <atomic>
#include <random>
#include <thread>

#include "bench_util.hpp"

namespace hb {

namespace {

// The allocator under test (buf_alloc's kind) and whether the buffer is kept
// for the whole run (--api reuse).
Page g_api = Page::heap;
bool g_reuse = false;
std::string g_peer;

inline void escape(void *p) { asm volatile("" : : "r"(p) : "memory"); }

// HugetlbPages of this process, in kB (from /proc/self/status).
long hugetlb_kb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("HugetlbPages:", 0) == 0) return std::strtol(line.c_str() + 13, nullptr, 10);
  return -1;
}

Json row(const char *test, size_t size) {
  Json j;
  j.str("bench", "alloc").str("peer", g_peer).str("test", test).integer("size", static_cast<long long>(size));
  return j;
}

void test_cached(size_t size, long batches, long batch) {
  if (g_reuse) return;
  Buf p = buf_alloc(g_api, size);
  if (!p) {
    skip("alloc", g_peer + " cached " + size_name(size), "allocation failed");
    return;
  }
  std::memset(p.p, 1, size);
  buf_free(p);
  std::vector<double> per_op;
  for (long b = 0; b < batches; ++b) {
    const uint64_t t0 = now_ns();
    for (long i = 0; i < batch; ++i) {
      Buf q = buf_alloc(g_api, size);
      escape(q.p);
      buf_free(q);
    }
    per_op.push_back(static_cast<double>(now_ns() - t0) / static_cast<double>(batch));
  }
  row("cached", size).integer("batch", batch).stats("alloc_free_ns", "ns", summarise(per_op)).emit();
}

// Alloc+free pairs of `size` from `nthreads` threads at once: each round,
// every thread runs `batch` pairs and times its own loop; per pair = that
// time / batch, one sample per thread and round.  A thread's own time, not
// the round's: on a machine shared with other work, waiting for the other
// thread to be scheduled is not a cost of the allocator.
void test_threads(size_t size, int nthreads, long batches, long batch) {
  if (g_reuse) return;
  std::atomic<int> arrived{0};
  std::atomic<long> round{-1};
  std::atomic<bool> failed{false};
  std::vector<std::vector<double>> samples(static_cast<size_t>(nthreads));
  auto work = [&](int t, long b) {
    const uint64_t t0 = now_ns();
    for (long i = 0; i < batch; ++i) {
      Buf q = buf_alloc(g_api, size);
      if (!q) {
        failed = true;
        return;
      }
      escape(q.p);
      buf_free(q);
    }
    if (b) samples[static_cast<size_t>(t)].push_back(static_cast<double>(now_ns() - t0) / static_cast<double>(batch));
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < nthreads; ++t)
    pool.emplace_back([&, t] {
      for (long b = 0; b < batches + 1; ++b) {
        while (round.load() < b) std::this_thread::yield();
        work(t, b);
        arrived.fetch_add(1);
      }
    });
  for (long b = 0; b < batches + 1; ++b) {  // round 0 is a warm-up
    arrived = 0;
    round = b;
    work(0, b);
    while (arrived.load() < nthreads - 1) std::this_thread::yield();
  }
  for (auto &t : pool) t.join();
  if (failed) {
    skip("alloc", g_peer + " threads " + std::to_string(nthreads), "allocation failed");
    return;
  }
  std::vector<double> per_pair;
  for (auto &v : samples) per_pair.insert(per_pair.end(), v.begin(), v.end());
  row("threads", size)
      .integer("threads", nthreads)
      .integer("batch", batch)
      .stats("pair_ns", "ns", summarise(per_pair))
      .emit();
}

// Hit cost with `others` freed 2 MB buffers cached beside the 4 MB one.
void test_depth(size_t others, long batches, long batch) {
  if (g_reuse) return;
#ifdef HUGEPOOL_BENCH_HAVE_LIB
  if (g_api == Page::hugepool) hugepool_set_cache_limits(others + 16, size_t{1} << 40);
#endif
  std::vector<Buf> v;
  for (size_t i = 0; i < others; ++i) {
    Buf p = buf_alloc(g_api, 2 * kMB);
    if (!p) {
      skip("alloc", g_peer + " depth " + std::to_string(others), "allocation failed");
      for (Buf &q : v) buf_free(q);
      return;
    }
    static_cast<char *>(p.p)[0] = 1;
    v.push_back(p);
  }
  for (Buf &q : v) buf_free(q);
  Buf p = buf_alloc(g_api, 4 * kMB);
  if (p) std::memset(p.p, 1, 4 * kMB);
  buf_free(p);
  std::vector<double> per_op;
  for (long b = 0; b < batches; ++b) {
    const uint64_t t0 = now_ns();
    for (long i = 0; i < batch; ++i) {
      Buf q = buf_alloc(g_api, 4 * kMB);
      escape(q.p);
      buf_free(q);
    }
    per_op.push_back(static_cast<double>(now_ns() - t0) / static_cast<double>(batch));
  }
#ifdef HUGEPOOL_BENCH_HAVE_LIB
  if (g_api == Page::hugepool) hugepool_trim();
#endif
  row("depth", 4 * kMB)
      .integer("cached_others", static_cast<long long>(others))
      .integer("batch", batch)
      .stats("alloc_free_ns", "ns", summarise(per_op))
      .emit();
}

void test_memset(size_t size, long reps) {
  std::vector<double> t;
  long huge_kb = -1;
  Buf kept = g_reuse ? buf_alloc(g_api, size) : Buf{};
  if (g_reuse && !kept) {
    skip("alloc", g_peer + " memset " + size_name(size), "allocation failed");
    return;
  }
  for (long r = 0; r < reps + 1; ++r) {  // the first iteration is a warm-up
    const uint64_t t0 = now_ns();
    Buf p = kept ? kept : buf_alloc(g_api, size);
    if (!p) {
      skip("alloc", g_peer + " memset " + size_name(size), "allocation failed");
      return;
    }
    std::memset(p.p, static_cast<int>(r), size);
    if (r == 1) huge_kb = hugetlb_kb();
    escape(p.p);
    if (!kept) buf_free(p);
    if (r) t.push_back(static_cast<double>(now_ns() - t0));
  }
  buf_free(kept);
  row("memset", size).integer("hugetlb_kb", huge_kb).stats("iter_ns", "ns", summarise(t)).emit();
}

void test_mixed(long steps, size_t largest) {
  if (g_reuse) return;
  static const size_t all_mb[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64};
  std::vector<size_t> mb;
  for (size_t m : all_mb)
    if (m * kMB <= largest) mb.push_back(m);
  if (mb.empty()) mb.push_back(1);
  std::mt19937_64 rng(7);
  std::vector<double> t;
  long huge_kb = 0;
  for (long s = 0; s < steps + 1; ++s) {
    const uint64_t t0 = now_ns();
    std::vector<Buf> live;
    std::vector<void *> small;
    const int nbuf = 4 + static_cast<int>(rng() % 5);
    for (int i = 0; i < nbuf; ++i) {
      const size_t n = mb[rng() % mb.size()] * kMB;
      Buf p = buf_alloc(g_api, n);
      if (!p) {
        skip("alloc", g_peer + " mixed", "allocation failed");
        for (auto &x : live) buf_free(x);
        for (void *q : small) std::free(q);
        return;
      }
      std::memset(p.p, i, n);
      live.push_back(p);
      for (int k = 0; k < 50; ++k) {
        void *q = std::malloc(64 + rng() % 16384);
        escape(q);
        small.push_back(q);
      }
    }
    huge_kb = std::max(huge_kb, hugetlb_kb());
    std::shuffle(live.begin(), live.end(), rng);
    for (auto &x : live) buf_free(x);
    for (void *q : small) std::free(q);
    if (s) t.push_back(static_cast<double>(now_ns() - t0));
  }
  row("mixed", 0)
      .integer("largest", static_cast<long long>(largest))
      .integer("hugetlb_kb", huge_kb)
      .stats("step_ns", "ns", summarise(t))
      .emit();
}

}  // namespace

}  // namespace hb

int main(int argc, char **argv) {
  using namespace hb;
  Args a(argc, argv, 1);
  const std::string api = a.get("api", "malloc");
  if (api == "malloc" || api == "reuse")
    g_api = Page::heap;
  else if (api == "ghp")
    g_api = Page::ghp;
  else if (api == "hugepool")
    g_api = Page::hugepool;
  else die("unknown --api " + api);
  g_reuse = api == "reuse";
  g_peer = a.get("peer", api);
  if (g_api == Page::ghp && !have_hugetlbfs()) {
    skip("alloc", g_peer, "built without libhugetlbfs");
    return 0;
  }
  if (g_api == Page::hugepool && !have_hugepool()) {
    skip("alloc", g_peer, "built without the hugepool library");
    return 0;
  }
  const auto tests = split(a.get("tests", "cached,memset,mixed"));
  auto want = [&](const char *t) { return std::find(tests.begin(), tests.end(), t) != tests.end(); };
  if (want("cached"))
    for (size_t s : parse_sizes(a.get("cached-sizes", "2M")))
      test_cached(s, a.num("batches", 30), a.num("batch", 1000));
  if (want("memset"))
    for (size_t s : parse_sizes(a.get("sizes", "2M,8M,64M,256M"))) test_memset(s, a.num("reps", 10));
  if (want("threads")) {
    const int all = static_cast<int>(std::max(2u, std::thread::hardware_concurrency()));
    const int most = static_cast<int>(a.num("threads-max", all));
    std::vector<int> counts{1, 2};
    if (most > 2) counts.push_back(most);
    for (size_t s : parse_sizes(a.get("cached-sizes", "2M")))
      for (int n : counts) test_threads(s, n, a.num("batches", 30), a.num("batch", 1000));
  }
  if (want("depth"))
    for (const auto &d : split(a.get("depths", "8,64,256,1024")))
      test_depth(std::stoul(d), a.num("batches", 30), a.num("batch", 1000));
  if (want("mixed")) test_mixed(a.num("steps", 20), parse_size(a.get("mixed-max", "64M")));
  return 0;
}
