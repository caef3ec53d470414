// SPDX-License-Identifier: BSD-3-Clause
// NUMA binding: pages land on the node asked for (the kernel's numa_maps
// says so); a node that does not exist is a clear EINVAL.
#include <cerrno>
#include <cstring>
#include <sstream>

#include <catch2/catch.hpp>

#include "core_test.hpp"

using namespace test;

// The /proc/self/numa_maps line of the mapping that starts at p.
static std::string numa_maps_line(const void *p) {
  char key[32];
  std::snprintf(key, sizeof(key), "%lx ", reinterpret_cast<unsigned long>(p));
  std::istringstream in(kv::read_file("/proc/self/numa_maps"));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) return line;
  return {};
}

TEST_CASE("a buffer bound to node 0 has its pages on node 0", "[numa]") {
  kv::PoolGuard pool(4);
  fresh_state();
  const long long node_free0 =
      std::stoll(kv::read_file("/sys/devices/system/node/node0/hugepages/hugepages-2048kB/free_hugepages"));
  auto *p = static_cast<char *>(hugepool_alloc_on_node(4 * MiB, 0));
  REQUIRE(p != nullptr);
  // Populated at allocation: the node's free count drops before any touch.
  CHECK(node_free0 -
            std::stoll(kv::read_file("/sys/devices/system/node/node0/hugepages/hugepages-2048kB/free_hugepages")) ==
        2);
  const std::string line = numa_maps_line(p);
  INFO(line);
  CHECK(line.find("bind:0") != std::string::npos);
  CHECK(line.find("huge") != std::string::npos);
  CHECK(line.find("N0=2") != std::string::npos);
  CHECK(kv::smaps_of(p).field("Private_Hugetlb") == 4096);

  // The node is remembered in the cache: the same node gets the same mapping.
  hugepool_free(p);
  CHECK(hugepool_alloc_on_node(4 * MiB, 0) == p);
  hugepool_free(p);
  hugepool_trim();
}

TEST_CASE("a node that does not exist is EINVAL with a clear message", "[numa]") {
  fresh_state();
  StderrCapture err;
  errno = 0;
  CHECK(hugepool_alloc_on_node(2 * MiB, 999) == nullptr);
  CHECK(errno == EINVAL);
  errno = 0;
  CHECK(hugepool_alloc_on_node(2 * MiB, -7) == nullptr);
  CHECK(errno == EINVAL);
  CHECK(err.text().find("NUMA node 999 does not exist") != std::string::npos);
}

TEST_CASE("a node-bound request larger than the node's pool is ENOMEM, not SIGBUS", "[numa]") {
  kv::PoolGuard pool(2);
  fresh_state();
  StderrCapture err;
  errno = 0;
  CHECK(hugepool_alloc_on_node(8 * MiB, 0) == nullptr);
  CHECK(errno == ENOMEM);
  CHECK(err.text().find("on node 0") != std::string::npos);
  CHECK(kv::huge_rsvd() == 0);
}
