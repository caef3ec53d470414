// SPDX-License-Identifier: BSD-3-Clause
// First-touch cost: map a buffer and fault every 4 KB of it in.
//   warm: median of back-to-back repetitions;
//   cold: memory left idle first (this guest hands idle free memory back to
//         its host, so the next fault may also fault in the host).
#include <chrono>
#include <thread>

#include "benches.hpp"

namespace hb {

namespace {

// Time until the buffer is usable (allocation + first write to every page),
// and the time to give it back.  Returns false if the allocation failed.
bool one_touch(Page kind, size_t bytes, double *touch_ns, double *free_ns) {
  const uint64_t t0 = now_ns();
  Buf b = buf_alloc(kind, bytes);
  if (!b) return false;
  touch_pages(b.p, b.len);
  const uint64_t t1 = now_ns();
  buf_free(b);
  const uint64_t t2 = now_ns();
  *touch_ns = static_cast<double>(t1 - t0);
  *free_ns = static_cast<double>(t2 - t1);
  return true;
}

}  // namespace

int bench_touch(const Args &a) {
  const auto pages = parse_pages(a.get("pages", "4k,thp,hugetlb,hugepool"));
  const auto sizes = parse_sizes(a.get("sizes", "2M,64M"));
  const auto cold_sizes = parse_sizes(a.get("cold-sizes", ""));
  const long reps = a.num("reps", 5), cold_reps = a.num("cold-reps", 1), idle_s = a.num("idle", 4);
  for (Page kind : pages) {
    for (size_t size : sizes) {
      const std::string what = measured_label("touch", kind, size);
      if (what.empty()) continue;
      std::vector<double> warm, freeing;
      double t = 0, f = 0;
      bool ok = one_touch(kind, size, &t, &f);  // warm-up, not recorded
      for (long r = 0; ok && r < reps; ++r) {
        ok = one_touch(kind, size, &t, &f);
        warm.push_back(t);
        freeing.push_back(f);
      }
      if (!ok) {
        skip("touch", what, std::string("allocation failed: ") + std::strerror(errno));
        page_type_trim(kind);
        continue;
      }
      Json().str("bench", "touch").str("page", page_name(kind)).integer("size", static_cast<long long>(size))
          .str("phase", "warm").stats("alloc_touch_ns", "ns", summarise(warm)).emit();
      Json().str("bench", "touch").str("page", page_name(kind)).integer("size", static_cast<long long>(size))
          .str("phase", "warm").stats("free_ns", "ns", summarise(freeing)).emit();
      if (std::find(cold_sizes.begin(), cold_sizes.end(), size) != cold_sizes.end()) {
        std::vector<double> cold;
        for (long r = 0; r < cold_reps; ++r) {
          page_type_trim(kind);
          std::this_thread::sleep_for(std::chrono::seconds(idle_s));
          if (!one_touch(kind, size, &t, &f)) break;
          cold.push_back(t);
        }
        if (!cold.empty())
          Json().str("bench", "touch").str("page", page_name(kind)).integer("size", static_cast<long long>(size))
              .str("phase", "cold").integer("idle_s", idle_s).stats("alloc_touch_ns", "ns", summarise(cold)).emit();
      }
      page_type_trim(kind);
    }
  }
  return 0;
}

}  // namespace hb
