/* SPDX-License-Identifier: BSD-3-Clause */
/* Whether this CPU translates a 2 MB page with one TLB entry, measured
 * (tlb-probe.c; `hugepool doctor --measure`, bench/tlb.cpp).
 *
 * On bare metal it does.  In a virtual machine the CPU translates a guest
 * address twice, and caches the result at the smaller of the guest's and
 * the host's page size: a guest's 2 MB page on memory its host maps with
 * 4 KB pages fills 512 TLB entries, as 4 KB pages do.  hugetlb pages there
 * still save page faults, pinning, translation entries and a level of
 * page walk, but not TLB reach (bench/RESULTS.md section 31).
 *
 * The test: a dependent pointer chase through 256 cache lines (16 KiB,
 * half the first-level data cache of current x86 and arm64 server cores),
 * laid over 4 of the region's 4 KB parts and then over 256, with the same
 * cache sets used in both.  Over 256 parts each step needs a different 4 KB
 * translation: where those are separate TLB entries, more than a
 * first-level data TLB holds (64-96 on current CPUs), nearly every step
 * misses it; where one 2 MB entry covers them, nothing changes.  A 4 KB-page
 * region measured the same way gives what a miss costs on this CPU.  (512
 * lines, a full 32 KiB cache, left some buffers of an AMD EPYC guest, by
 * their address, at 3-3.5 ns a step where others took 1.25: RESULTS 32.)
 */
#ifndef HUGEPOOL_TLB_PROBE_H
#define HUGEPOOL_TLB_PROBE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TLB_PROBE_REGION (2u << 20) /* bytes a probe chases over */
#define TLB_PROBE_FEW 4               /* 4 KB parts of the compact layout */
#define TLB_PROBE_MANY 256            /* 4 KB parts of the spread layout */

struct tlb_probe {
  double ns_few;  /* ns per step, the lines over TLB_PROBE_FEW 4 KB parts */
  double ns_many; /* ns per step, one line in each of TLB_PROBE_MANY parts */
};

/* Measures the 2 MB at p (writable; its contents are overwritten): the
 * fastest of several runs of each layout, the two layouts' runs alternating
 * (a slow spell of a shared machine reaches both), after a warm-up. */
void tlb_probe_region(void *p, struct tlb_probe *out);

enum tlb_verdict {
  TLB_ONE_ENTRY,  /* spreading the lines costs nothing: one entry */
  TLB_4K_ENTRIES, /* it costs what it costs on 4 KB pages */
  TLB_UNCLEAR,    /* in between, or the 4 KB reference shows no cost */
};

/* ref: a 4 KB-page region; page: the region judged.  The reference must
 * slow down by a fifth or more when spread; page then counts as one entry
 * when it slows by less than a third of the reference's slowdown, as 4 KB
 * entries when by more than two thirds of it. */
enum tlb_verdict tlb_probe_judge(const struct tlb_probe *ref, const struct tlb_probe *page);

/* "one entry per 2 MB page", "4 KB entries", "unclear". */
const char *tlb_verdict_name(enum tlb_verdict v);

/* Maps 2 MB of 4 KB pages (THP off) and measures them: the reference.
 * Returns 0, or -1 with errno. */
int tlb_probe_reference(struct tlb_probe *out);

#ifdef __cplusplus
}
#endif

#endif
