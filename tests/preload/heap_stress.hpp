// SPDX-License-Identifier: BSD-3-Clause
// The small heap's multi-threaded stress, shared by the test under the
// preload (malloc/free) and the one that calls the heap directly (for the
// ASan and TSan builds): threads allocate random sizes 16 B - 256 KB
// (log-uniform), keep them for random lifetimes and free a quarter of them
// in another thread (through per-thread mailboxes).  Every object is
// filled with a pattern and checked, whole, by whoever frees it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace heap_stress {

inline void fill(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = static_cast<unsigned char>((i * 131 + seed) >> 3);
}
inline bool check(const unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != static_cast<unsigned char>((i * 131 + seed) >> 3)) return false;
  return true;
}

// What the heap under test offers.  resize may be null (no realloc in the
// mix; then no zeroed requests either); sample, if set, is asked of one
// object in 5000 (e.g. whether the kernel shows it on hugetlb pages).
struct Ops {
  void *(*alloc)(size_t n, bool zero);
  void *(*resize)(void *p, size_t n);
  void (*release)(void *p);
  size_t (*usable)(const void *p);
  bool (*owns)(const void *p);   /* may be null */
  bool (*sample)(const void *p); /* may be null */
};

struct Result {
  long bad = 0;     /* a pattern or a usable size wrong, a zeroed request not zero */
  long failed = 0;  /* an allocation or a realloc refused */
  long aligned = 0; /* an object on a 2 MB boundary (where hugepool's buffers are) */
  long sampled = 0, sampled_yes = 0;
};

inline Result run(const Ops &ops, int threads, int rounds) {
  struct Obj {
    unsigned char *p;
    size_t n;
    unsigned seed;
  };
  struct Mailbox {
    std::mutex m;
    std::vector<Obj> objs;
  };
  constexpr size_t kMax = 256 << 10;
  std::vector<Mailbox> boxes(static_cast<size_t>(threads));
  std::atomic<long> bad{0}, failed{0}, aligned{0}, sampled{0}, sampled_yes{0};
  auto release = [&ops, &bad](const Obj &o) {
    if (!check(o.p, o.n, o.seed) || ops.usable(o.p) < o.n || (ops.owns && !ops.owns(o.p))) bad++;
    ops.release(o.p);
  };
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; t++) {
    ts.emplace_back([&, t] {
      std::vector<Obj> live;
      uint64_t x = 0x2545F4914F6CDD1DULL * uint64_t(t + 1);
      auto next = [&x] { return x ^= x << 13, x ^= x >> 7, x ^= x << 17; };
      for (int r = 0; r < rounds; r++) {
        uint64_t v = next();
        if (!live.empty() && (v % 100 < 45 || live.size() > 300)) {
          size_t i = (v >> 8) % live.size();
          Obj o = live[i];
          live[i] = live.back();
          live.pop_back();
          if ((v >> 40) % 4 == 0) { /* another thread frees it */
            Mailbox &b = boxes[(size_t(t) + 1 + (v >> 44) % size_t(threads - 1)) % size_t(threads)];
            std::lock_guard<std::mutex> g(b.m);
            b.objs.push_back(o);
          } else if ((v >> 40) % 4 == 1 && ops.resize) { /* grows or shrinks it first */
            size_t n = o.n / 2 + 1 + (v >> 50) % (o.n + 16);
            if (n > kMax) n = kMax;
            auto *q = static_cast<unsigned char *>(ops.resize(o.p, n));
            if (!q) {
              failed++;
              release(o);
              continue;
            }
            if (!check(q, n < o.n ? n : o.n, o.seed)) bad++;
            fill(q, n, o.seed);
            release({q, n, o.seed});
          } else {
            release(o);
          }
        } else {
          unsigned shift = 4 + unsigned((v >> 20) % 15); /* 16 B .. 256 KB */
          size_t n = (size_t(1) << shift) + ((v >> 32) & ((size_t(1) << shift) - 1));
          if (n > kMax) n = kMax;
          bool zero = ops.resize && (v & 7) == 0;
          auto *p = static_cast<unsigned char *>(ops.alloc(n, zero));
          if (!p) {
            failed++;
            continue;
          }
          if (zero && p[n - 1] != 0) bad++;
          if (reinterpret_cast<uintptr_t>(p) % (2u << 20) == 0) aligned++;
          unsigned seed = unsigned(v >> 48);
          fill(p, n, seed);
          live.push_back({p, n, seed});
          if (ops.sample && r % 5000 == 0) {
            sampled++;
            if (ops.sample(p)) sampled_yes++;
          }
        }
        if (r % 64 == 0) {
          std::vector<Obj> mine;
          {
            std::lock_guard<std::mutex> g(boxes[size_t(t)].m);
            mine.swap(boxes[size_t(t)].objs);
          }
          for (auto &o : mine) release(o);
        }
      }
      for (auto &o : live) release(o);
    });
  }
  for (auto &t : ts) t.join();
  for (auto &b : boxes)
    for (auto &o : b.objs) release(o);
  Result res;
  res.bad = bad;
  res.failed = failed;
  res.aligned = aligned;
  res.sampled = sampled;
  res.sampled_yes = sampled_yes;
  return res;
}

}  // namespace heap_stress
