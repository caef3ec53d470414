// SPDX-License-Identifier: BSD-3-Clause
// The helper's parsers: every value a user or an admin can hand it.
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "reserve.h"

namespace {
int args(std::vector<std::string> words, reserve_request &rq) {
  std::vector<char *> argv;
  static std::string name = "hugepool-reserve";
  argv.push_back(&name[0]);
  for (auto &w : words) argv.push_back(&w[0]);
  argv.push_back(nullptr);
  const char *err = nullptr;
  int rc = reserve_parse_args(static_cast<int>(argv.size() - 1), argv.data(), &rq, &err);
  if (rc != 0) REQUIRE(err != nullptr);
  return rc;
}
int conf(const std::string &text, reserve_config &c) {
  char err[160];
  return reserve_parse_config(text.data(), text.size(), &c, err, sizeof err);
}
const char *kGood = "max_pages 100\nmax_fraction 0.5\nmin_free_mb 1024\ngroup users\n";
}  // namespace

TEST_CASE("counts accept only plain decimal numbers in range") {
  unsigned long long v = 0;
  CHECK(reserve_parse_count("0", 10, &v) == 0);
  CHECK(v == 0);
  CHECK(reserve_parse_count("10", 10, &v) == 0);
  CHECK(v == 10);
  CHECK(reserve_parse_count("18446744073709551615", ~0ULL, &v) == 0);
  for (const char *bad : {"", "11", "-1", "+1", "01", "00", " 1", "1 ", "1\n", "0x1", "1e1", "1.0", "٣", "9a",
                          "18446744073709551616", "99999999999999999999999"})
    CHECK(reserve_parse_count(bad, bad[0] == '1' && bad[1] == '8' ? ~0ULL : 10, &v) == -1);
  CHECK(reserve_parse_count("7", 5, &v) == -1);
}

TEST_CASE("arguments: PAGES with --node and --size, or exactly one mode") {
  reserve_request rq;
  REQUIRE(args({"2000"}, rq) == 0);
  CHECK(rq.action == ACT_GRANT);
  CHECK(rq.pages == 2000);
  CHECK(rq.node == -1);
  CHECK(rq.size_kb == RESERVE_PAGE_2M);
  REQUIRE(args({"--size", "1G", "3", "--node", "1"}, rq) == 0);
  CHECK(rq.size_kb == RESERVE_PAGE_1G);
  CHECK(rq.node == 1);
  CHECK(rq.pages == 3);
  // --size goes through the project's one size parser: any spelling of 2M or 1G.
  REQUIRE(args({"1", "--size", "2048K"}, rq) == 0);
  CHECK(rq.size_kb == RESERVE_PAGE_2M);
  REQUIRE(args({"1", "--size", "1GiB"}, rq) == 0);
  CHECK(rq.size_kb == RESERVE_PAGE_1G);
  REQUIRE(args({"--status"}, rq) == 0);
  CHECK(rq.action == ACT_STATUS);
  REQUIRE(args({"--release"}, rq) == 0);
  CHECK(rq.action == ACT_RELEASE);
  REQUIRE(args({"--help"}, rq) == 0);
  CHECK(rq.action == ACT_HELP);
}

TEST_CASE("arguments: everything else is refused") {
  reserve_request rq;
  const std::vector<std::vector<std::string>> bad = {{},
                                                     {"0"},
                                                     {"-5"},
                                                     {"10000001"},
                                                     {"1", "2"},
                                                     {"1", "--node"},
                                                     {"1", "--node", "1024"},
                                                     {"1", "--node", "-1"},
                                                     {"1", "--node", "01"},
                                                     {"1", "--size"},
                                                     {"1", "--size", "4M"},
                                                     {"1", "--size", "2.0M"},
                                                     {"1", "--size", "2097153"},
                                                     {"1", "--size", "2M", "--size", "2M"},
                                                     {"1", "--node", "0", "--node", "0"},
                                                     {"--status", "1"},
                                                     {"--status", "--release"},
                                                     {"--release", "--node", "0"},
                                                     {"--nodes", "1"},
                                                     {"--size=2M", "1"},
                                                     {"-h"},
                                                     {"--test-env"}};
  for (auto &b : bad) {
    INFO("args: " << b.size());
    CHECK(args(b, rq) == -1);
  }
}

TEST_CASE("config: all four limits are required, require_job is optional") {
  reserve_config c;
  REQUIRE(conf(kGood, c) == 0);
  CHECK(c.max_pages == 100);
  CHECK(c.max_permille == 500);
  CHECK(c.min_free_mb == 1024);
  CHECK(std::string(c.group) == "users");
  CHECK(c.require_job == 0);
  REQUIRE(conf(std::string(kGood) + "# comment\n\n  require_job yes  \n", c) == 0);
  CHECK(c.require_job == 1);
  REQUIRE(conf("max_pages 1\nmax_fraction 1\nmin_free_mb 0\ngroup g", c) == 0);
  CHECK(c.max_permille == 1000);
  REQUIRE(conf("max_pages 1\nmax_fraction 0.125\nmin_free_mb 0\ngroup g", c) == 0);
  CHECK(c.max_permille == 125);
  CHECK(conf("max_pages 1\nmax_fraction 0.5\nmin_free_mb 0\n", c) == -1);
}

TEST_CASE("config: require_isolation and default_job_pages are optional") {
  reserve_config c;
  REQUIRE(conf(kGood, c) == 0);
  CHECK(c.require_isolation == 0);
  CHECK(c.default_job_pages_set == 0);
  REQUIRE(conf(std::string(kGood) + "require_isolation yes\ndefault_job_pages 0\n", c) == 0);
  CHECK(c.require_isolation == 1);
  CHECK(c.default_job_pages_set == 1);
  CHECK(c.default_job_pages == 0);
  REQUIRE(conf(std::string(kGood) + "default_job_pages 16\nrequire_isolation no\n", c) == 0);
  CHECK(c.default_job_pages == 16);
  CHECK(c.require_isolation == 0);
  for (const char *extra :
       {"require_isolation 1\n", "default_job_pages -1\n", "default_job_pages 01\n", "default_job_pages 10000001\n",
        "require_isolation yes\nrequire_isolation yes\n", "default_job_pages 1\ndefault_job_pages 1\n"})
    CHECK(conf(std::string(kGood) + extra, c) == -1);
}

TEST_CASE("config: bad values, unknown and repeated keys are refused") {
  reserve_config c;
  for (const char *extra : {"max_pages 5\n", "bogus 1\n", "require_job maybe\n", "require_job\n", "x y z\n"})
    CHECK(conf(std::string(kGood) + extra, c) == -1);
  for (const char *frac : {"0", "0.0", "1.5", "2", ".5", "0.", "0.1234", "-0.5", "0,5", "1.001"})
    CHECK(conf(std::string("max_pages 1\nmin_free_mb 0\ngroup g\nmax_fraction ") + frac + "\n", c) == -1);
  for (const char *grp :
       {"-x", "a b", "a/b", "a;b", "0123456789012345678901234567890123456789012345678901234567890123"})
    CHECK(conf(std::string("max_pages 1\nmin_free_mb 0\nmax_fraction 1\ngroup ") + grp + "\n", c) == -1);
  CHECK(conf(std::string(kGood) + std::string(300, 'x') + "\n", c) == -1);
  CHECK(conf(std::string("max_pages 1\0\nmax_fraction 1\nmin_free_mb 0\ngroup g\n", 47), c) == -1);
  CHECK(conf(std::string(5000, '#'), c) == -1);
}

TEST_CASE("grant table round-trips and rejects damage") {
  reserve_grants gs{};
  static char buf[RESERVE_GRANTS_MAX];
  gs.n = 2;
  gs.g[0] = reserve_grant_entry{65534, -1, RESERVE_PAGE_2M, 100};
  gs.g[1] = reserve_grant_entry{1000, 1, RESERVE_PAGE_1G, 2};
  size_t len = reserve_format_grants(&gs, buf, sizeof buf);
  REQUIRE(len > 0);
  reserve_grants back{};
  REQUIRE(reserve_parse_grants(buf, len, &back) == 0);
  REQUIRE(back.n == 2);
  CHECK(back.g[0].uid == 65534);
  CHECK(back.g[0].node == -1);
  CHECK(back.g[1].node == 1);
  CHECK(back.g[1].size_kb == RESERVE_PAGE_1G);
  CHECK(back.g[1].pages == 2);
  CHECK(reserve_parse_grants("", 0, &back) == 0);
  CHECK(back.n == 0);
  // A complete rewrite followed by an old tail not yet truncated: the new table.
  std::string table(buf, len);
  const std::string tail = table + "7 any 2048 9\nend 0123456789abcdef\n";
  REQUIRE(reserve_parse_grants(tail.data(), tail.size(), &back) == 0);
  CHECK(back.n == 2);
  for (const char *bad : {"5 any 2048 3\n", "5 any 4096 3\nend\n", "5 any 2048 0\nend\n", "-5 any 2048 3\nend\n",
                          "5 1024 2048 3\nend\n", "5 any 2048 3 4\nend\n", "5 any 2048\nend\n", "end",
                          "5 any 2048 3\nend\n", "5 any 2048 3\nend 0000000000000000\n"})
    CHECK(reserve_parse_grants(bad, std::strlen(bad), &back) == -1);
  CHECK(reserve_format_grants(&gs, buf, 20) == 0);
}

// What an RLIMIT_FSIZE-cut (or killed) rewrite leaves: the new table's first
// bytes over the old table.  Every cut must read as corrupt, never as another
// valid table (before the checksum, some cuts duplicated or dropped lines).
TEST_CASE("grant table torn at any offset is corrupt") {
  static char oldbuf[RESERVE_GRANTS_MAX], newbuf[RESERVE_GRANTS_MAX];
  reserve_grants before{}, after{}, back{};
  before.n = 4;
  before.g[0] = reserve_grant_entry{1001, -1, RESERVE_PAGE_2M, 4096};
  before.g[1] = reserve_grant_entry{1002, -1, RESERVE_PAGE_2M, 4096};
  before.g[2] = reserve_grant_entry{1003, -1, RESERVE_PAGE_2M, 10};
  before.g[3] = reserve_grant_entry{1004, 0, RESERVE_PAGE_2M, 7};
  after = before;
  after.g[0].pages = 0;  // user 1001 released: every later line moves up
  size_t olen = reserve_format_grants(&before, oldbuf, sizeof oldbuf);
  size_t nlen = reserve_format_grants(&after, newbuf, sizeof newbuf);
  REQUIRE(olen > nlen);
  size_t same = 0;  // bytes both tables share at the start: a cut there leaves the old table
  while (oldbuf[same] == newbuf[same]) same++;
  for (size_t cut = 1; cut < nlen; cut++) {
    std::string torn(newbuf, cut);
    torn.append(oldbuf + cut, olen - cut);
    INFO("cut at " << cut);
    if (cut <= same) {
      CHECK(torn == std::string(oldbuf, olen));
    } else {
      CHECK(reserve_parse_grants(torn.data(), torn.size(), &back) == -1);
    }
  }
  std::string whole(newbuf, nlen);
  whole.append(oldbuf + nlen, olen - nlen);
  REQUIRE(reserve_parse_grants(whole.data(), whole.size(), &back) == 0);
  CHECK(back.n == 3);
}

TEST_CASE("grant table with a duplicate entry is corrupt") {
  static char buf[RESERVE_GRANTS_MAX];
  reserve_grants gs{}, back{};
  gs.n = 2;
  gs.g[0] = reserve_grant_entry{1002, -1, RESERVE_PAGE_2M, 10};
  gs.g[1] = reserve_grant_entry{1002, -1, RESERVE_PAGE_2M, 10};
  size_t len = reserve_format_grants(&gs, buf, sizeof buf);
  REQUIRE(len > 0);
  CHECK(reserve_parse_grants(buf, len, &back) == -1);
  gs.g[1].node = 0;  // same user, another pool: fine
  len = reserve_format_grants(&gs, buf, sizeof buf);
  CHECK(reserve_parse_grants(buf, len, &back) == 0);
}

// The intent record of a release in progress: its own keyword, the grant
// after it may be 0, the pool held at least the pages to go; one intent of
// either kind at most.
TEST_CASE("grant table release intent record") {
  static char buf[RESERVE_GRANTS_MAX];
  reserve_grants gs{}, back{};
  gs.intent = reserve_intent{RESERVE_INTENT_RELEASE, 1003, -1, RESERVE_PAGE_2M, 9, 4, 0};
  size_t len = reserve_format_grants(&gs, buf, sizeof buf);
  REQUIRE(len > 0);
  CHECK(std::string(buf, len).find("\nrelease 1003 any 2048 9 4 0\nend ") != std::string::npos);
  REQUIRE(reserve_parse_grants(buf, len, &back) == 0);
  CHECK(back.n == 0);
  CHECK(back.intent.active == RESERVE_INTENT_RELEASE);
  CHECK(back.intent.before == 9);
  CHECK(back.intent.delta == 4);
  CHECK(back.intent.pages == 0);
  char sealed[256];
  for (const char *bad : {"release 5 any 2048 3 0 1\n", "release 5 any 2048 3 4 0\n", "release 5 any 4096 3 1 1\n",
                          "release 5 any 2048 3 1\n", "release 5 any 2048 3 1 1\nintent 6 any 2048 3 1 1\n",
                          "intent 6 any 2048 3 1 1\nrelease 5 any 2048 3 1 1\n"}) {
    std::string body(bad);
    int n = snprintf(sealed, sizeof sealed, "%send %016llx\n", bad, reserve_grants_checksum(body.data(), body.size()));
    INFO(bad);
    CHECK(reserve_parse_grants(sealed, (size_t)n, &back) == -1);
  }
}

// The intent record of a grant in progress: one line, every field checked.
TEST_CASE("grant table intent record") {
  static char buf[RESERVE_GRANTS_MAX];
  reserve_grants gs{}, back{};
  gs.n = 1;
  gs.g[0] = reserve_grant_entry{1002, -1, RESERVE_PAGE_2M, 10};
  gs.intent = reserve_intent{1, 1003, 1, RESERVE_PAGE_1G, 7, 2, 5};
  size_t len = reserve_format_grants(&gs, buf, sizeof buf);
  REQUIRE(len > 0);
  CHECK(std::string(buf, len).find("\nintent 1003 1 1048576 7 2 5\nend ") != std::string::npos);
  REQUIRE(reserve_parse_grants(buf, len, &back) == 0);
  CHECK(back.n == 1);
  CHECK(back.intent.active == 1);
  CHECK(back.intent.uid == 1003);
  CHECK(back.intent.node == 1);
  CHECK(back.intent.size_kb == RESERVE_PAGE_1G);
  CHECK(back.intent.before == 7);
  CHECK(back.intent.delta == 2);
  CHECK(back.intent.pages == 5);
  gs.intent.active = 0;
  len = reserve_format_grants(&gs, buf, sizeof buf);
  REQUIRE(reserve_parse_grants(buf, len, &back) == 0);
  CHECK(back.intent.active == 0);
  char sealed[256];
  for (const char *bad : {"intent 5 any 2048 3 0 1\n", "intent 5 any 2048 3 4 2\n", "intent 5 any 4096 3 1 1\n",
                          "intent 5 any 2048 3 1\n", "intent 5 any 2048 3 1 1 1\n", "intent -5 any 2048 3 1 1\n",
                          "intent 5 any 2048 3 1 1\nintent 6 any 2048 3 1 1\n"}) {
    std::string body(bad);
    int n = snprintf(sealed, sizeof sealed, "%send %016llx\n", bad, reserve_grants_checksum(body.data(), body.size()));
    INFO(bad);
    CHECK(reserve_parse_grants(sealed, (size_t)n, &back) == -1);
  }
}

// A table cut short at any length, or with any one byte changed, is either
// refused or read back as the very same table: never a different valid one
// (what a kill in the middle of a write, or a damaged disk, can leave).
TEST_CASE("grant table damaged anywhere is never a different valid table") {
  static char buf[RESERVE_GRANTS_MAX], bad[RESERVE_GRANTS_MAX];
  static reserve_grants gs{}, back{};
  gs.n = 3;
  gs.g[0] = reserve_grant_entry{1002, -1, RESERVE_PAGE_2M, 10};
  gs.g[1] = reserve_grant_entry{1003, 1, RESERVE_PAGE_1G, 2};
  gs.g[2] = reserve_grant_entry{65534, 0, RESERVE_PAGE_2M, 123};
  gs.intent = reserve_intent{RESERVE_INTENT_RELEASE, 1002, -1, RESERVE_PAGE_2M, 40, 5, 10};
  size_t len = reserve_format_grants(&gs, buf, sizeof buf);
  REQUIRE(len > 0);
  auto same = [&](const reserve_grants &b) {
    if (b.n != gs.n || b.intent.active != gs.intent.active || b.intent.before != gs.intent.before ||
        b.intent.delta != gs.intent.delta || b.intent.pages != gs.intent.pages || b.intent.uid != gs.intent.uid)
      return false;
    for (size_t i = 0; i < b.n; i++)
      if (b.g[i].uid != gs.g[i].uid || b.g[i].node != gs.g[i].node || b.g[i].size_kb != gs.g[i].size_kb ||
          b.g[i].pages != gs.g[i].pages)
        return false;
    return true;
  };
  size_t refused = 0, tried = 0;
  for (size_t cut = 1; cut < len; cut++, tried++) { // (0 bytes: the empty table a fresh install has)
    INFO("cut at " << cut);
    int rc = reserve_parse_grants(buf, cut, &back);
    CHECK((rc == -1 || same(back)));
    refused += rc == -1;
  }
  for (size_t at = 0; at < len; at++) {
    for (int bit = 0; bit < 8; bit++, tried++) {
      memcpy(bad, buf, len);
      bad[at] = (char)(bad[at] ^ (1 << bit));
      INFO("byte " << at << " bit " << bit);
      int rc = reserve_parse_grants(bad, len, &back);
      CHECK((rc == -1 || same(back)));
      refused += rc == -1;
    }
  }
  INFO("refused " << refused << " of " << tried);
  CHECK(refused == tried);
}
