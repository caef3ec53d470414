// SPDX-License-Identifier: BSD-3-Clause
// Statistics: what hugepool_get_stats counts (allocations, hits, misses,
// slack, fallbacks) and how hugepool_stats_snprint prints it.
#include <catch2/catch.hpp>
#include <cstring>
#include <string>

#include "core_test.hpp"

using namespace test;

TEST_CASE("statistics count allocations, hits, slack and print as text and JSON", "[stats]") {
  kv::PoolGuard pool(4);
  fresh_state();
  hugepool_stats a;
  hugepool_get_stats(&a);
  void *p = hugepool_alloc(3 * MiB);  // 1 MB of slack
  REQUIRE(p != nullptr);
  hugepool_stats b;
  hugepool_get_stats(&b);
  CHECK(b.allocs == a.allocs + 1);
  CHECK(b.bytes_slack == a.bytes_slack + 1 * MiB);
  CHECK(b.bytes_live == a.bytes_live + 4 * MiB);
  CHECK(b.bytes_mapped_peak >= 4 * MiB);
  hugepool_free(p);
  p = hugepool_alloc(4 * MiB);
  hugepool_stats c;
  hugepool_get_stats(&c);
  CHECK(c.cache_hits == b.cache_hits + 1);

  char buf[4096];
  int n = hugepool_stats_snprint(buf, sizeof(buf), HUGEPOOL_STATS_JSON);
  REQUIRE(n > 0);
  std::string json(buf);
  CHECK(json.front() == '{');
  CHECK(json.find("\"cache_hits\": " + std::to_string(c.cache_hits)) != std::string::npos);
  CHECK(json.find("\"bytes_slack\": 0") != std::string::npos);
  CHECK(json.find("}\n") == json.size() - 2);
  n = hugepool_stats_snprint(buf, sizeof(buf), HUGEPOOL_STATS_TEXT);
  CHECK(std::string(buf).find("cache hits") != std::string::npos);
  char tiny[8];
  CHECK(hugepool_stats_snprint(tiny, sizeof(tiny), HUGEPOOL_STATS_TEXT) == n);
  CHECK(std::strlen(tiny) == 7);
  hugepool_free(p);
  hugepool_trim();
}

TEST_CASE("hits and misses count allocations, not lookups, also on the fallback path", "[stats]") {
  kv::PoolGuard pool(0);
  fresh_state();
  hugepool_stats a;
  hugepool_get_stats(&a);
  StderrCapture err;
  CHECK(hugepool_alloc(2 * MiB) == nullptr);  // strict: a failure, no miss
  REQUIRE(hugepool_set_policy(HUGEPOOL_POLICY_SMALL) == 0);
  void *p = hugepool_alloc(2 * MiB);  // fallback: mapped, one miss
  REQUIRE(p != nullptr);
  hugepool_free(p);
  void *q = hugepool_alloc(2 * MiB);  // fallback block from the cache: one hit
  CHECK(q == p);
  hugepool_free(q);
  hugepool_stats b;
  hugepool_get_stats(&b);
  CHECK(b.failures - a.failures == 1);
  CHECK(b.cache_misses - a.cache_misses == 1);
  CHECK(b.cache_hits - a.cache_hits == 1);
  CHECK(b.allocs - a.allocs == 2);
  CHECK(b.fallbacks_small - a.fallbacks_small == 2);
  fresh_state();
}
