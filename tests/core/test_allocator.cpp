// SPDX-License-Identifier: BSD-3-Clause
// hugepool::allocator<T> in standard containers: storage on hugetlb pages
// through growth and copies; std::bad_alloc when the pool is short.
#include <cerrno>
#include <list>
#include <memory>
#include <numeric>

#include <catch2/catch.hpp>

#include "core_test.hpp"
#include "hugepool/allocator.hpp"

using namespace test;

static bool on_hugetlb(const void *p) {
  auto e = kv::smaps_of(p);
  return e.found && e.field("KernelPageSize") == 2048;
}

TEST_CASE("hugepool::vector keeps its storage on hugetlb pages while it grows", "[allocator]") {
  kv::PoolGuard pool(48);
  fresh_state();
  hugepool::vector<double> v;
  const void *last = nullptr;
  int moves = 0;
  for (int i = 0; i < 4'000'000; i++) {  // 32 MB of doubles, several reallocations
    v.push_back(i * 0.5);
    if (v.data() != last) {
      last = v.data();
      moves++;
      CHECK(on_hugetlb(v.data()));
      CHECK(reinterpret_cast<uintptr_t>(v.data()) % (2 * MiB) == 0);
    }
  }
  CHECK(moves > 3);
  CHECK(v[123456] == 123456 * 0.5);
  CHECK(kv::smaps_of(v.data()).field("Private_Hugetlb") >= 32 * 1024);

  hugepool::vector<double> copy = v;  // copy construct
  CHECK(copy == v);
  CHECK(copy.data() != v.data());
  CHECK(on_hugetlb(copy.data()));
  hugepool::vector<double> moved = std::move(copy);
  CHECK(moved.size() == v.size());
  std::vector<double, hugepool::allocator<double>> assigned;
  assigned = v;
  CHECK(std::accumulate(assigned.begin(), assigned.end(), 0.0) == std::accumulate(v.begin(), v.end(), 0.0));
}

TEST_CASE("allocator meets the Allocator requirements: rebind, equality, allocate_shared", "[allocator]") {
  kv::PoolGuard pool(4);
  fresh_state();
  hugepool::allocator<int> ai;
  hugepool::allocator<double> ad(ai);  // converting constructor
  CHECK(ai == ad);
  CHECK_FALSE(ai != ad);
  using Rebound = std::allocator_traits<hugepool::allocator<int>>::rebind_alloc<long>;
  STATIC_REQUIRE(std::is_same_v<Rebound, hugepool::allocator<long>>);
  STATIC_REQUIRE(std::allocator_traits<hugepool::allocator<int>>::is_always_equal::value);

  struct Field {
    double data[1024];
  };
  auto sp = std::allocate_shared<Field>(hugepool::allocator<Field>{});
  sp->data[1023] = 4.0;
  CHECK(on_hugetlb(sp.get()));
  CHECK(ai.allocate(0) == nullptr);
  ai.deallocate(nullptr, 0);
  // A node-based container works too (each node a page: correct, if wasteful).
  std::list<int, hugepool::allocator<int>> l{1, 2, 3};
  CHECK(l.size() == 3);
}

TEST_CASE("allocator throws std::bad_alloc when the pool is short", "[allocator]") {
  kv::PoolGuard pool(1);
  fresh_state();
  hugepool::allocator<char> a;
  StderrCapture err;
  CHECK_THROWS_AS(a.allocate(64 * MiB), std::bad_alloc);
  CHECK_THROWS_AS(a.allocate(a.max_size() + 1), std::bad_array_new_length);
  hugepool::vector<char> v;
  CHECK_THROWS_AS(v.resize(8 * MiB), std::bad_alloc);
  CHECK(v.empty());
  CHECK(err.text().find("need") != std::string::npos);
}
