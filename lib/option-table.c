/* SPDX-License-Identifier: BSD-3-Clause */
/* Every HUGEPOOL_* option in one table: its variable, type, defaults, the
 * values it accepts and its help text.  The library (options.c), the
 * preload, hugepool-run's --help and the README's option table all come
 * from here (tests/core/test_options.cpp checks the README against it).
 * Pure: no environment, no output, so hugepool-run links it alone. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "options.h"
#include "size.h"

#define SIZE(var, def, most, text)                                                                      \
  {.name = (var), .type = HP_TYPE_SIZE, .default_value = (def), .preload_default = (def), .max = (most), \
   .help = (text)}
#define NUMBER(var, def, most, what, text)                                                                 \
  {.name = (var), .type = HP_TYPE_NUMBER, .default_value = (def), .preload_default = (def), .max = (most), \
   .unit = (what), .help = (text)}
/* common: how many of the choices programs linked with the library accept
 * (0: all); the rest are the preload's alone. */
#define CHOICE(var, def, preload_def, list, common, text)                                               \
  {.name = (var), .type = HP_TYPE_CHOICE, .default_value = (def), .preload_default = (preload_def), \
   .choices = (list), .common_choices = (common), .help = (text)}
#define TEXT(var, text) {.name = (var), .type = HP_TYPE_TEXT, .help = (text)}

/* The defaults are argued for in README.md ("Choosing the defaults"). */
static const hp_option_desc table[HP_OPT_COUNT] = {
    [HP_OPT_POLICY] = CHOICE("HUGEPOOL_POLICY", HUGEPOOL_POLICY_STRICT, HP_POLICY_FALLBACK, "strict|thp|small|fallback",
                             3,
                             "what to do when the pool is short: `strict` (ENOMEM), `thp`, `small` (4 KB pages); "
                             "preload only: `fallback` (glibc serves a request the pool cannot, one warning per "
                             "process, every fallback counted; later requests try the pool again first)"),
    [HP_OPT_PAGE_SIZE] = SIZE("HUGEPOOL_PAGE_SIZE", (long long)HP_2M, (long long)HP_1G, "huge page size: `2M` or `1G`"),
    [HP_OPT_CACHE_SLOTS] = NUMBER("HUGEPOOL_CACHE_SLOTS", 64, HP_CACHE_SLOTS_MAX, "buffers",
                                  "most freed buffers kept for reuse (0 disables the cache; at most 1048576)"),
    [HP_OPT_CACHE_BYTES] = SIZE("HUGEPOOL_CACHE_BYTES", 1LL << 30, 1LL << 50,
                                 "most bytes kept in freed buffers; in an MPI job, never beyond the rank's share of the "
                                 "node's pool (see \"One pool, many ranks\" in hugepool-run(1))"),
    /* The library's default keeps cached buffers until the limits or a trim
     * evict them, as before; the preload's, a site default for programs that
     * never asked for a cache, gives back what lies idle (README.md). */
    [HP_OPT_CACHE_DECAY] = {.name = "HUGEPOOL_CACHE_DECAY",
                            .type = HP_TYPE_NUMBER,
                            .default_value = 0,
                            .preload_default = HP_CACHE_DECAY_PRELOAD_MS,
                            .max = 86400000,
                            .unit = "ms",
                            .help = "milliseconds: a freed buffer left unused in the cache for longer goes back to "
                                    "the pool the next time the process maps a new buffer or frees one its thread's "
                                    "cache cannot keep (`0`: only the cache's limits and `hugepool_trim()` give "
                                    "cached buffers back; see \"The cache\" in README.md)"},
    [HP_OPT_STATS] = CHOICE("HUGEPOOL_STATS", HP_STATS_OFF, HP_STATS_OFF, "0|1|json", 0,
                            "`1`: print statistics as text at exit; `json`: as one JSON line"),
    [HP_OPT_STATS_FILE] = TEXT("HUGEPOOL_STATS_FILE",
                               "write the exit statistics to this file instead of stderr: a new file, or one this user owns "
                               "replaced whole; a symlink, FIFO or another user's file there is left as it is (the "
                               "statistics then go to stderr, with one warning); "
                               "`%p` pid, `%r` MPI rank (from `PMI_RANK`, `PMIX_RANK`, `OMPI_COMM_WORLD_RANK`, "
                               "`MPI_LOCALRANKID`, `PALS_RANKID`, `SLURM_PROCID`; `norank` outside MPI), `%h` host; "
                               "none from a process that made no hugepool allocation"),
    [HP_OPT_WARN] = CHOICE("HUGEPOOL_WARN", 1, 1, "0|1", 0, "`0` silences diagnostics (pool short, foreign free)"),
    [HP_OPT_THRESHOLD] = SIZE("HUGEPOOL_THRESHOLD", 1LL << 20, 1LL << 50,
                              "preload only: smallest request put on hugetlb pages; at least `64K` (each such "
                              "request takes whole 2 MB pages: smaller values are refused)"),
    [HP_OPT_SMALL_HEAP] = CHOICE("HUGEPOOL_SMALL_HEAP", 0, 0, "0|1", 0,
                                 "preload only: also pack small allocations onto hugetlb pages"),
    [HP_OPT_FORK] = CHOICE("HUGEPOOL_FORK", HP_FORK_COPY, HP_FORK_COPY, "copy|keep", 0,
                           "`copy`: a child gets private copies of live buffers at `fork()`; `keep`: no copy"),
    [HP_OPT_MPI] = CHOICE("HUGEPOOL_MPI", HP_MPI_AUTO, HP_MPI_AUTO, "auto|off", 0,
                          "hugepool-run only: `auto` also preloads the MPI entry points (`MPI_Alloc_mem` on hugetlb "
                          "pages; they do nothing in a program without MPI or with another MPI); `off`: not"),
    [HP_OPT_MPI_WIN_SHARED] = CHOICE("HUGEPOOL_MPI_WIN_SHARED", 0, 0, "0|1", 0,
                                     "MPI entry points: `1` puts `MPI_Win_allocate_shared` windows on node-shared "
                                     "hugetlb segments"),
    [HP_OPT_CUDA] = CHOICE("HUGEPOOL_CUDA", HP_CUDA_OFF, HP_CUDA_OFF, "0|1|all", 0,
                           "preload only (`hugepool-run --cuda`): `1` serves a program's own `cudaHostRegister` / "
                           "`cuMemHostRegister` of a hugepool buffer from a registration kept while hugepool caches "
                           "the buffer (the first registers for real, the next cost nothing); `all` also registers "
                           "a hugepool buffer at the program's first copy of 1 MiB or more between it and a GPU; "
                           "`--cuda` also sets PyTorch's `pinned_use_cuda_host_register:True`"),
    [HP_OPT_VERBOSE] = CHOICE("HUGEPOOL_VERBOSE", 0, 0, "0|1", 0,
                              "`1`: one line per kind of decision (hugetlb mapping, cache hit, fallback and why, fork "
                              "copy, 2 MB page split, cached buffers given back unused) at its first occurrence, "
                              "then at most one a second with the count of those unsaid, on the stderr the "
                              "statistics go to (`hugepool-run -v`)"),
    [HP_OPT_HOLD] = CHOICE("HUGEPOOL_HOLD", HP_HOLD_AUTO, HP_HOLD_AUTO, "auto|all|share", 0,
                           "preload only: `all` reserves every large request whole when it is handed out; `share` "
                           "gives a new request of more than 64 MiB and more than an eighth of the node's pool to "
                           "glibc instead (a program that sizes a buffer from its input and memory, as GNU "
                           "`sort` does, holds no pool it never touches); `auto`: `all` in an MPI rank, with `--cuda` "
                           "or `--policy strict`, `share` otherwise (see \"Pool pages held\" in hugepool-run(1))"),
    [HP_OPT_PREFAULT] = SIZE("HUGEPOOL_PREFAULT", (long long)HP_PREFAULT_DEFAULT, 1LL << 50,
                             "the first bytes of each newly mapped buffer (whole pages) that the kernel clears "
                             "when the buffer is handed out rather than at the program's first write to them (`0`: "
                             "at first write); where a first touch may choose between NUMA nodes the default is "
                             "`0`, so that the thread that first writes a page places it"),
    [HP_OPT_OTHER_HEAP] = CHOICE("HUGEPOOL_OTHER_HEAP", HP_OTHER_HEAP_AUTO, HP_OTHER_HEAP_AUTO, "auto|share|off", 0,
                                 "preload only: a program whose heap is another allocator's (it links jemalloc, "
                                 "tcmalloc, mimalloc, ..., or one follows hugepool in `LD_PRELOAD`): `share` puts "
                                 "requests at or above the threshold on hugetlb pages and leaves the rest to that "
                                 "allocator; `off` leaves it every request; `auto`: `share` where the allocator is "
                                 "in `LD_PRELOAD` alone, `off` where the program links it (it may hand a large "
                                 "block to that allocator's own calls, `dallocx` or `mi_free`, which would not know "
                                 "it). A sanitizer's heap always gets every request"),
};

const hp_option_desc *option_desc(hp_option_id id) { return &table[id]; }

/* The n-th choice of "a|b|c" (its length in *len), or NULL. */
static const char *nth_choice(const char *choices, long long n, size_t *len) {
  const char *c = choices;
  for (long long i = 0; i < n; i++) {
    c += strcspn(c, "|");
    if (*c++ != '|') return NULL;
  }
  *len = strcspn(c, "|");
  return c;
}

/* The choices a program may use: all, or the first `common_choices` ones
 * outside the preload. */
static size_t choices_for(const hp_option_desc *d, bool preload, long long *count) {
  long long n = 1;
  for (const char *c = d->choices; *c; c++) n += *c == '|';
  if (!preload && d->common_choices) n = d->common_choices;
  size_t len = 0;
  const char *last = nth_choice(d->choices, n - 1, &len);
  *count = n;
  return (size_t)(last - d->choices) + len;
}

/* A switch (choices "0|1..."): also yes/true/on and no/false/off, any case,
 * as jemalloc's and mimalloc's boolean options read them. */
static int switch_word(const char *choices, const char *text) {
  static const char *const words[2][3] = {{"no", "false", "off"}, {"yes", "true", "on"}};
  if (strncmp(choices, "0|1", 3) != 0 || (choices[3] != '\0' && choices[3] != '|')) return -1;
  for (int v = 0; v < 2; v++)
    for (int w = 0; w < 3; w++)
      if (strcasecmp(text, words[v][w]) == 0) return v;
  return -1;
}

static int closest_choice(const char *choices, long long count, const char *text);

int option_parse(hp_option_id id, const char *text, bool preload, long long *value, char *expected, size_t len) {
  const hp_option_desc *d = &table[id];
  bool bad = false;
  unsigned long long v = 0;
  switch (d->type) {
    case HP_TYPE_TEXT: *value = 0; return 0;
    case HP_TYPE_CHOICE: {
      long long count;
      size_t span = choices_for(d, preload, &count);
      for (long long i = 0; i < count; i++) {
        size_t n = 0;
        const char *c = nth_choice(d->choices, i, &n);
        if (strlen(text) == n && strncasecmp(c, text, n) == 0) {
          *value = i;
          return 0;
        }
      }
      int word = switch_word(d->choices, text);
      if (word >= 0) {
        *value = word;
        return 0;
      }
      int near = closest_choice(d->choices, count, text);
      size_t near_len = 0;
      const char *near_text = near >= 0 ? nth_choice(d->choices, near, &near_len) : "";
      (void)snprintf(expected, len, "%.*s%s%s%.*s%s", (int)span, d->choices,
                     switch_word(d->choices, "on") >= 0 ? ", or yes/no, true/false, on/off" : "",
                     near >= 0 ? "; did you mean '" : "", (int)near_len, near_text, near >= 0 ? "'?" : "");
      return -1;
    }
    case HP_TYPE_NUMBER: {
      const char *p = text;
      while (*p >= '0' && *p <= '9' && v <= (unsigned long long)d->max) v = v * 10 + (unsigned)(*p++ - '0');
      bad = p == text || *p != '\0';
      break;
    }
    case HP_TYPE_SIZE: bad = hp_parse_size(text, &v) != 0; break;
  }
  /* Below 64 KiB every small object of a program would take a 2 MB page
   * (with 0, a one-line python script held 182 MiB of hugetlb pages). */
  unsigned long long least = id == HP_OPT_THRESHOLD ? HP_THRESHOLD_MIN : 0;
  if (bad || v > (unsigned long long)d->max || v < least || (id == HP_OPT_PAGE_SIZE && v != HP_2M && v != HP_1G)) {
    char lo[48], hi[48];
    option_format(id, (long long)least, lo, sizeof(lo));
    option_format(id, d->max, hi, sizeof(hi));
    if (id == HP_OPT_PAGE_SIZE)
      (void)snprintf(expected, len, "2M or 1G");
    else if (d->type == HP_TYPE_NUMBER)
      (void)snprintf(expected, len, "a whole number of %s from %s to %s", d->unit ? d->unit : "units", lo, hi);
    else
      (void)snprintf(expected, len, "a size in bytes from %s to %s, suffixes K M G T", lo, hi);
    return -1;
  }
  *value = (long long)v;
  return 0;
}

void option_format(hp_option_id id, long long value, char *buf, size_t len) {
  const hp_option_desc *d = &table[id];
  if (d->type == HP_TYPE_TEXT) {
    (void)snprintf(buf, len, "-");
  } else if (d->type == HP_TYPE_CHOICE) {
    size_t n = 0;
    const char *c = nth_choice(d->choices, value, &n);
    (void)snprintf(buf, len, "%.*s", c ? (int)n : 1, c ? c : "?");
  } else {
    unsigned long long v = (unsigned long long)value;
    const char *unit = "";
    if (d->type == HP_TYPE_SIZE) {
      if (v && v % (1ULL << 40) == 0)
        v >>= 40, unit = "T";
      else if (v && v % (1ULL << 30) == 0)
        v >>= 30, unit = "G";
      else if (v && v % (1ULL << 20) == 0)
        v >>= 20, unit = "M";
      else if (v && v % (1ULL << 10) == 0)
        v >>= 10, unit = "K";
    }
    (void)snprintf(buf, len, "%llu%s", v, unit); /* a truncated value is still readable */
  }
}

hp_option_id option_find(const char *name, size_t len) {
  for (int i = 0; i < HP_OPT_COUNT; i++)
    if (strlen(table[i].name) == len && strncmp(table[i].name, name, len) == 0) return (hp_option_id)i;
  return HP_OPT_COUNT;
}

/* Levenshtein distance between a[0..n) and b, capped at names of 63 bytes. */
static size_t edits(const char *a, size_t n, const char *b) {
  size_t m = strlen(b), row[64];
  if (n > 63 || m > 63) return 64;
  for (size_t j = 0; j <= m; j++) row[j] = j;
  for (size_t i = 1; i <= n; i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= m; j++) {
      size_t up = row[j];
      size_t best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[m];
}

/* The choice a mistyped value most likely meant ("al": "all"), or -1: at
 * most 2 edits away, and fewer edits than the choice has letters. */
static int closest_choice(const char *choices, long long count, const char *text) {
  int best = -1;
  size_t best_edits = 3, n = strlen(text);
  char lower[64];
  if (n >= sizeof(lower)) return -1;
  for (size_t i = 0; i <= n; i++) lower[i] = (char)tolower((unsigned char)text[i]);
  for (long long i = 0; i < count; i++) {
    size_t clen = 0;
    const char *c = nth_choice(choices, i, &clen);
    char choice[64];
    if (clen >= sizeof(choice)) continue;
    memcpy(choice, c, clen);
    choice[clen] = '\0';
    size_t e = edits(lower, n, choice);
    if (e < best_edits && e < clen) {
      best_edits = e;
      best = (int)i;
    }
  }
  return best;
}

hp_option_id option_closest(const char *name, size_t len) {
  hp_option_id best = HP_OPT_COUNT;
  size_t best_edits = 3;
  for (int i = 0; i < HP_OPT_COUNT; i++) {
    size_t e = edits(name, len, table[i].name);
    if (e < best_edits) {
      best_edits = e;
      best = (hp_option_id)i;
    }
  }
  return best;
}

bool option_foreign(const char *name, size_t len) {
  static const char known[] = " HUGEPOOL_ROOT HUGEPOOL_DIR HUGEPOOL_PRELOAD_LIB HUGEPOOL_MPI_PRELOAD_LIB"
                              " HUGEPOOL_CUDA_PRELOAD_LIB ";
  for (const char *at = strstr(known, " HUGEPOOL_"); at; at = strstr(at + 1, " HUGEPOOL_"))
    if (strncmp(at + 1, name, len) == 0 && at[1 + len] == ' ') return true;
  return false;
}
