// SPDX-License-Identifier: BSD-3-Clause
// hugepool::allocator<T> — a standard Allocator whose memory lives on hugetlb
// pages (header-only; link with hugepool::hugepool).
//
//   hugepool::vector<double> halo(1 << 24);               // 128 MiB on 2 MB pages
//   auto p = std::allocate_shared<Grid>(hugepool::allocator<Grid>{});
//
// Every allocation is a whole number of huge pages taken from hugepool's
// cache, so the allocator suits large, long-lived or frequently recycled
// buffers (communication buffers, fields, halos), not node-based containers
// with many tiny elements.  Failure throws std::bad_alloc (the C API's one
// diagnostic line says why).  All instances are interchangeable (stateless),
// so containers can be copied, moved and swapped freely.
#pragma once

#include <cstddef>
#include <limits>
#include <new>
#include <type_traits>
#include <vector>

#include "hugepool/hugepool.h"

namespace hugepool {

template <class T>
class allocator {
 public:
  using value_type = T;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using propagate_on_container_move_assignment = std::true_type;
  using is_always_equal = std::true_type;

  template <class U>
  struct rebind {
    using other = allocator<U>;
  };

  constexpr allocator() noexcept = default;
  template <class U>
  constexpr allocator(const allocator<U> &) noexcept {}  // NOLINT(google-explicit-constructor)

  [[nodiscard]] T *allocate(std::size_t n) {
    static_assert(alignof(T) <= 2 * 1024 * 1024, "hugepool buffers are aligned to 2 MB at most");
    if (n == 0) return nullptr;  // the standard leaves the value unspecified; deallocate accepts it
    if (n > max_size()) throw std::bad_array_new_length();
    void *p = hugepool_alloc(n * sizeof(T));
    if (!p) throw std::bad_alloc();
    return static_cast<T *>(p);
  }

  void deallocate(T *p, std::size_t) noexcept { hugepool_free(p); }

  [[nodiscard]] constexpr std::size_t max_size() const noexcept {
    return std::numeric_limits<std::size_t>::max() / sizeof(T) / 2;
  }
};

template <class T, class U>
constexpr bool operator==(const allocator<T> &, const allocator<U> &) noexcept {
  return true;
}
template <class T, class U>
constexpr bool operator!=(const allocator<T> &, const allocator<U> &) noexcept {
  return false;
}

// std::vector whose storage is on hugetlb pages.
template <class T>
using vector = std::vector<T, allocator<T>>;

}  // namespace hugepool
