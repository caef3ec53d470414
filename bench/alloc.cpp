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
#include <random>

#include "common.hpp"

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
  row("mixed", 0).integer("largest", static_cast<long long>(largest)).integer("hugetlb_kb", huge_kb).stats("step_ns", "ns", summarise(t)).emit();
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
  if (want("mixed")) test_mixed(a.num("steps", 20), parse_size(a.get("mixed-max", "64M")));
  return 0;
}
