// SPDX-License-Identifier: BSD-3-Clause
// TLB reach: a dependent pointer chase through a random cyclic permutation
// of the cache lines of a buffer.  Every step is a cache miss; whether it is
// also a TLB miss (and how deep the page walk goes) depends on the page size.
#include <cstring>
#include <random>

#include "../tools/tlb-probe.h"
#include "benches.hpp"

namespace hb {

namespace {

constexpr size_t kLine = 64;

// Link every line of the buffer into one random cycle (Sattolo's algorithm).
void build_chain(char *p, size_t len) {
  const size_t n = len / kLine;
  std::vector<uint32_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<uint32_t>(i);
  std::mt19937_64 rng(42);
  for (size_t i = n - 1; i > 0; --i) {
    const size_t j = std::uniform_int_distribution<size_t>(0, i - 1)(rng);
    std::swap(order[i], order[j]);
  }
  for (size_t i = 0; i < n; ++i) {
    char *from = p + static_cast<size_t>(order[i]) * kLine;
    char *to = p + static_cast<size_t>(order[(i + 1) % n]) * kLine;
    *reinterpret_cast<char **>(from) = to;
  }
}

double chase_ns(char *start, long steps) {
  char *q = start;
  const uint64_t t0 = now_ns();
  for (long i = 0; i < steps; ++i) q = *reinterpret_cast<char **>(q);
  const uint64_t t1 = now_ns();
  asm volatile("" : : "r"(q) : "memory");  // keep the chase
  return static_cast<double>(t1 - t0) / static_cast<double>(steps);
}

// One TLB entry per 2 MB page, or 512 (tools/tlb-probe.h): the same
// cache lines chased over TLB_PROBE_FEW and over TLB_PROBE_MANY of the 4 KB
// parts of a 2 MB buffer of each page type, judged against the 4 KB pages'
// slowdown.  In a virtual machine whose host maps its memory with 4 KB
// pages, every type is 512.
void tlb_entries(const std::vector<Page> &pages) {
  tlb_probe ref{};
  bool have_ref = false;
  std::vector<Page> order{Page::small};  // the reference first
  for (Page kind : pages)
    if (kind != Page::small && kind != Page::huge1g) order.push_back(kind);
  for (Page kind : order) {
    const std::string what = measured_label("tlb_entry", kind, TLB_PROBE_REGION);
    if (what.empty()) continue;
    Buf b = buf_alloc(kind, TLB_PROBE_REGION);
    if (!b) {
      skip("tlb_entry", what, std::string("allocation failed: ") + std::strerror(errno));
      continue;
    }
    std::memset(b.p, 0, TLB_PROBE_REGION);
    if (kind == Page::thp && smaps_kb_of(b.p, "AnonHugePages") < 2048) {  // THP is best effort: judge only a huge page
      buf_free(b);
      skip("tlb_entry", what, "the kernel gave no transparent huge page for the buffer");
      continue;
    }
    tlb_probe got{};
    tlb_probe_region(b.p, &got);
    buf_free(b);
    page_type_trim(kind);
    Json j;
    j.str("bench", "tlb_entry").str("page", page_name(kind)).str("metric", "ns_per_step").str("unit", "ns")
        .num("few_parts", TLB_PROBE_FEW)
        .num("many_parts", TLB_PROBE_MANY)
        .num("few_parts_ns", got.ns_few)
        .num("many_parts_ns", got.ns_many);
    if (kind == Page::small) {
      ref = got;
      have_ref = true;
    } else if (have_ref) {
      j.str("verdict", tlb_verdict_name(tlb_probe_judge(&ref, &got)));
    }
    j.emit();
  }
}

}  // namespace

int bench_tlb(const Args &a) {
  const auto pages = parse_pages(a.get("pages", "4k,thp,hugetlb,hugepool"));
  const auto sizes = parse_sizes(a.get("sizes", "64M"));
  const long reps = a.num("reps", 3), steps = a.num("steps", 2000000);
  if (a.get("entries", "1") != "0") tlb_entries(pages);
  for (size_t size : sizes) {
    for (Page kind : pages) {
      const std::string what = measured_label("tlb", kind, size);
      if (what.empty()) continue;
      Buf b = buf_alloc(kind, size);
      if (!b) {
        skip("tlb", what, std::string("allocation failed: ") + std::strerror(errno));
        continue;
      }
      build_chain(b.p, size);
      chase_ns(b.p, steps / 4);  // warm-up
      std::vector<double> t;
      for (long r = 0; r < reps; ++r) t.push_back(chase_ns(b.p, steps));
      buf_free(b);
      page_type_trim(kind);
      Json().str("bench", "tlb").str("page", page_name(kind)).integer("size", static_cast<long long>(size))
          .integer("steps", steps).stats("ns_per_access", "ns", summarise(t)).emit();
    }
  }
  return 0;
}

}  // namespace hb
