/* SPDX-License-Identifier: BSD-3-Clause */
/* The bottom of the core, above the OS layer alone (base.h, warn.h): the
 * lock and the counters it guards, the settings the public API changes at
 * run time, warnings, the embedder (embed.h) and the shortage lines.  It
 * calls nothing of lib/ but the OS layer; every other file may call it. */
#define _GNU_SOURCE
#include "base.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "embed.h"
#include "hooks.h"

pthread_mutex_t hp_lock = PTHREAD_MUTEX_INITIALIZER;
hugepool_stats hp_stats;
static _Atomic uint64_t requested_moved;

void base_stats_mapped(size_t bytes) {
  hp_stats.maps++;
  hp_stats.bytes_mapped += bytes;
  if (hp_stats.bytes_mapped > hp_stats.bytes_mapped_peak) hp_stats.bytes_mapped_peak = hp_stats.bytes_mapped;
}

void base_stats_unmapped(size_t bytes) {
  hp_stats.unmaps++;
  hp_stats.bytes_mapped -= bytes;
}

void base_stats_birth(hugepool_stats *st, const hp_block *b) {
  st->allocs++;
  st->live_buffers++;
  st->bytes_live += b->size;
  st->bytes_requested += b->requested;
  st->bytes_slack += b->size - b->requested;
  if (b->kind == HUGEPOOL_KIND_THP) st->fallbacks_thp++;
  if (b->kind == HUGEPOOL_KIND_SMALL) st->fallbacks_small++;
}

void base_stats_death(hugepool_stats *st, const hp_block *b) {
  st->frees++;
  st->live_buffers--;
  st->bytes_live -= b->size;
  st->bytes_requested -= b->requested;
  st->bytes_slack -= b->size - b->requested;
}

void base_stats_requested_moved(uint64_t bytes) { atomic_fetch_add_explicit(&requested_moved, bytes, memory_order_relaxed); }

uint64_t base_stats_requested_moved_total(void) { return atomic_load_explicit(&requested_moved, memory_order_relaxed); }

/* ---- settings ------------------------------------------------------------- */

static _Atomic int hp_policy = HUGEPOOL_POLICY_STRICT;
static _Atomic size_t hp_page_size = HP_2M;

size_t hp_current_page_size(void) { return atomic_load_explicit(&hp_page_size, memory_order_relaxed); }

void hp_set_page_size(size_t page) { atomic_store(&hp_page_size, page); }

hugepool_policy hp_current_policy(void) { return (hugepool_policy)atomic_load(&hp_policy); }

void hp_set_policy(hugepool_policy policy) { atomic_store(&hp_policy, (int)policy); }

/* ---- warnings ------------------------------------------------------------- */

/* Off until options.c has read HUGEPOOL_WARN (nothing is said before). */
static atomic_bool warn_on;

void hp_warn_enable(bool on) { atomic_store(&warn_on, on); }

/* "hugepool[pid]<tag>: " and the message into line (room for a tail and
 * '\n' kept); its length, or 0 when nothing could be formatted. */
static size_t format_line(char *line, size_t room, const char *tag, const char *fmt, va_list ap) {
  int n = snprintf(line, room, "hugepool[%ld]%s: ", os_pid(), tag);
  if (n < 0 || (size_t)n >= room - 1 || vsnprintf(line + n, room - (size_t)n - 1, fmt, ap) < 0) return 0;
  return strlen(line);
}

void hp_warn(const char *fmt, ...) {
  if (!atomic_load_explicit(&warn_on, memory_order_relaxed)) return;
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  size_t len = format_line(line, sizeof(line), "", fmt, ap);
  va_end(ap);
  if (len == 0) return;
  line[len++] = '\n';
  os_write_stderr(line, len);
}

/* A size as people read it: "512 B", "64 KiB", "1.5 GiB" (one decimal when
 * not whole); the JSON keeps the exact bytes. */
void hp_human_size(char *out, size_t len, unsigned long long v) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (u < 5 && v >= (1ULL << (10 * (u + 1)))) u++;
  unsigned long long unit = 1ULL << (10 * u);
  if (v % unit == 0)
    (void)snprintf(out, len, "%llu %s", v / unit, units[u]);
  else
    (void)snprintf(out, len, "%.1f %s", (double)v / (double)unit, units[u]);
}

void hp_asked_size(char *out, size_t len, unsigned long long v) {
  unsigned long long unit = v >= 1ULL << 30 ? 1ULL << 30 : v >= 1ULL << 20 ? 1ULL << 20 : v >= 1024 ? 1024 : 1;
  const char *name = unit == 1ULL << 30 ? "GiB" : unit == 1ULL << 20 ? "MiB" : unit == 1024 ? "KiB" : "B";
  unsigned long long over = v % unit;
  if (over == 0)
    (void)snprintf(out, len, "%llu %s", v / unit, name);
  else if (over < 1024)
    (void)snprintf(out, len, "%llu %s + %llu B", v / unit, name, over);
  else
    (void)snprintf(out, len, "%.1f %s (%llu bytes)", (double)v / (double)unit, name, v);
}

/* ---- verbose decisions (warn.h) ----------------------------------------------- */

static atomic_bool trace_on;
static _Atomic long long trace_next_ns[HP_TRACE_KINDS]; /* 0: the kind has not spoken */
static atomic_ulong trace_unsaid[HP_TRACE_KINDS];
static const char *const trace_names[HP_TRACE_KINDS] = {
    "hugetlb", "cache hit", "fallback", "fork", "split", "beyond the pool share", "idle cache"};

void hp_trace_enable(bool on) { atomic_store(&trace_on, on); }

bool hp_trace_on(void) { return atomic_load_explicit(&trace_on, memory_order_relaxed); }

/* The first of a kind, then one a second: whoever moves the deadline on
 * speaks, the others are counted. */
static bool trace_speaks(hp_trace_kind kind, unsigned long *unsaid) {
  long long now = os_coarse_ns(), next = atomic_load_explicit(&trace_next_ns[kind], memory_order_relaxed);
  if ((next != 0 && now < next) ||
      !atomic_compare_exchange_strong_explicit(&trace_next_ns[kind], &next, now + 1000000000LL, memory_order_relaxed,
                                               memory_order_relaxed)) {
    atomic_fetch_add_explicit(&trace_unsaid[kind], 1, memory_order_relaxed);
    return false;
  }
  *unsaid = atomic_exchange_explicit(&trace_unsaid[kind], 0, memory_order_relaxed);
  return true;
}

void hp_trace(hp_trace_kind kind, const char *fmt, ...) {
  unsigned long unsaid;
  if (!hp_trace_on() || (unsigned)kind >= HP_TRACE_KINDS || !trace_speaks(kind, &unsaid)) return;
  char line[512], tag[32];
  (void)snprintf(tag, sizeof(tag), " verbose: %s", trace_names[kind]);
  va_list ap;
  va_start(ap, fmt);
  size_t len = format_line(line, sizeof(line), tag, fmt, ap);
  va_end(ap);
  if (len == 0) return;
  if (unsaid)
    (void)snprintf(line + len, sizeof(line) - len - 1, " (+%lu more of this kind since the last line)", unsaid);
  len = strlen(line);
  line[len++] = '\n';
  os_write_report(line, len);
}

/* ---- the embedder (embed.h) ----------------------------------------------- */

static const hp_embedder library_alone; /* all zero: the library's own behaviour */
static const hp_embedder *_Atomic embedding;

int hp_embed(const hp_embedder *embedder) {
  const hp_embedder *none = NULL;
  if (!embedder) {
    errno = EINVAL;
    return -1;
  }
  if (!atomic_compare_exchange_strong_explicit(&embedding, &none, embedder, memory_order_release,
                                               memory_order_relaxed)) {
    errno = EBUSY; /* said once, read as said */
    return -1;
  }
  return 0;
}

const hp_embedder *hp_embedding(void) {
  const hp_embedder *e = atomic_load_explicit(&embedding, memory_order_acquire);
  return e ? e : &library_alone;
}

/* ---- shortage lines ------------------------------------------------------- */

static atomic_uint hp_shortage_reports;

/* One line per process and page size: the first shortage, with what to do
 * about it.  Later ones are counted (failures), not reported, so a rank that
 * is refused twice does not print the same advice twice. */
void hp_report_shortage(size_t size, size_t page, int node) {
  const hp_embedder *embedder = hp_embedding();
  if (embedder->quiet_shortage) return;
  unsigned bit = page == HP_1G ? 2U : 1U;
  if (atomic_fetch_or(&hp_shortage_reports, bit) & bit) return;
  char pool[400], asked[32];
  hp_describe_shortage(pool, sizeof(pool), size, page, node);
  hp_asked_size(asked, sizeof(asked), size);
  const char *advice =
      embedder->shortage_advice ? embedder->shortage_advice : "allow a fallback with HUGEPOOL_POLICY=thp|small";
  /* First line: what was asked and the fix; then what else can be done. */
  hp_warn("cannot map %s on %s", asked, pool);
  hp_warn("  or %s; a job: 'hugepool doctor --need SIZE --ranks N' (MPI: UCX takes 3 pages per rank too); "
          "reported once, every refused request is counted in the statistics",
          advice);
}

/* The pool gets what is missing on top of what it holds: the number to
 * write is its total now plus the pages short, for the whole node's pool or
 * the one NUMA node asked for. */
void hp_describe_shortage(char *buf, size_t len, size_t size, size_t page, int node) {
  long avail = os_pool_available(page, node);
  long total = os_pool_total(page, node);
  long need = (long)((size + page - 1) / page);
  char where[32] = "", knob[96];
  if (node >= 0) (void)snprintf(where, sizeof(where), " on node %d", node); /* cannot truncate */
  if (node >= 0)
    (void)snprintf(knob, sizeof(knob), "/sys/devices/system/node/node%d/hugepages/hugepages-%zukB/nr_hugepages", node,
                   page >> 10);
  else
    (void)snprintf(
        knob, sizeof(knob), "%s",
        page == HP_1G ? "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages" : "/proc/sys/vm/nr_hugepages");
  char reserve[48];
  int used = snprintf(reserve, sizeof(reserve), "hugepool-reserve %ld%s", need, page == HP_1G ? " --size 1G" : "");
  if (node >= 0 && used > 0 && (size_t)used < sizeof(reserve))
    (void)snprintf(reserve + used, sizeof(reserve) - (size_t)used, " --node %d", node);
  if (avail >= 0 && total >= 0 && avail >= need) { /* taken meanwhile, or a cgroup's hugetlb limit */
    (void)snprintf(buf, len,
                   "%s hugetlb pages%s: need %ld pages, %ld free of %ld in the pool (enough now: another process "
                   "took them meanwhile, a cgroup hugetlb limit applies, or pages were added after an earlier "
                   "refusal, which is retried within 64 ms)",
                   page == HP_1G ? "1 GB" : "2 MB", where, need, avail, total);
    return;
  }
  long target = avail >= 0 && total >= 0 ? total + need - avail : need;
  (void)snprintf(buf, len, "%s hugetlb pages%s: need %ld pages, %ld free of %ld; as root: echo %ld > %s (or: %s)",
                 page == HP_1G ? "1 GB" : "2 MB", where, need, avail, total, target, knob,
                 reserve); /* truncation only shortens the message */
}

const char *hp_policy_name(hugepool_policy policy) {
  switch (policy) {
    case HUGEPOOL_POLICY_STRICT: return "strict";
    case HUGEPOOL_POLICY_THP: return "thp";
    case HUGEPOOL_POLICY_SMALL: return "small";
  }
  return "unknown";
}
