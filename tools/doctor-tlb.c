/* SPDX-License-Identifier: BSD-3-Clause */
/* The doctor's TLB check: whether this CPU translates a 2 MB page with one
 * TLB entry (tlb-probe.h says why a virtual machine may not).
 *
 * Without --measure it only reads: in a virtual machine (in_virtual_machine
 * says how it knows) it says that the answer depends on the host, and how
 * to measure it.  With --measure it maps up to four free 2 MB pages of the
 * pool (2 MB pages whatever the default huge page size), privately, for
 * about 50 ms, measures each against 2 MB of 4 KB pages, and unmaps them.
 * Pages are faulted in with MADV_POPULATE_WRITE, so a pool or a cgroup
 * limit that cannot back them is an error to report, never a SIGBUS.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "doctor-util.h"
#include "doctor.h"
#include "tlb-probe.h"

/* glibc has MAP_HUGE_SHIFT, and MADV_POPULATE_WRITE from 2.35 on. */
#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << MAP_HUGE_SHIFT)
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

enum { MAX_PAGES = 4 };

/* Reads ROOT/rel's first line, without its newline; "" when absent. */
static void first_line(const char *rel, char *out, size_t len) {
  if (dr_read(rel, out, len) <= 0) out[0] = '\0';
  out[strcspn(out, "\n")] = '\0';
}

/* Whether this is a virtual machine, and how the doctor knows it (why).
 * x86: the CPU's "hypervisor" flag (the first flags line of /proc/cpuinfo),
 * and nothing else: a bare-metal cloud instance has its cloud's DMI vendor
 * and no flag.  Without a flags line (arm64, POWER): /sys/hypervisor/type
 * (Xen), or the DMI vendor of a hypervisor, where the product is not a
 * bare-metal instance ("*.metal"). */
static int in_virtual_machine(char *why, size_t len) {
  char text[16384];
  if (dr_read("/proc/cpuinfo", text, sizeof text) > 0) {
    const char *flags = strstr(text, "\nflags");
    if (flags) {
      const char *end = strchr(flags + 1, '\n');
      const char *hit = strstr(flags, " hypervisor");
      if (!hit || (end && hit > end) || (hit[11] != ' ' && hit[11] != '\n' && hit[11] != '\0')) return 0;
      (void)snprintf(why, len, "the CPU's hypervisor flag");
      return 1;
    }
  }
  char line[256];
  first_line("/sys/hypervisor/type", line, sizeof line);
  if (line[0]) {
    (void)snprintf(why, len, "/sys/hypervisor/type: %s", line);
    return 1;
  }
  static const struct {
    const char *vendor, *product; /* product: NULL for any */
  } dmi[] = {
      {"QEMU", NULL},      {"KVM", NULL},           {"Xen", NULL},
      {"VMware", NULL},    {"innotek GmbH", NULL},  {"Parallels", NULL},
      {"Bochs", NULL},     {"Amazon EC2", NULL},    {"Google", "Google Compute Engine"},
      {"OpenStack", NULL}, {"Alibaba Cloud", NULL}, {"Microsoft Corporation", "Virtual Machine"},
  };
  char vendor[256], product[256];
  first_line("/sys/class/dmi/id/sys_vendor", vendor, sizeof vendor);
  first_line("/sys/class/dmi/id/product_name", product, sizeof product);
  size_t plen = strlen(product);
  if (plen >= 6 && strcmp(product + plen - 6, ".metal") == 0) return 0;
  for (size_t i = 0; i < sizeof dmi / sizeof dmi[0]; i++) {
    if (strncmp(vendor, dmi[i].vendor, strlen(dmi[i].vendor)) != 0) continue;
    if (dmi[i].product && strcmp(product, dmi[i].product) != 0) continue;
    (void)snprintf(why, len, "DMI: %s%s%s", vendor, product[0] ? ", " : "", product);
    return 1;
  }
  return 0;
}

static long long ps(double ns) { return (long long)(ns * 1000.0 + 0.5); }

static void probe_row(const char *what, int page, const struct tlb_probe *p, const char *verdict) {
  dr_row("%-22s %5.2f ns a step spread over %d x 4 KB, %5.2f over %d x 4 KB (%.2fx)%s%s", what, p->ns_few, TLB_PROBE_FEW,
         p->ns_many, TLB_PROBE_MANY, p->ns_many / p->ns_few, verdict ? ": " : "", verdict ? verdict : "");
  dr_kv_str("region", page < 0 ? "4k-reference" : "hugetlb-2m");
  if (page >= 0) dr_kv_num("page", page + 1);
  dr_kv_num("few_parts_ps", ps(p->ns_few));
  dr_kv_num("many_parts_ps", ps(p->ns_many));
  if (verdict) dr_kv_str("verdict", verdict);
}

/* Maps up to MAX_PAGES free 2 MB pages, as many as the pool gives. */
static void *map_pages(int *n, int *err) {
  for (int want = MAX_PAGES; want >= 1; want /= 2) {
    size_t len = (size_t)want * TLB_PROBE_REGION;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_HUGE_2MB, -1, 0);
    if (p == MAP_FAILED) {
      *err = errno;
      continue;
    }
    if (madvise(p, len, MADV_POPULATE_WRITE) == 0) {
      *n = want;
      return p;
    }
    *err = errno;
    (void)munmap(p, len);
    if (*err == EINVAL) break; /* a kernel before 5.14 */
  }
  return NULL;
}

static void measure(int vm) {
  struct tlb_probe ref;
  if (tlb_probe_reference(&ref) != 0) {
    dr_problem(DR_INFO, "", "TLB not measured: 2 MB of 4 KB pages could not be mapped (%s)", strerror(errno));
    return;
  }
  int n = 0, err = 0;
  char *pages = map_pages(&n, &err);
  if (!pages) {
    probe_row("4 KB pages (reference)", -1, &ref, NULL);
    dr_kv_num("virtual_machine", vm);
    dr_problem(DR_INFO, "hugepool doctor --measure   (again, with a free page in the pool)",
               "TLB not measured: no 2 MB page could be mapped and faulted in (%s)",
               err == EINVAL   ? "MADV_POPULATE_WRITE needs kernel 5.14"
               : err == ENOMEM ? "no free page in the 2 MB pool"
               : err == EFAULT ? "a hugetlb cgroup limit stopped the fault"
                               : strerror(err));
    return;
  }
  struct tlb_probe got[MAX_PAGES];
  for (int i = 0; i < n; i++) tlb_probe_region(pages + (size_t)i * TLB_PROBE_REGION, &got[i]);
  struct tlb_probe ref2; /* the reference again: one number for both ends */
  if (tlb_probe_reference(&ref2) == 0) {
    if (ref2.ns_few < ref.ns_few) ref.ns_few = ref2.ns_few;
    if (ref2.ns_many < ref.ns_many) ref.ns_many = ref2.ns_many;
  }
  if (munmap(pages, (size_t)n * TLB_PROBE_REGION) != 0)
    dr_problem(DR_INFO, "", "the measured pages could not be unmapped (%s): they go back when the doctor exits",
               strerror(errno));
  probe_row("4 KB pages (reference)", -1, &ref, NULL);
  dr_kv_num("virtual_machine", vm);
  int split = 0, one = 0;
  for (int i = 0; i < n; i++) {
    enum tlb_verdict v = tlb_probe_judge(&ref, &got[i]);
    char what[32];
    (void)snprintf(what, sizeof what, "2 MB hugetlb page %d", i + 1);
    probe_row(what, i, &got[i], tlb_verdict_name(v));
    split += v == TLB_4K_ENTRIES;
    one += v == TLB_ONE_ENTRY;
  }
  if (split)
    dr_row("=> %d of %d pages translated with 4 KB TLB entries", split, n);
  else if (one == n)
    dr_row("=> one TLB entry per 2 MB page (%d of %d pages)", one, n);
  else
    dr_row("=> unclear (%d of %d pages one entry)", one, n);
  dr_kv_num("pages", n);
  dr_kv_num("pages_4k_entries", split);
  dr_kv_num("pages_one_entry", one);
  if (split && vm) {
    dr_problem(DR_WARNING,
               "ask the administrators of this virtual machine's host to back its memory with 2 MB or 1 GB pages "
               "(hugetlbfs or THP for the guest's memory)",
               "2 MB pages are translated here with 4 KB TLB entries (%d of %d pages measured): this virtual "
               "machine's host maps its memory with 4 KB pages. hugetlb pages here still save page faults, pinning, "
               "page-table entries and a level of page walk, but not TLB reach, and benchmarks of TLB-bound code "
               "will not show their gain",
               split, n);
  } else if (split || one != n) {
    dr_problem(DR_INFO, "hugepool doctor --measure   (again, on an idle CPU)",
               "the TLB measurement is unclear: the 4 KB reference slowed %.2fx when spread over 512 pages, and %d "
               "of %d 2 MB pages slowed %s (a busy CPU%s)",
               ref.ns_many / ref.ns_few, n - one, n, split ? "as much" : "part as much",
               vm ? "" : "; not expected on bare metal, where a 2 MB page is one entry");
  }
}

void dr_check_tlb(int do_measure) {
  char why[320] = "";
  int vm = in_virtual_machine(why, sizeof why);
  if (!do_measure && !vm) return;
  dr_section("tlb", "whether a 2 MB page is one TLB entry here");
  if (!do_measure) {
    dr_row("a virtual machine (%s): not measured", why);
    dr_kv_num("virtual_machine", vm);
    dr_kv_str("virtual_machine_by", why);
    dr_problem(DR_INFO, "hugepool doctor --measure",
               "this is a virtual machine (%s): whether its 2 MB pages get 2 MB TLB entries depends on how the host "
               "maps its memory (with 4 KB pages they do not, and only faults, pinning and page walks gain)",
               why);
    return;
  }
  measure(vm);
}
