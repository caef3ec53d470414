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
//
// hugepool::registered_allocator<T> hands out buffers registered with a
// registrar (hugepool_registrar_add, or the CUDA driver's):
//
//   hugepool::registered_allocator<float> pinned(hugepool::cuda_registrar());
//   hugepool::registered_vector<float> staging(1 << 26, pinned);  // pinned for cudaMemcpyAsync
//
// A buffer is registered once per mapping and stays registered in hugepool's
// cache: the next vector of that size costs no registration.
#pragma once

#include <cerrno>
#include <cstddef>
#include <limits>
#include <new>
#include <system_error>
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

// The CUDA driver's registrar id; throws std::system_error (ENODEV: no
// driver or no device, one line on stderr says which).
inline int cuda_registrar() {
  int id = hugepool_registrar_cuda();
  if (id < 0) throw std::system_error(errno, std::generic_category(), "hugepool_registrar_cuda");
  return id;
}

// An Allocator whose buffers are registered with registrar `id`.  Failure
// throws std::bad_alloc when the pool is short, std::system_error with the
// registrar's errno otherwise.  Two instances are equal when they name the
// same registrar.
template <class T>
class registered_allocator {
 public:
  using value_type = T;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using propagate_on_container_copy_assignment = std::true_type;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;
  using is_always_equal = std::false_type;

  template <class U>
  struct rebind {
    using other = registered_allocator<U>;
  };

  explicit registered_allocator(int id) noexcept : id_(id) {}
  template <class U>
  // NOLINTNEXTLINE(google-explicit-constructor)
  registered_allocator(const registered_allocator<U> &o) noexcept : id_(o.id()) {}

  [[nodiscard]] T *allocate(std::size_t n) {
    static_assert(alignof(T) <= 2 * 1024 * 1024, "hugepool buffers are aligned to 2 MB at most");
    if (n == 0) return nullptr;
    if (n > max_size()) throw std::bad_array_new_length();
    void *p = hugepool_alloc_registered(n * sizeof(T), id_);
    if (!p && errno == ENOMEM) throw std::bad_alloc();
    if (!p) throw std::system_error(errno, std::generic_category(), "hugepool_alloc_registered");
    return static_cast<T *>(p);
  }

  void deallocate(T *p, std::size_t) noexcept { hugepool_free(p); }  // stays registered in the cache

  [[nodiscard]] constexpr std::size_t max_size() const noexcept {
    return std::numeric_limits<std::size_t>::max() / sizeof(T) / 2;
  }
  [[nodiscard]] int id() const noexcept { return id_; }

 private:
  int id_;
};

template <class T, class U>
bool operator==(const registered_allocator<T> &a, const registered_allocator<U> &b) noexcept {
  return a.id() == b.id();
}
template <class T, class U>
bool operator!=(const registered_allocator<T> &a, const registered_allocator<U> &b) noexcept {
  return !(a == b);
}

template <class T>
using registered_vector = std::vector<T, registered_allocator<T>>;

}  // namespace hugepool
