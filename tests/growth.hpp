// SPDX-License-Identifier: BSD-3-Clause
// Growth patterns for the realloc tests of the core (hugepool_realloc) and
// the preload (realloc): buffers grown to a gigabyte in the ways programs do
// (1 MB steps, doubling, two buffers in turn with other allocations between
// the steps, shrink and regrow, several threads), every byte written and
// checked, and what the kernel shows over each buffer checked at the end.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kernel_view.hpp"

namespace growth {

constexpr size_t MiB = size_t{1} << 20;

// The allocator under test.
struct Api {
  std::function<void *(size_t)> alloc;
  std::function<void *(void *, size_t)> resize;
  std::function<void(void *)> release;
};

// The word every 8-byte slot holds: its offset and a salt per buffer, so a
// byte moved to the wrong place or lost is seen.
inline uint64_t word_at(size_t off, uint64_t salt) { return (off + 1) * 0x9E3779B97F4A7C15ULL ^ salt; }

inline void fill(char *p, size_t from, size_t to, uint64_t salt) {
  for (size_t off = from; off < to; off += 8) {
    const uint64_t w = word_at(off, salt);
    std::memcpy(p + off, &w, 8);
  }
}

// First offset in [from, to) that does not hold its word, or `to`.
inline size_t first_bad(const char *p, size_t from, size_t to, uint64_t salt) {
  for (size_t off = from; off < to; off += 8) {
    uint64_t w;
    std::memcpy(&w, p + off, 8);
    if (w != word_at(off, salt)) return off;
  }
  return to;
}

// One growing buffer.  Every byte is written once when it is added; all of
// them are checked whenever the buffer moves (the bytes that did not move are
// checked at the end), so the whole history is covered in O(size) reads per
// move.
class Buffer {
 public:
  Buffer(const Api &api, uint64_t salt) : api_(api), salt_(salt) {}
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  ~Buffer() {
    if (p_) api_.release(p_);
  }

  // Resizes to `want` bytes (a multiple of 8); false when the call failed.
  bool resize(size_t want) {
    char *q = static_cast<char *>(p_ ? api_.resize(p_, want) : api_.alloc(want));
    if (!q) return false;
    const size_t kept = size_ < want ? size_ : want;
    if (p_ && q != p_) {
      moves_++;
      const size_t bad = first_bad(q, 0, kept, salt_);
      if (bad != kept && problem_.empty())
        problem_ = "byte " + std::to_string(bad) + " of " + std::to_string(kept) + " wrong after a move";
    }
    p_ = q;
    if (want > size_) fill(p_, size_, want, salt_);
    size_ = want;
    return true;
  }
  bool intact() const { return problem_.empty() && first_bad(p_, 0, size_, salt_) == size_; }
  // What went wrong during a move ("" if nothing).
  const std::string &problem() const { return problem_; }
  char *data() const { return p_; }
  size_t size() const { return size_; }
  int moves() const { return moves_; }
  void release() {
    if (p_) api_.release(p_);
    p_ = nullptr;
    size_ = 0;
  }

 private:
  const Api &api_;
  uint64_t salt_;
  char *p_ = nullptr;
  size_t size_ = 0;
  int moves_ = 0;
  std::string problem_;
};

// What the kernel shows over the buffer: all of it mapped, on hugetlb 2 MB
// pages, with no hole.
inline void check_kernel_view(const Buffer &b) {
  const size_t span = (b.size() + 2 * MiB - 1) & ~(2 * MiB - 1);
  const kv::RangeView v = kv::range_view(b.data(), span);
  CHECK(v.mapped == span);
  CHECK(v.all_2m);
  CHECK(v.hugetlb_kb == static_cast<long long>(span >> 10));
}

inline void steps(const Api &api, size_t top, size_t step) {
  Buffer b(api, 1);
  for (size_t want = step; want <= top; want += step) REQUIRE(b.resize(want));
  CHECK(b.moves() >= 3);  // the headroom ran out several times: the buffer moved
  INFO(b.problem());
  CHECK(b.intact());
  check_kernel_view(b);
}

inline void doubling(const Api &api, size_t top) {
  Buffer b(api, 2);
  for (size_t want = MiB; want <= top; want *= 2) REQUIRE(b.resize(want));
  CHECK(b.moves() >= 2);  // each move leaves room for two more doublings
  CHECK(b.intact());
  check_kernel_view(b);
}

// Two buffers in turn, 1 MB at a time, with allocations kept between the
// steps (a small one each step, a 2 MB one every 32): other mappings land
// beside the growing ones and in the ranges they leave when they move.
inline void interleaved(const Api &api, size_t top) {
  Buffer a(api, 3), b(api, 4);
  std::vector<void *> small, large;
  for (size_t want = MiB; want <= top; want += MiB) {
    REQUIRE(a.resize(want));
    small.push_back(std::malloc(64 + (want >> 20) % 4000));
    REQUIRE(small.back() != nullptr);
    REQUIRE(b.resize(want));
    if ((want >> 20) % 32 == 0) {
      large.push_back(api.alloc(2 * MiB));
      REQUIRE(large.back() != nullptr);
    }
  }
  CHECK(a.moves() >= 3);
  CHECK(b.moves() >= 3);
  CHECK(a.intact());
  CHECK(b.intact());
  check_kernel_view(a);
  check_kernel_view(b);
  for (void *p : small) std::free(p);
  for (void *p : large) api.release(p);
}

// Grow in 1 MB steps, shrink 8 MB at a time to a quarter, grow again.
inline void shrink_regrow(const Api &api, size_t top) {
  Buffer b(api, 5);
  for (size_t want = MiB; want <= top; want += MiB) REQUIRE(b.resize(want));
  for (size_t want = top - 8 * MiB; want >= top / 4; want -= 8 * MiB) {
    REQUIRE(b.resize(want));
    REQUIRE(b.data() != nullptr);
  }
  CHECK(b.intact());
  check_kernel_view(b);
  for (size_t want = b.size() + MiB; want <= top; want += MiB) REQUIRE(b.resize(want));
  CHECK(b.intact());
  check_kernel_view(b);
}

// Three threads, each growing its own buffer in 1 MB steps at once.
inline void threads(const Api &api, size_t top) {
  std::mutex m;
  std::vector<std::string> errors;
  auto body = [&](uint64_t salt) {
    Buffer b(api, salt);
    std::string err;
    for (size_t want = MiB; want <= top && err.empty(); want += MiB)
      if (!b.resize(want)) err = "resize to " + std::to_string(want) + " failed";
    if (err.empty() && b.moves() < 3) err = "moved only " + std::to_string(b.moves()) + " times";
    if (err.empty() && !b.intact()) err = "bytes lost " + b.problem();
    const size_t span = b.size();
    if (err.empty()) {
      const kv::RangeView v = kv::range_view(b.data(), span);
      if (v.mapped != span || !v.all_2m || v.hugetlb_kb != static_cast<long long>(span >> 10))
        err = "kernel view: mapped " + std::to_string(v.mapped) + ", hugetlb kB " + std::to_string(v.hugetlb_kb);
    }
    std::lock_guard<std::mutex> g(m);
    if (!err.empty()) errors.push_back("thread " + std::to_string(salt) + ": " + err);
  };
  std::thread t1(body, 11), t2(body, 12), t3(body, 13);
  t1.join();
  t2.join();
  t3.join();
  for (const auto &e : errors) UNSCOPED_INFO(e);
  CHECK(errors.empty());
}

}  // namespace growth
