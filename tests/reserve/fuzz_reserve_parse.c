/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target for every parser that reads untrusted text: the
 * helper's arguments, the site config, the grant table and plain counts.
 * The first byte picks the parser; invariants of the result are checked. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reserve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                \
  do {                          \
    if (!(c)) __builtin_trap(); \
  } while (0)

static void fuzz_args(const char *d, size_t n) {
  char buf[1024], *argv[18];
  int argc = 1;
  size_t i = 0;
  struct reserve_request rq;
  const char *err = NULL;
  if (n >= sizeof buf) return;
  memcpy(buf, d, n);
  buf[n] = '\0';
  argv[0] = "hugepool-reserve";
  while (i < n && argc < 17) {
    argv[argc++] = buf + i;
    i += strlen(buf + i) + 1;
  }
  argv[argc] = NULL;
  if (reserve_parse_args(argc, argv, &rq, &err) != 0) {
    CHECK(err != NULL);
    return;
  }
  CHECK(rq.node >= -1 && rq.node <= RESERVE_MAX_NODE);
  CHECK(rq.size_kb == RESERVE_PAGE_2M || rq.size_kb == RESERVE_PAGE_1G);
  if (rq.action == ACT_GRANT) CHECK(rq.pages >= 1 && rq.pages <= RESERVE_MAX_PAGES);
  /* The parsers know no test-build option (--test-env is the fake helper's main's). */
  CHECK(rq.action == ACT_GRANT || rq.action == ACT_STATUS || rq.action == ACT_RELEASE || rq.action == ACT_HELP);
}

static void fuzz_config(const char *d, size_t n) {
  struct reserve_config c;
  char err[160];
  if (reserve_parse_config(d, n, &c, err, sizeof err) != 0) {
    CHECK(memchr(err, '\0', sizeof err) != NULL);
    return;
  }
  CHECK(c.max_permille >= 1 && c.max_permille <= 1000);
  CHECK(c.max_pages <= RESERVE_MAX_PAGES);
  CHECK(c.group[0] != '\0' && c.group[0] != '-' && strlen(c.group) < sizeof c.group);
  CHECK(c.require_job == 0 || c.require_job == 1);
}

static void fuzz_grants(const char *d, size_t n) {
  static struct reserve_grants a, b;
  static char buf[RESERVE_GRANTS_MAX];
  static char sealed[RESERVE_GRANTS_MAX + 64];
  size_t len, i;
  if (reserve_parse_grants(d, n, &a) != 0) {
    /* Random bytes rarely carry a valid checksum: also try the input sealed
     * with its own end line, so the line parser is fuzzed too. */
    if (n + 30 > sizeof sealed) return;
    memcpy(sealed, d, n);
    len = n + (size_t)snprintf(sealed + n, sizeof sealed - n, "end %016llx\n", reserve_grants_checksum(d, n));
    if (reserve_parse_grants(sealed, len, &a) != 0) return;
  }
  len = reserve_format_grants(&a, buf, sizeof buf);
  if (len == 0) return; /* too many entries for one table: refused by the writer */
  CHECK(reserve_parse_grants(buf, len, &b) == 0);
  CHECK(a.n == b.n);
  for (i = 0; i < a.n; i++) {
    CHECK(a.g[i].uid == b.g[i].uid && a.g[i].node == b.g[i].node);
    CHECK(a.g[i].size_kb == b.g[i].size_kb && a.g[i].pages == b.g[i].pages);
  }
  CHECK(a.intent.active == b.intent.active);
  CHECK(!a.intent.active ||
        (a.intent.uid == b.intent.uid && a.intent.node == b.intent.node && a.intent.size_kb == b.intent.size_kb &&
         a.intent.before == b.intent.before && a.intent.delta == b.intent.delta && a.intent.pages == b.intent.pages));
}

static void fuzz_count(const char *d, size_t n) {
  char s[40], back[40];
  unsigned long long v, max = ~0ULL;
  if (n >= sizeof s) return;
  memcpy(s, d, n);
  s[n] = '\0';
  if (reserve_parse_count(s, max, &v) != 0) return;
  snprintf(back, sizeof back, "%llu", v);
  CHECK(strcmp(back, s) == 0); /* only the canonical spelling is accepted */
  CHECK(reserve_parse_count(s, v, &v) == 0);
  if (v > 0) CHECK(reserve_parse_count(s, v - 1, &v) != 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *d = (const char *)data + 1;
  if (size == 0) return 0;
  switch (data[0] % 4) {
    case 0: fuzz_args(d, size - 1); break;
    case 1: fuzz_config(d, size - 1); break;
    case 2: fuzz_grants(d, size - 1); break;
    default: fuzz_count(d, size - 1); break;
  }
  return 0;
}
