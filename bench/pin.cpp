// SPDX-License-Identifier: BSD-3-Clause
// Pinning cost of already-touched buffers: io_uring fixed-buffer register and
// unregister (the kernel pins every page, as an RDMA registration does), and
// mlock/munlock as a supporting number.
#include <liburing.h>
#include <sys/uio.h>

#include "benches.hpp"

namespace hb {

int bench_pin(const Args &a) {
  const auto pages = parse_pages(a.get("pages", "4k,thp,hugetlb,hugepool"));
  const auto sizes = parse_sizes(a.get("sizes", "2M,64M"));
  const long reps = a.num("reps", 5);

  io_uring ring{};
  const int qerr = io_uring_queue_init(4, &ring, 0);
  const bool have_ring = qerr == 0;
  if (!have_ring) skip("pin", "io_uring register", std::string("io_uring_queue_init: ") + std::strerror(-qerr));

  for (Page kind : pages) {
    for (size_t size : sizes) {
      const std::string what = measured_label("pin", kind, size);
      if (what.empty()) continue;
      Buf b = buf_alloc(kind, size);
      if (!b) {
        skip("pin", what, std::string("allocation failed: ") + std::strerror(errno));
        continue;
      }
      std::memset(b.p, 1, b.len);
      std::vector<double> reg, unreg, lock, unlock;
      std::string failure;
      for (long r = 0; r < reps + 1 && failure.empty(); ++r) {  // first round is a warm-up
        if (have_ring) {
          iovec iov{b.p, b.len};
          const uint64_t t0 = now_ns();
          const int rc = io_uring_register_buffers(&ring, &iov, 1);
          const uint64_t t1 = now_ns();
          if (rc != 0) {
            failure = std::string("io_uring_register_buffers: ") + std::strerror(-rc);
            break;
          }
          io_uring_unregister_buffers(&ring);
          const uint64_t t2 = now_ns();
          if (r) {
            reg.push_back(static_cast<double>(t1 - t0));
            unreg.push_back(static_cast<double>(t2 - t1));
          }
        }
        const uint64_t t0 = now_ns();
        if (mlock(b.p, b.len) != 0) {
          failure = std::string("mlock: ") + std::strerror(errno);
          break;
        }
        const uint64_t t1 = now_ns();
        munlock(b.p, b.len);
        const uint64_t t2 = now_ns();
        if (r) {
          lock.push_back(static_cast<double>(t1 - t0));
          unlock.push_back(static_cast<double>(t2 - t1));
        }
      }
      if (!failure.empty()) skip("pin", what, failure);
      auto line = [&](const char *metric, const std::vector<double> &v) {
        if (v.empty()) return;
        Json().str("bench", "pin").str("page", page_name(kind)).integer("size", static_cast<long long>(size))
            .stats(metric, "ns", summarise(v)).emit();
      };
      line("uring_register_ns", reg);
      line("uring_unregister_ns", unreg);
      line("mlock_ns", lock);
      line("munlock_ns", unlock);
      buf_free(b);
      page_type_trim(kind);
    }
  }
  if (have_ring) io_uring_queue_exit(&ring);
  return 0;
}

}  // namespace hb
