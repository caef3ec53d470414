/* SPDX-License-Identifier: BSD-3-Clause */
/* Statistics: the counters kept under the hugepool lock (base.c) and the
 * caches' totals, as one snapshot, as text or JSON, and printed at exit on
 * request (HUGEPOOL_STATS, HUGEPOOL_STATS_FILE).  The caller has started
 * the core (api.c, init.c). */
#define _GNU_SOURCE
#include "stats.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "embed.h"
#include "hooks.h"
#include "launcher.h"
#include "options.h"
#include "tcache.h"


/* One row per counter: the text and the JSON output come from this table.
 * Counters whose name has "bytes" in it are sizes: bytes in JSON, KiB, MiB,
 * GiB in text (hp_human_size). */
#define HP_STAT_FIELDS(X)                                  \
  X(allocs, "allocations")                                 \
  X(frees, "frees")                                        \
  X(failures, "failed allocations")                        \
  X(cache_hits, "cache hits")                              \
  X(cache_misses, "cache misses")                          \
  X(cache_evictions, "cache evictions")                    \
  X(trims, "released by trim")                             \
  X(fallbacks_thp, "fallbacks to THP")                     \
  X(fallbacks_small, "fallbacks to 4 KB pages")            \
  X(maps, "mmap calls")                                    \
  X(unmaps, "munmap calls")                                \
  X(bytes_mapped, "bytes mapped")                          \
  X(bytes_mapped_peak, "bytes mapped (peak)")              \
  X(bytes_live, "bytes in live buffers")                   \
  X(bytes_requested, "bytes requested by live buffers")    \
  X(bytes_slack, "bytes of rounding slack")                \
  X(bytes_cached, "bytes cached")                          \
  X(live_buffers, "live buffers")                          \
  X(cached_buffers, "cached buffers")                      \
  X(cache_max_slots, "cache slot limit")                   \
  X(cache_max_bytes, "cache byte limit")                   \
  X(fork_copies_huge, "fork: buffers copied (hugetlb)")    \
  X(fork_moves_small, "fork: buffers moved to 4 KB pages") \
  X(realloc_grows, "realloc: grown without copying")       \
  X(realloc_shrinks, "realloc: shrunk (pages released)")   \
  X(realloc_copies, "realloc: grown by copying")

/* Every field of hugepool_stats is in HP_STAT_FIELDS, in order, and
 * nothing else: a counter added to the struct but not to the list (or the
 * other way round) does not compile. */
#define HP_MIRROR(field, label) uint64_t field;
typedef struct stats_printed {
  HP_STAT_FIELDS(HP_MIRROR)
} stats_printed;
#undef HP_MIRROR
_Static_assert(sizeof(stats_printed) == sizeof(hugepool_stats), "every field of hugepool_stats must be printed");
#define HP_SAME_PLACE(field, label)                                                 \
  _Static_assert(offsetof(stats_printed, field) == offsetof(hugepool_stats, field), \
                 "HP_STAT_FIELDS must list the fields of hugepool_stats in order");
HP_STAT_FIELDS(HP_SAME_PLACE)
#undef HP_SAME_PLACE

typedef struct {
  char *buf;
  size_t len, need;
} sink;

static void emit(sink *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(sink *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t room = s->need < s->len ? s->len - s->need : 0;
  int n = vsnprintf(room ? s->buf + s->need : NULL, room, fmt, ap);
  va_end(ap);
  if (n > 0) s->need += (size_t)n;
}

/* Which record belongs to which node and job (tools/hugepool-stats merges
 * per node): the host name, and the batch system's or launcher's job id
 * (Slurm, PBS, LSF, Open MPI/PMIx), each cut to a safe alphabet so that the
 * JSON and the text header stay parseable whatever the environment holds. */
static void safe_copy(char *out, size_t len, const char *in) {
  size_t i = 0;
  for (; in && in[i] && i + 1 < len; i++) {
    const char c = in[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("._-@:+", c);
    out[i] = '_';
    if (ok) out[i] = c;
  }
  out[i] = '\0';
}
static long mpi_rank(void) { return launcher_rank(); }

static void record_ids(char host[64], char job[64], long *lrank) {
  char h[256] = "";
  if (gethostname(h, sizeof(h) - 1) != 0) h[0] = '\0';
  h[sizeof(h) - 1] = '\0';
  safe_copy(host, 64, h[0] ? h : "unknown");
  safe_copy(job, 64, launcher_job());
  *lrank = launcher_local_rank();
}
#define HP_STR2(x) #x
#define HP_STR(x) HP_STR2(x)
#define HP_VERSION_TEXT \
  HP_STR(HUGEPOOL_VERSION_MAJOR) "." HP_STR(HUGEPOOL_VERSION_MINOR) "." HP_STR(HUGEPOOL_VERSION_PATCH)

void stats_snapshot(hugepool_stats *out) {
  pthread_mutex_lock(&hp_lock);
  *out = hp_stats;
  uint64_t moved = base_stats_requested_moved_total();
  out->bytes_requested += moved;
  out->bytes_slack -= moved;
  tcache_sum_stats(out);
  size_t count, bytes;
  tcache_totals(&count, &bytes);
  out->bytes_cached = cache_bytes() + bytes;
  out->cached_buffers = cache_count() + count;
  out->cache_max_slots = cache_max_slots();
  out->cache_max_bytes = cache_max_bytes();
  pthread_mutex_unlock(&hp_lock);
}

/* When this process started and now, in seconds since the epoch (0 where
 * unknown): hugepool-stats tells ranks that ran together from ranks that
 * ran one after another.  The start is the kernel's (field 22 of
 * /proc/self/stat, clock ticks after boot), carried onto the wall clock
 * through CLOCK_BOOTTIME. */
static void run_times(double *started, double *now) {
  struct timespec real, boot;
  clock_gettime(CLOCK_REALTIME, &real);
  clock_gettime(CLOCK_BOOTTIME, &boot);
  *now = (double)real.tv_sec + (double)real.tv_nsec / 1e9;
  *started = 0;
  char stat[1024];
  long hz = sysconf(_SC_CLK_TCK);
  if (os_read_file("/proc/self/stat", stat, sizeof(stat)) <= 0 || hz <= 0) return;
  const char *p = strrchr(stat, ')'); /* the command name may hold spaces */
  for (int field = 2; p && field < 22; field++) p = strchr(p + 1, ' ');
  unsigned long long ticks = p ? strtoull(p + 1, NULL, 10) : 0;
  double boot_s = (double)boot.tv_sec + (double)boot.tv_nsec / 1e9;
  if (ticks) *started = *now - boot_s + (double)ticks / (double)hz;
}

int stats_snprint(char *buf, size_t len, hugepool_stats_format format) {
  hugepool_stats st;
  stats_snapshot(&st);
  sink s = {buf, len, 0};
  if (len) buf[0] = '\0';
  hp_extra_stat extra[24];
  const hp_embedder *embedder = hp_embedding();
  size_t n_extra = embedder->extra_stats ? embedder->extra_stats(extra, sizeof(extra) / sizeof(extra[0])) : 0;
  /* One policy, as the user chose it: the preload's default is its own
   * fallback to glibc (the core underneath runs strict and quiet). */
  const char *policy = embedder->policy_label ? embedder->policy_label : hp_policy_name(hp_current_policy());
  long rank = mpi_rank(), lrank = -1;
  char host[64], job[64];
  record_ids(host, job, &lrank);
  size_t page = hp_current_page_size();
  long pool_pages = os_pool_total(page, -1); /* the node's pool (-1: unknown) */
  double started, written;
  run_times(&started, &written);
  if (format == HUGEPOOL_STATS_JSON) {
    emit(&s, "{\"pid\": %ld, \"rank\": %ld, \"policy\": \"%s\", \"page_size\": %zu", (long)getpid(), rank, policy,
         page);
    emit(&s, ", \"local_rank\": %ld, \"host\": \"%s\", \"job\": \"%s\", \"version\": \"%s\", \"pool_pages\": %ld",
         lrank, host, job, HP_VERSION_TEXT, pool_pages);
    emit(&s, ", \"started\": %.3f, \"written\": %.3f", started, written);
#define HP_JSON(field, label) emit(&s, ", \"%s\": %llu", #field, (unsigned long long)st.field);
    HP_STAT_FIELDS(HP_JSON)
#undef HP_JSON
    for (size_t i = 0; i < n_extra; i++) emit(&s, ", \"%s\": %llu", extra[i].key, extra[i].value);
    emit(&s, "}\n");
  } else {
    char rank_text[64] = "";
    if (rank >= 0) (void)snprintf(rank_text, sizeof(rank_text), ", rank %ld", rank);
    if (lrank >= 0) (void)snprintf(rank_text + strlen(rank_text), sizeof(rank_text) - strlen(rank_text),
                                   ", local rank %ld", lrank);
    emit(&s,
         "hugepool statistics (pid %ld%s, host %s%s%s, version %s, policy %s, page size %zu KiB, pool pages %ld, "
         "started %.3f, written %.3f)\n",
         (long)getpid(), rank_text, host, job[0] ? ", job " : "", job, HP_VERSION_TEXT, policy, page >> 10,
         pool_pages, started, written);
    char size[32];
#define HP_TEXT(field, label)                                        \
  if (strstr(#field, "bytes")) {                                     \
    hp_human_size(size, sizeof(size), (unsigned long long)st.field); \
    emit(&s, "  %-40s %s\n", label, size);                           \
  } else {                                                           \
    emit(&s, "  %-40s %llu\n", label, (unsigned long long)st.field); \
  }
    HP_STAT_FIELDS(HP_TEXT)
#undef HP_TEXT
    for (size_t i = 0; i < n_extra; i++) {
      if (extra[i].flags & HP_EXTRA_BYTES) {
        hp_human_size(size, sizeof(size), extra[i].value);
        emit(&s, "  %-40s %s\n", extra[i].label, size);
      } else {
        emit(&s, "  %-40s %llu\n", extra[i].label, extra[i].value);
      }
    }
  }
  return (int)s.need;
}

int stats_print(FILE *stream, hugepool_stats_format format) {
  char buf[4096];
  int n = stats_snprint(buf, sizeof(buf), format);
  if (n < 0 || !stream) return -1;
  return fputs(buf, stream) == EOF ? -1 : 0;
}

/* Expands %p (pid), %r (MPI rank, or "norank"), %h (host) and %% in `pattern`. */
static int expand_pattern(const char *pattern, char *out, size_t len) {
  sink s = {out, len, 0};
  for (const char *p = pattern; *p; p++) {
    if (*p != '%') {
      emit(&s, "%c", *p);
      continue;
    }
    switch (*++p) {
      case 'p': emit(&s, "%ld", (long)getpid()); break;
      case 'r': {
        long r = mpi_rank();
        if (r >= 0)
          emit(&s, "%ld", r);
        else
          emit(&s, "norank");
        break;
      }
      case 'h': {
        char host[256] = "unknown";
        gethostname(host, sizeof(host) - 1);
        host[sizeof(host) - 1] = '\0';
        emit(&s, "%s", host);
        break;
      }
      case '%': emit(&s, "%%"); break;
      case '\0':
        p--;
        emit(&s, "%%");
        break;
      default: emit(&s, "%%%c", *p); break;
    }
  }
  return s.need < len ? 0 : -1;
}

bool stats_report_asked(void) {
  return option_get(HP_OPT_STATS) != HP_STATS_OFF || option_get_string(HP_OPT_STATS_FILE) != NULL;
}

void stats_print_at_exit(void) {
  if (!stats_report_asked()) return;
  long long mode = option_get(HP_OPT_STATS);
  const char *pattern = option_get_string(HP_OPT_STATS_FILE);
  /* A process that never asked hugepool for memory (mpiexec or its proxy
   * under a wrapped launcher, a shell, the dozen helpers a pyenv shim runs)
   * prints nothing and writes no file: it has nothing to report, its
   * all-zero block would bury the ranks' own, and its "norank" file would
   * overwrite another's.  Asked includes refused and fallen back. */
  hugepool_stats st;
  stats_snapshot(&st);
  bool asked = st.allocs != 0 || st.failures != 0;
  hp_extra_stat extra[24];
  size_t (*extra_stats)(hp_extra_stat *, size_t) = hp_embedding()->extra_stats;
  size_t n_extra = extra_stats && !asked ? extra_stats(extra, sizeof(extra) / sizeof(extra[0])) : 0;
  for (size_t i = 0; i < n_extra; i++) asked = asked || ((extra[i].flags & HP_EXTRA_ACTIVITY) && extra[i].value);
  if (!asked) return;
  char text[4096];
  int n = stats_snprint(text, sizeof(text), mode == HP_STATS_JSON_AT_EXIT ? HUGEPOOL_STATS_JSON : HUGEPOOL_STATS_TEXT);
  if (n <= 0) return;
  size_t len = (size_t)n < sizeof(text) ? (size_t)n : sizeof(text) - 1;
  if (!pattern) {
    os_write_report(text, len);
    return;
  }
  char path[4096];
  if (expand_pattern(pattern, path, sizeof(path)) != 0) {
    hp_warn("HUGEPOOL_STATS_FILE pattern is too long; statistics go to stderr");
    os_write_report(text, len);
    return;
  }
  if (os_write_file(path, text, len) == 0) return;
  if (errno == EEXIST) /* planted by someone, or not a file: never written into */
    hp_warn("cannot write statistics to %s: it exists and is not a regular file of this user (left as it is); "
            "printing them here", path);
  else
    hp_warn("cannot write statistics to %s: %s; printing them here", path, strerror(errno));
  os_write_report(text, len);
}
