/* SPDX-License-Identifier: BSD-3-Clause */
/* Whether a 2 MB page is one TLB entry here, measured (tlb-probe.h). */
#define _GNU_SOURCE
#include "tlb-probe.h"

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

enum {
  LINE = 64,
  PART = 4096,
  LINES = TLB_PROBE_MANY, /* 16 KiB: half of any first-level data cache */
  PER_PART = PART / LINE,
  LAPS = 200, /* passes over the lines per timed run */
  RUNS = 15,  /* timed runs; the fastest counts */
};

_Static_assert(TLB_PROBE_FEW * PER_PART == LINES, "the compact layout fills its parts");
_Static_assert((unsigned long)TLB_PROBE_MANY * PART <= TLB_PROBE_REGION, "the spread layout fits the region");

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* Line i of the chase.  Over TLB_PROBE_FEW parts it sits at byte i * 64:
 * part i / 64, line i % 64.  Over TLB_PROBE_MANY it sits in part
 * (i % 64) * TLB_PROBE_FEW + i / 64, at the same line i % 64: address bits
 * 0-13 are those of the compact layout, so any cache of up to 16 KiB a way
 * (x86's 64 sets, arm64's 256) indexes the two layouts' lines into the same
 * sets; only the pages differ. */
static char *line_at(char *base, unsigned parts, unsigned i) {
  unsigned line = i % PER_PART, part = parts == TLB_PROBE_FEW ? i / PER_PART : line * TLB_PROBE_FEW + i / PER_PART;
  return base + (size_t)part * PART + (size_t)line * LINE;
}

/* Links the lines, in a fixed random order (the same for every region),
 * into one cycle, and returns its start. */
static char **link_lines(char *base, unsigned parts) {
  uint16_t order[LINES];
  for (unsigned i = 0; i < LINES; i++) order[i] = (uint16_t)i;
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (unsigned i = LINES - 1; i > 0; i--) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    unsigned j = (unsigned)((x >> 33) % i);
    uint16_t t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  for (unsigned i = 0; i < LINES; i++) {
    char **from = (char **)(void *)line_at(base, parts, order[i]);
    *from = line_at(base, parts, order[(i + 1) % LINES]);
  }
  return (char **)(void *)line_at(base, parts, order[0]);
}

/* One timed run over the layout: linked afresh (the two layouts share some
 * lines), warmed, then LAPS passes; ns per step.  Never instrumented: a
 * sanitizer's check on every load would be what it times (TSan: 4.32 and
 * 4.78 ns, a 1.1x spread where the plain build measures 2.75x). */
__attribute__((no_sanitize("address", "thread"))) static double chase_once(char *base, unsigned parts) {
  char **p = link_lines(base, parts);
  for (unsigned i = 0; i < LINES * 4; i++) p = (char **)(void *)*p; /* warm-up */
  double t0 = now_ns();
  for (unsigned i = 0; i < LINES * LAPS; i++) p = (char **)(void *)*p;
  double t = (now_ns() - t0) / (LINES * LAPS);
  __asm__ volatile("" : : "r"(p) : "memory"); /* keep the chase */
  return t;
}

/* The two layouts' runs alternate, so that a slow spell of a shared
 * machine (a busy sibling, a lower clock) reaches both alike; the fastest
 * run of each counts. */
void tlb_probe_region(void *p, struct tlb_probe *out) {
  (void)chase_once(p, TLB_PROBE_FEW); /* the CPU's clock up to speed */
  for (int r = 0; r < RUNS; r++) {
    double few = chase_once(p, TLB_PROBE_FEW), many = chase_once(p, TLB_PROBE_MANY);
    if (r == 0 || few < out->ns_few) out->ns_few = few;
    if (r == 0 || many < out->ns_many) out->ns_many = many;
  }
}

enum tlb_verdict tlb_probe_judge(const struct tlb_probe *ref, const struct tlb_probe *page) {
  if (!(ref->ns_few > 0) || !(page->ns_few > 0)) return TLB_UNCLEAR;
  double ref_slow = ref->ns_many / ref->ns_few - 1, page_slow = page->ns_many / page->ns_few - 1;
  if (ref_slow < 0.2) return TLB_UNCLEAR;
  if (page_slow < ref_slow / 3) return TLB_ONE_ENTRY;
  if (page_slow > ref_slow * 2 / 3) return TLB_4K_ENTRIES;
  return TLB_UNCLEAR;
}

const char *tlb_verdict_name(enum tlb_verdict v) {
  switch (v) {
    case TLB_ONE_ENTRY: return "one entry per 2 MB page";
    case TLB_4K_ENTRIES: return "4 KB entries";
    case TLB_UNCLEAR: break;
  }
  return "unclear";
}

int tlb_probe_reference(struct tlb_probe *out) {
  void *p = mmap(NULL, TLB_PROBE_REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return -1;
  (void)madvise(p, TLB_PROBE_REGION, MADV_NOHUGEPAGE);
  memset(p, 0, TLB_PROBE_REGION);
  tlb_probe_region(p, out);
  (void)munmap(p, TLB_PROBE_REGION);
  return 0;
}
