/* Every HUGEPOOL_* option, in one table, read once from the environment.
 * A bad value never aborts: it gets one warning naming the variable and the
 * default used instead. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

typedef enum { OPT_SIZE, OPT_COUNT, OPT_CHOICE, OPT_STRING } opt_type;

typedef struct hp_option {
  const char *name; /* environment variable */
  opt_type type;
  long long value;     /* parsed value (or default) */
  long long max;       /* OPT_SIZE / OPT_COUNT: largest accepted value */
  const char *choices; /* OPT_CHOICE: "a|b|c", value = index */
  const char *text;    /* OPT_STRING */
  const char *help;
} hp_option;

/* The defaults are argued for in README.md ("Choosing the defaults"). */
static hp_option options[HP_OPT_COUNT] = {
    [HP_OPT_POLICY] = {"HUGEPOOL_POLICY", OPT_CHOICE, HUGEPOOL_POLICY_STRICT, 0, "strict|thp|small", NULL,
                       "what to do when the pool is short: strict (ENOMEM), thp, small (4 KB pages)"},
    [HP_OPT_PAGE_SIZE] = {"HUGEPOOL_PAGE_SIZE", OPT_SIZE, (long long)HP_2M, (long long)HP_1G, NULL, NULL,
                          "huge page size: 2M or 1G"},
    [HP_OPT_CACHE_SLOTS] = {"HUGEPOOL_CACHE_SLOTS", OPT_COUNT, 64, HP_CACHE_SLOTS_MAX, NULL, NULL,
                            "most freed buffers kept for reuse (0 disables the cache)"},
    [HP_OPT_CACHE_BYTES] = {"HUGEPOOL_CACHE_BYTES", OPT_SIZE, 1LL << 30, 1LL << 50, NULL, NULL,
                            "most bytes kept in freed buffers for reuse"},
    [HP_OPT_STATS] = {"HUGEPOOL_STATS", OPT_CHOICE, HP_STATS_OFF, 0, "0|1|json", NULL,
                      "print statistics at exit: 0, 1 (text) or json"},
    [HP_OPT_STATS_FILE] = {"HUGEPOOL_STATS_FILE", OPT_STRING, 0, 0, NULL, NULL,
                           "write exit statistics to this file (%p = pid, %r = MPI rank, %h = host)"},
    [HP_OPT_WARN] = {"HUGEPOOL_WARN", OPT_CHOICE, 1, 0, "0|1", NULL,
                     "print diagnostics (pool short, bad free) on stderr"},
    [HP_OPT_THRESHOLD] = {"HUGEPOOL_THRESHOLD", OPT_SIZE, 1LL << 20, 1LL << 50, NULL, NULL,
                          "preload: smallest request put on hugetlb pages"},
    [HP_OPT_SMALL_HEAP] = {"HUGEPOOL_SMALL_HEAP", OPT_CHOICE, 0, 0, "0|1", NULL,
                           "preload: also pack small allocations onto hugetlb pages"},
    [HP_OPT_FORK] = {"HUGEPOOL_FORK", OPT_CHOICE, HP_FORK_COPY, 0, "copy|keep", NULL,
                     "fork(): give the child private copies of live buffers (copy) or not (keep)"},
};

int parse_size(const char *text, unsigned long long *out) {
  if (!text) return -1;
  const char *p = text;
  while (isspace((unsigned char)*p)) p++;
  if (!isdigit((unsigned char)*p)) return -1; /* no sign, no empty */
  errno = 0;
  char *end = NULL;
  unsigned long long v = strtoull(p, &end, 10);
  if (errno == ERANGE) return -1;
  unsigned shift = 0;
  switch (toupper((unsigned char)*end)) {
    case 'K':
      shift = 10;
      end++;
      break;
    case 'M':
      shift = 20;
      end++;
      break;
    case 'G':
      shift = 30;
      end++;
      break;
    case 'T':
      shift = 40;
      end++;
      break;
    default: break;
  }
  if (shift) {
    if (*end == 'i' || *end == 'I') end++;
    if (*end == 'b' || *end == 'B') end++;
  } else if (*end == 'b' || *end == 'B') {
    end++;
  }
  while (isspace((unsigned char)*end)) end++;
  if (*end != '\0') return -1;
  if (shift && v > (~0ULL >> shift)) return -1;
  *out = v << shift;
  return 0;
}

static int parse_choice(const char *choices, const char *text, long long *out) {
  long long index = 0;
  const char *c = choices;
  while (*c) {
    size_t len = strcspn(c, "|");
    if (strlen(text) == len && strncasecmp(c, text, len) == 0) {
      *out = index;
      return 0;
    }
    c += len;
    if (*c == '|') c++;
    index++;
  }
  return -1;
}

static void describe_default(const hp_option *o, char *buf, size_t len) {
  if (o->type == OPT_CHOICE) {
    const char *c = o->choices;
    for (long long i = 0; i < o->value && *c; i++) c += strcspn(c, "|") + (c[strcspn(c, "|")] == '|');
    size_t n = strcspn(c, "|");
    if (n >= len) n = len - 1;
    memcpy(buf, c, n);
    buf[n] = '\0';
  } else {
    unsigned long long v = (unsigned long long)o->value;
    const char *unit = "";
    if (o->type == OPT_SIZE) {
      if (v && v % (1ULL << 30) == 0)
        v >>= 30, unit = "G";
      else if (v && v % (1ULL << 20) == 0)
        v >>= 20, unit = "M";
      else if (v && v % (1ULL << 10) == 0)
        v >>= 10, unit = "K";
    }
    (void)snprintf(buf, len, "%llu%s", v, unit); /* a truncated default is still readable */
  }
}

static void parse_one(hp_option *o) {
  const char *text = getenv(o->name);
  if (!text) return;
  if (o->type == OPT_STRING) {
    o->text = text;
    return;
  }
  const char *what = NULL;
  long long parsed = 0;
  if (o->type == OPT_CHOICE) {
    if (parse_choice(o->choices, text, &parsed) != 0) what = o->choices;
  } else {
    unsigned long long v = 0;
    int rc = o->type == OPT_SIZE ? parse_size(text, &v) : -1;
    if (o->type == OPT_COUNT) {
      char *end = NULL;
      errno = 0;
      rc = isdigit((unsigned char)text[0]) ? 0 : -1;
      if (rc == 0) v = strtoull(text, &end, 10);
      if (rc == 0 && (errno == ERANGE || *end != '\0')) rc = -1;
    }
    if (rc != 0)
      what = o->type == OPT_SIZE ? "a size such as 512M or 2G" : "a whole number";
    else if (v > (unsigned long long)o->max)
      what = "a value in range";
    else
      parsed = (long long)v;
  }
  if (o == &options[HP_OPT_PAGE_SIZE] && !what && parsed != (long long)HP_2M && parsed != (long long)HP_1G) {
    what = "2M or 1G";
  }
  if (what) {
    char def[48];
    describe_default(o, def, sizeof(def));
    hp_warn("%s='%s' is not valid (expected %s); using the default %s", o->name, text, what, def);
    return;
  }
  o->value = parsed;
}

void options_init(void) {
  parse_one(&options[HP_OPT_WARN]); /* first: it decides whether the others may warn */
  for (size_t i = 0; i < HP_OPT_COUNT; i++) {
    if (i != HP_OPT_WARN) parse_one(&options[i]);
  }
}

long long option_get(hp_option_id id) { return options[id].value; }

const char *option_get_string(hp_option_id id) { return options[id].text; }
