// SPDX-License-Identifier: BSD-3-Clause
// Options: read once from HUGEPOOL_* variables, K/M/G sizes, and a warning
// naming the variable and the default for every bad value.
#include <catch2/catch.hpp>

#include "core_test.hpp"
#include "options.h"
#include "size.h"

#include <sstream>
#include <vector>

using namespace test;

TEST_CASE("size syntax accepts K/M/G/T suffixes and rejects garbage", "[options]") {
  unsigned long long v = 0;
  REQUIRE(hp_parse_size("4096", &v) == 0);
  CHECK(v == 4096);
  REQUIRE(hp_parse_size("64M", &v) == 0);
  CHECK(v == 64ULL << 20);
  REQUIRE(hp_parse_size("2g", &v) == 0);
  CHECK(v == 2ULL << 30);
  REQUIRE(hp_parse_size("1GiB", &v) == 0);
  CHECK(v == 1ULL << 30);
  REQUIRE(hp_parse_size("512kb", &v) == 0);
  CHECK(v == 512ULL << 10);
  REQUIRE(hp_parse_size("3T", &v) == 0);
  CHECK(v == 3ULL << 40);
  for (const char *bad : {"", "-1", "+5", "1.5G", "12Q", "G", "0x10", "99999999999999999999", "20000000T",
                          "5 M", "4M junk"}) {
    INFO(bad);
    CHECK(hp_parse_size(bad, &v) == -1);
  }
}

// The README's option table is generated from, and checked against, the
// library's one option table (lib/option-table.c).
static std::string readme_row(hp_option_id id) {
  const hp_option_desc *d = option_desc(id);
  char def[32], pre[32];
  option_format(id, d->default_value, def, sizeof(def));
  option_format(id, d->preload_default, pre, sizeof(pre));
  std::string cell = d->type == HP_TYPE_TEXT ? "—" : "`" + std::string(def) + "`";
  if (std::string(def) != pre) cell += " (preload: `" + std::string(pre) + "`)";
  return "| `" + std::string(d->name) + "` | " + cell + " | " + d->help + " |";
}

TEST_CASE("the README's option table says what the option table says", "[options]") {
  std::istringstream readme(kv::read_file(HUGEPOOL_SOURCE_DIR "/README.md"));
  std::vector<std::string> rows, want;
  for (std::string line; std::getline(readme, line);) {
    if (line.rfind("| `HUGEPOOL_", 0) == 0) rows.push_back(line);
  }
  for (int id = 0; id < HP_OPT_COUNT; id++) want.push_back(readme_row(static_cast<hp_option_id>(id)));
  REQUIRE(rows.size() == want.size());
  for (size_t i = 0; i < want.size(); i++) CHECK(rows[i] == want[i]);
}

static std::string probe(const std::string &env, const std::string &args = "") {
  std::string out;
  int rc = run("env " + env + " " HUGEPOOL_PROBE " " + args, out);
  INFO(out);
  CHECK(rc == 0);
  return out;
}

TEST_CASE("HUGEPOOL_* variables set the policy, page size and cache limits", "[options]") {
  kv::PoolGuard pool(4);
  std::string out = probe("HUGEPOOL_POLICY=small HUGEPOOL_CACHE_SLOTS=7 HUGEPOOL_CACHE_BYTES=96M");
  CHECK(out.find("policy small page 2097152 slots 7 bytes 100663296") != std::string::npos);
  CHECK(out.find("hugepool[") == std::string::npos);  // no warning for good values
  out = probe("HUGEPOOL_POLICY=THP");
  CHECK(out.find("policy thp") != std::string::npos);
}

TEST_CASE("a bad value warns, names the variable and the default, and the default is used", "[options]") {
  kv::PoolGuard pool(4);
  std::string out = probe("HUGEPOOL_CACHE_BYTES=lots HUGEPOOL_CACHE_SLOTS=-3 HUGEPOOL_POLICY=maybe");
  CHECK(out.find("HUGEPOOL_CACHE_BYTES='lots' is not valid") != std::string::npos);
  CHECK(out.find("using the default 1G") != std::string::npos);
  CHECK(out.find("HUGEPOOL_CACHE_SLOTS='-3' is not valid") != std::string::npos);
  CHECK(out.find("using the default 64") != std::string::npos);
  CHECK(out.find("HUGEPOOL_POLICY='maybe' is not valid (expected strict|thp|small); using the default strict") !=
        std::string::npos);
  CHECK(out.find("policy strict page 2097152 slots 64 bytes 1073741824") != std::string::npos);
  out = probe("HUGEPOOL_WARN=0 HUGEPOOL_CACHE_BYTES=lots");  // silenced, even at start-up
  CHECK(out.find("hugepool[") == std::string::npos);
  CHECK(out.find("bytes 1073741824") != std::string::npos);
  out = probe("HUGEPOOL_PAGE_SIZE=4M HUGEPOOL_CACHE_SLOTS=2000000");
  CHECK(out.find("HUGEPOOL_PAGE_SIZE='4M' is not valid (expected 2M or 1G)") != std::string::npos);
  CHECK(out.find("HUGEPOOL_CACHE_SLOTS='2000000' is not valid") != std::string::npos);
}

TEST_CASE("HUGEPOOL_STATS prints text or JSON at exit, HUGEPOOL_STATS_FILE writes a file per process",
          "[options][stats]") {
  kv::PoolGuard pool(4);
  std::string out = probe("HUGEPOOL_STATS=1", "2097152 3");
  CHECK(out.find("hugepool statistics") != std::string::npos);
  CHECK(out.find("cache hits                               2") != std::string::npos);
  out = probe("HUGEPOOL_STATS=json", "2097152 3");
  CHECK(out.find("\"cache_hits\": 2") != std::string::npos);
  CHECK(out.find("\"allocs\": 3") != std::string::npos);

  char dir[] = "/tmp/hugepool-statsXXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  out = probe(std::string("PMI_RANK=5 HUGEPOOL_STATS=json HUGEPOOL_STATS_FILE=") + dir + "/rank%r.json",
              "2097152 2");
  CHECK(out.find("\"allocs\"") == std::string::npos);  // not on stderr
  std::string file = kv::read_file(std::string(dir) + "/rank5.json");
  CHECK(file.find("\"allocs\": 2") != std::string::npos);
  std::string ignore;
  run(std::string("rm -rf ") + dir, ignore);
}

TEST_CASE("a number out of range is refused with its range and unit", "[options]") {
  kv::PoolGuard pool(4);
  std::string out = probe("HUGEPOOL_CACHE_SLOTS=2000000 HUGEPOOL_CACHE_BYTES=2000T");
  CHECK(out.find("HUGEPOOL_CACHE_SLOTS='2000000' is not valid (expected a whole number of buffers from 0 to "
                 "1048576); using the default 64") != std::string::npos);
  CHECK(out.find("HUGEPOOL_CACHE_BYTES='2000T' is not valid (expected a size in bytes from 0 to 1024T") !=
        std::string::npos);
  CHECK(out.find("in range") == std::string::npos);
  // Every numeric option names its range and unit, in the library and the preload.
  for (int id = 0; id < HP_OPT_COUNT; id++) {
    const hp_option_desc *d = option_desc(static_cast<hp_option_id>(id));
    if (d->type != HP_TYPE_SIZE && d->type != HP_TYPE_NUMBER) continue;
    for (bool preload : {false, true}) {
      char expected[96] = "";
      long long v = 0;
      INFO(d->name);
      REQUIRE(option_parse(static_cast<hp_option_id>(id), "99999999999999999T", preload, &v, expected,
                           sizeof(expected)) == -1);
      std::string e = expected;
      INFO(e);
      if (id == HP_OPT_PAGE_SIZE) {
        CHECK(e == "2M or 1G");
        continue;
      }
      CHECK(e.find(" from ") != std::string::npos);
      CHECK(e.find(" to ") != std::string::npos);
      CHECK(e.find(d->type == HP_TYPE_SIZE ? "bytes" : d->unit) != std::string::npos);
    }
  }
  char expected[96] = "";
  long long v = 0;
  CHECK(option_parse(HP_OPT_THRESHOLD, "1K", true, &v, expected, sizeof(expected)) == -1);
  CHECK(std::string(expected).find("from 64K to ") != std::string::npos);
}

TEST_CASE("a switch takes yes/no, true/false, on/off in any case and 1/0", "[options]") {
  int switches = 0;
  for (int id = 0; id < HP_OPT_COUNT; id++) {
    const hp_option_desc *d = option_desc(static_cast<hp_option_id>(id));
    if (d->type != HP_TYPE_CHOICE || std::string(d->choices).rfind("0|1", 0) != 0) continue;
    switches++;
    INFO(d->name);
    for (const char *on : {"1", "yes", "YES", "True", "on", "ON"}) {
      long long v = -1;
      char expected[96];
      CHECK(option_parse(static_cast<hp_option_id>(id), on, true, &v, expected, sizeof(expected)) == 0);
      CHECK(v == 1);
    }
    for (const char *off : {"0", "no", "No", "false", "FALSE", "off", "Off"}) {
      long long v = -1;
      char expected[96];
      CHECK(option_parse(static_cast<hp_option_id>(id), off, false, &v, expected, sizeof(expected)) == 0);
      CHECK(v == 0);
    }
    long long v = -1;
    char expected[96] = "";
    CHECK(option_parse(static_cast<hp_option_id>(id), "maybe", true, &v, expected, sizeof(expected)) == -1);
    CHECK(std::string(expected).find("yes/no") != std::string::npos);
  }
  CHECK(switches >= 4);  // HUGEPOOL_STATS, _WARN, _SMALL_HEAP, _MPI_WIN_SHARED
  kv::PoolGuard pool(4);
  std::string out = probe("HUGEPOOL_STATS=yes", "2097152 1");
  CHECK(out.find("hugepool statistics") != std::string::npos);
  out = probe("HUGEPOOL_STATS=On HUGEPOOL_WARN=off HUGEPOOL_CACHE_BYTES=lots", "2097152 1");
  CHECK(out.find("hugepool statistics") != std::string::npos);
  CHECK(out.find("is not valid") == std::string::npos);  // HUGEPOOL_WARN=off silenced it
}

TEST_CASE("a process that made no hugepool allocation prints no statistics", "[options][stats]") {
  kv::PoolGuard pool(4);
  std::string out = probe("HUGEPOOL_STATS=1", "2097152 0");
  CHECK(out.find("policy strict") != std::string::npos);
  CHECK(out.find("hugepool statistics") == std::string::npos);
  out = probe("HUGEPOOL_STATS=json", "2097152 0");
  CHECK(out.find("\"allocs\"") == std::string::npos);
  // Sizes read in human units in the text, in bytes in the JSON.
  out = probe("HUGEPOOL_STATS=1", "4194304 1");
  CHECK(out.find("bytes mapped (peak)                      4 MiB") != std::string::npos);
  out = probe("HUGEPOOL_STATS=json", "4194304 1");
  CHECK(out.find("\"bytes_mapped_peak\": 4194304") != std::string::npos);
}

TEST_CASE("HUGEPOOL_PREFAULT sets how much of a new buffer is faulted in when it is handed out", "[options]") {
  kv::PoolGuard pool(8);
  // 8 MiB, before the probe touches it (its own smaps): an explicit value
  // applies on any machine, in whole pages (5M: two), and never beyond the buffer.
  CHECK(probe("HUGEPOOL_PREFAULT=0", "8388608 1 untouched").find("faulted_kb 0\n") != std::string::npos);
  CHECK(probe("HUGEPOOL_PREFAULT=5M", "8388608 1 untouched").find("faulted_kb 4096\n") != std::string::npos);
  CHECK(probe("HUGEPOOL_PREFAULT=1G", "8388608 1 untouched").find("faulted_kb 8192\n") != std::string::npos);
  std::string out = probe("HUGEPOOL_PREFAULT=lots", "8388608 1 untouched");
  CHECK(out.find("HUGEPOOL_PREFAULT='lots' is not valid (expected a size in bytes from 0 to 1024T") !=
        std::string::npos);
  CHECK(out.find("using the default 32M") != std::string::npos);
}
