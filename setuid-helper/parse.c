/* SPDX-License-Identifier: BSD-3-Clause */
#define _DEFAULT_SOURCE /* strtok_r */
/* Pure parsers for hugepool-reserve: they read only their arguments. */
#include <stdio.h>
#include <string.h>

#include "reserve.h"
#include "../lib/size.h" /* by its path: lib/ is on no privileged include path */

int reserve_parse_count(const char *s, unsigned long long max, unsigned long long *out) {
  unsigned long long v = 0;
  size_t i;
  if (s == NULL || s[0] == '\0') return -1;
  if (s[0] == '0' && s[1] != '\0') return -1; /* no leading zeros: "010" is not octal, not 10 */
  for (i = 0; s[i] != '\0'; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    if (i >= 20) return -1;
    unsigned d = (unsigned)(s[i] - '0');
    if (v > max / 10) return -1;
    v *= 10;
    if (d > max - v) return -1;
    v += d;
  }
  *out = v;
  return 0;
}

/* A page size through the project's one size parser (lib/size.c): 2M or 1G
 * however spelt ("2M", "2048K", "1GiB"); any other size is refused. */
static int parse_page_size(const char *s, unsigned *kb) {
  unsigned long long bytes = 0;
  if (hp_parse_size(s, &bytes) != 0) return -1;
  if (bytes != (unsigned long long)RESERVE_PAGE_2M << 10 && bytes != (unsigned long long)RESERVE_PAGE_1G << 10)
    return -1;
  *kb = (unsigned)(bytes >> 10);
  return 0;
}

/* PAGES: a whole number of pages, or a size with its unit ("2G", "512M",
 * through lib/size.c) that counts the pages of --size it needs (rounded
 * up); *bytes is 0 for a count. */
static int parse_amount(const char *s, unsigned long long *pages, unsigned long long *bytes) {
  size_t n = strlen(s);
  *bytes = 0;
  *pages = 0; /* a size: counted once --size is known */
  if (n > 0 && s[n - 1] >= '0' && s[n - 1] <= '9') return reserve_parse_count(s, RESERVE_MAX_PAGES, pages);
  if (s[0] < '1' || s[0] > '9') return -1;
  for (size_t i = 0; i < n; i++) /* digits and a unit's letters, nothing else ("1 ", "1.5G") */
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z'))) return -1;
  if (hp_parse_size(s, bytes) != 0 || *bytes == 0) return -1;
  return 0;
}

/* The pages a size in bytes needs of the chosen page size, 1..RESERVE_MAX_PAGES. */
static int pages_of(unsigned long long bytes, unsigned size_kb, unsigned long long *pages) {
  unsigned long long page = (unsigned long long)size_kb << 10;
  *pages = bytes / page + (bytes % page != 0);
  return *pages >= 1 && *pages <= RESERVE_MAX_PAGES ? 0 : -1;
}

int reserve_parse_args(int argc, char *const argv[], struct reserve_request *rq, const char **err) {
  int have_pages = 0, have_node = 0, have_size = 0, have_mode = 0, have_json = 0;
  unsigned long long bytes = 0;
  int i;
  rq->action = ACT_GRANT;
  rq->pages = 0;
  rq->node = -1;
  rq->size_kb = RESERVE_PAGE_2M;
  rq->for_job = 0;
  rq->json = 0;
  *err = NULL;
  for (i = 1; i < argc; i++) {
    const char *a = argv[i];
    unsigned long long v;
    if (a == NULL) break;
    if (strcmp(a, "--help") == 0 || strcmp(a, "--status") == 0 || strcmp(a, "--release") == 0) {
      if (have_mode) {
        *err = "only one of --help, --status, --release may be given";
        return -1;
      }
      have_mode = 1;
      rq->action = a[2] == 'h' ? ACT_HELP : a[2] == 's' ? ACT_STATUS : ACT_RELEASE;
    } else if (strcmp(a, "--node") == 0) {
      if (have_node || i + 1 >= argc || reserve_parse_count(argv[i + 1], RESERVE_MAX_NODE, &v) != 0) {
        *err = "--node needs one node number (0-1023)";
        return -1;
      }
      rq->node = (int)v;
      have_node = 1;
      i++;
    } else if (strcmp(a, "--size") == 0) {
      if (have_size || i + 1 >= argc || parse_page_size(argv[i + 1], &rq->size_kb) != 0) {
        *err = "--size needs 2M or 1G";
        return -1;
      }
      have_size = 1;
      i++;
    } else if (strcmp(a, "--json") == 0) {
      rq->json = 1;
      have_json = 1;
    } else if (a[0] == '-') {
      *err = "unknown option";
      return -1;
    } else {
      if (have_pages || parse_amount(a, &v, &bytes) != 0 || (bytes == 0 && v == 0)) {
        *err = "PAGES must be a whole number of pages from 1 to 10000000 (no sign, no leading zero), or a size "
               "with its unit (512M, 2G)";
        return -1;
      }
      rq->pages = v;
      have_pages = 1;
    }
  }
  if (have_json && rq->action != ACT_STATUS) {
    *err = "--json goes with --status only";
    return -1;
  }
  if (have_mode) {
    if (have_pages || have_node || have_size) {
      *err = "--help, --status and --release take no other arguments";
      return -1;
    }
    return 0;
  }
  if (!have_pages) {
    *err = "missing PAGES";
    return -1;
  }
  if (bytes && pages_of(bytes, rq->size_kb, &rq->pages) != 0) {
    *err = "PAGES as a size must come to 1 to 10000000 pages of --size";
    return -1;
  }
  return 0;
}

/* Strict decimal fraction in (0, 1] with at most 3 decimals, as permille. */
static int parse_fraction(const char *s, unsigned *permille) {
  unsigned whole, frac = 0, scale = 100;
  size_t i = 0;
  if (s[0] != '0' && s[0] != '1') return -1;
  whole = (unsigned)(s[0] - '0');
  i = 1;
  if (s[i] == '.') {
    i++;
    if (s[i] == '\0') return -1;
    for (; s[i] != '\0'; i++) {
      if (s[i] < '0' || s[i] > '9' || scale == 0) return -1;
      frac += (unsigned)(s[i] - '0') * scale;
      scale /= 10;
    }
  }
  if (s[i] != '\0') return -1;
  *permille = whole * 1000 + frac;
  if (*permille == 0 || *permille > 1000) return -1;
  return 0;
}

static int valid_group_name(const char *s) {
  size_t i;
  if (s[0] == '\0' || s[0] == '-') return 0;
  for (i = 0; s[i] != '\0'; i++) {
    char ch = s[i];
    if (i >= 63) return 0;
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' ||
          ch == '.'))
      return 0;
  }
  return 1;
}

enum { K_MAX_PAGES = 1, K_FRACTION = 2, K_MIN_FREE = 4, K_GROUP = 8, K_JOB = 16, K_ISO = 32, K_DEFAULT = 64 };

/* One line of text from *pos into line (cap bytes), trailing blanks cut.
 * 0, or -1: too long or a NUL in it. */
static int config_line(const char *text, size_t len, size_t *pos, char *line, size_t cap) {
  size_t n = 0;
  while (*pos < len && text[*pos] != '\n') {
    if (text[*pos] == '\0' || n + 1 >= cap) return -1;
    line[n++] = text[(*pos)++];
  }
  (*pos)++; /* the newline */
  line[n] = '\0';
  while (n > 0 && (line[n - 1] == ' ' || line[n - 1] == '\t')) line[--n] = '\0';
  return 0;
}

/* "key value" (one value, no tabs) split in place: 1, 0 for a blank line or
 * a comment, -1 for anything else. */
static int config_key_value(char *line, char **key, char **val) {
  char *sp;
  *key = line;
  while (**key == ' ' || **key == '\t') (*key)++;
  if (**key == '\0' || **key == '#') return 0;
  if ((sp = strchr(*key, ' ')) == NULL) return -1;
  *sp = '\0';
  *val = sp + 1;
  while (**val == ' ') (*val)++;
  if (strchr(*val, ' ') != NULL || strchr(*val, '\t') != NULL || strchr(*key, '\t') != NULL || **val == '\0')
    return -1;
  return 1;
}

static int parse_yes_no(const char *val, int *out) {
  if (strcmp(val, "yes") != 0 && strcmp(val, "no") != 0) return -1;
  *out = strcmp(val, "yes") == 0;
  return 0;
}

/* One key's value into c: its K_* bit, 0 for a bad value, -1 for a key
 * that is not one. */
static int config_value(const char *key, const char *val, struct reserve_config *c) {
  if (strcmp(key, "max_pages") == 0) return reserve_parse_count(val, RESERVE_MAX_PAGES, &c->max_pages) ? 0 : K_MAX_PAGES;
  if (strcmp(key, "max_fraction") == 0) return parse_fraction(val, &c->max_permille) ? 0 : K_FRACTION;
  if (strcmp(key, "min_free_mb") == 0) return reserve_parse_count(val, 1ULL << 40, &c->min_free_mb) ? 0 : K_MIN_FREE;
  if (strcmp(key, "group") == 0) {
    if (!valid_group_name(val)) return 0;
    memcpy(c->group, val, strlen(val) + 1);
    return K_GROUP;
  }
  if (strcmp(key, "require_job") == 0) return parse_yes_no(val, &c->require_job) ? 0 : K_JOB;
  if (strcmp(key, "require_isolation") == 0) return parse_yes_no(val, &c->require_isolation) ? 0 : K_ISO;
  if (strcmp(key, "default_job_pages") == 0) {
    c->default_job_pages_set = 1;
    return reserve_parse_count(val, RESERVE_MAX_PAGES, &c->default_job_pages) ? 0 : K_DEFAULT;
  }
  return -1;
}

int reserve_parse_config(const char *text, size_t len, struct reserve_config *c, char *err, size_t errlen) {
  unsigned seen = 0;
  size_t pos = 0;
  int lineno = 0, bit;
  memset(c, 0, sizeof *c);
  if (len > RESERVE_CONF_MAX) {
    (void)snprintf(err, errlen, "config larger than %d bytes", RESERVE_CONF_MAX);
    return -1;
  }
  while (pos < len) {
    char line[256], *key = NULL, *val = NULL;
    int kv;
    lineno++;
    if (config_line(text, len, &pos, line, sizeof line) != 0) {
      (void)snprintf(err, errlen, "line %d: too long or contains NUL", lineno);
      return -1;
    }
    if ((kv = config_key_value(line, &key, &val)) == 0) continue;
    if (kv < 0) {
      (void)snprintf(err, errlen, "line %d: expected 'key value'", lineno);
      return -1;
    }
    if ((bit = config_value(key, val, c)) <= 0 || (seen & (unsigned)bit)) {
      (void)snprintf(err, errlen, bit < 0 ? "line %d: unknown key '%.40s'" : bit == 0 ? "line %d: bad value for '%s'"
                                                                                      : "line %d: '%s' given twice",
                     lineno, key);
      return -1;
    }
    seen |= (unsigned)bit;
  }
  if (!(seen & K_MAX_PAGES) || !(seen & K_FRACTION) || !(seen & K_MIN_FREE) || !(seen & K_GROUP)) {
    (void)snprintf(err, errlen, "max_pages, max_fraction, min_free_mb and group must all be set");
    return -1;
  }
  return 0;
}

unsigned long long reserve_grants_checksum(const char *text, size_t len) {
  unsigned long long h = 0xcbf29ce484222325ULL; /* FNV-1a, 64 bit */
  size_t i;
  for (i = 0; i < len; i++) {
    h ^= (unsigned char)text[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

/* "end <16 hex digits>": the checksum of everything before that line. */
static int end_line_ok(const char *line, const char *text, size_t line_start) {
  char want[24];
  if (strncmp(line, "end ", 4) != 0) return 0;
  (void)snprintf(want, sizeof want, "%016llx", reserve_grants_checksum(text, line_start));
  return strcmp(line + 4, want) == 0;
}

/* Exactly n space-separated fields of a table line. */
static int split_fields(char *line, char **f, int n) {
  char *save = NULL;
  int k;
  for (k = 0; k < n; k++) {
    f[k] = strtok_r(k == 0 ? line : NULL, " ", &save);
    if (f[k] == NULL) return -1;
  }
  return strtok_r(NULL, " ", &save) == NULL ? 0 : -1;
}

/* The "uid node|any size_kb" that names a user's pool in a table line. */
static int parse_pool(char *const *f, uid_t *uid, int *node, unsigned *size_kb) {
  unsigned long long u, nd = 0, size;
  if (reserve_parse_count(f[0], 0xfffffffeULL, &u) != 0) return -1;
  if (strcmp(f[1], "any") != 0 && reserve_parse_count(f[1], RESERVE_MAX_NODE, &nd) != 0) return -1;
  if (reserve_parse_count(f[2], RESERVE_PAGE_1G, &size) != 0 || (size != RESERVE_PAGE_2M && size != RESERVE_PAGE_1G))
    return -1;
  *uid = (uid_t)u;
  *node = strcmp(f[1], "any") == 0 ? -1 : (int)nd;
  *size_kb = (unsigned)size;
  return 0;
}

/* "intent uid node|any size_kb before delta pages": a grant being made;
 * "release uid node|any size_kb before delta pages": a release being made
 * (see struct reserve_intent).  At most one of either. */
static int parse_intent(char *line, int kind, struct reserve_intent *in) {
  char *f[7];
  if (in->active || split_fields(line, f, 7) != 0 || parse_pool(f + 1, &in->uid, &in->node, &in->size_kb) != 0 ||
      reserve_parse_count(f[4], 1ULL << 50, &in->before) != 0 ||
      reserve_parse_count(f[5], RESERVE_MAX_PAGES, &in->delta) != 0 || in->delta == 0 ||
      reserve_parse_count(f[6], RESERVE_MAX_PAGES, &in->pages) != 0)
    return -1;
  /* a grant's pages include its delta; a release's pool held its delta */
  if (kind == RESERVE_INTENT_GRANT ? in->pages < in->delta : in->before < in->delta) return -1;
  in->active = kind;
  return 0;
}

void reserve_node_name(char *buf, size_t cap, int node) {
  if (node < 0)
    (void)snprintf(buf, cap, "any");
  else
    (void)snprintf(buf, cap, "%d", node);
}

int reserve_parse_grants(const char *text, size_t len, struct reserve_grants *gs) {
  size_t pos = 0;
  gs->n = 0;
  memset(&gs->intent, 0, sizeof gs->intent);
  if (len == 0) return 0;
  if (len > RESERVE_GRANTS_MAX) return -1;
  while (pos < len) {
    char line[96], *f[4];
    struct reserve_grant_entry e;
    size_t n = 0, start = pos, i;
    while (pos < len && text[pos] != '\n') {
      if (text[pos] == '\0' || n + 1 >= sizeof line) return -1;
      line[n++] = text[pos++];
    }
    if (pos >= len) return -1; /* every line, "end" included, ends in a newline */
    pos++;
    line[n] = '\0';
    if (line[0] == '#') continue;
    /* The end line carries a checksum of the table above it.  A rewrite cut
     * short (a write error, a kill between pages) leaves the new table's head
     * followed by the old table's tail, whose end line does not match it: the
     * table is then corrupt (fail closed), never silently a different table.
     * Anything after a matching end line is an old tail not yet truncated. */
    if (strncmp(line, "end", 3) == 0) return end_line_ok(line, text, start) ? 0 : -1;
    if (strncmp(line, "intent ", 7) == 0 || strncmp(line, "release ", 8) == 0) {
      if (parse_intent(line, line[0] == 'i' ? RESERVE_INTENT_GRANT : RESERVE_INTENT_RELEASE, &gs->intent) != 0)
        return -1;
      continue;
    }
    if (split_fields(line, f, 4) != 0 || parse_pool(f, &e.uid, &e.node, &e.size_kb) != 0 ||
        reserve_parse_count(f[3], RESERVE_MAX_PAGES, &e.pages) != 0 || e.pages == 0 || gs->n >= RESERVE_MAX_GRANTS)
      return -1;
    for (i = 0; i < gs->n; i++) /* one entry per user and pool: a duplicate is damage */
      if (gs->g[i].uid == e.uid && gs->g[i].node == e.node && gs->g[i].size_kb == e.size_kb) return -1;
    gs->g[gs->n++] = e;
  }
  return -1; /* no "end" */
}

size_t reserve_format_grants(const struct reserve_grants *gs, char *buf, size_t cap) {
  size_t used = 0, i;
  int w;
  w = snprintf(buf, cap, "# hugepool-reserve grants: uid node size_kB pages\n");
  if (w < 0 || (size_t)w >= cap) return 0;
  used = (size_t)w;
  for (i = 0; i < gs->n; i++) {
    const struct reserve_grant_entry *g = &gs->g[i];
    char node[16];
    if (g->pages == 0) continue;
    reserve_node_name(node, sizeof node, g->node);
    w = snprintf(buf + used, cap - used, "%lu %s %u %llu\n", (unsigned long)g->uid, node, g->size_kb, g->pages);
    if (w < 0 || (size_t)w >= cap - used) return 0;
    used += (size_t)w;
  }
  if (gs->intent.active) {
    const struct reserve_intent *in = &gs->intent;
    char node[16];
    reserve_node_name(node, sizeof node, in->node);
    w = snprintf(buf + used, cap - used, "%s %lu %s %u %llu %llu %llu\n",
                 in->active == RESERVE_INTENT_RELEASE ? "release" : "intent", (unsigned long)in->uid, node, in->size_kb,
                 in->before, in->delta, in->pages);
    if (w < 0 || (size_t)w >= cap - used) return 0;
    used += (size_t)w;
  }
  w = snprintf(buf + used, cap - used, "end %016llx\n", reserve_grants_checksum(buf, used));
  if (w < 0 || (size_t)w >= cap - used) return 0;
  return used + (size_t)w;
}
