/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool doctor: the checks, and which file does what.
 *
 * doctor.c        command line, the need, the order of the checks, the verdict
 * doctor-util.c   files below the root, the report model, text and JSON output
 *                 (doctor-util.h; used by every file, calls none of them)
 * doctor-pools.c  what the kernel says of the pools: per size and node,
 *                 reservable pages, hugetlbfs mounts, THP
 * doctor-holders.c which processes map the pools' pages, and what no process
 *                 maps
 * doctor-cgroups.c the hugetlb cgroup limits that apply to this process
 * doctor-env.c    HUGEPOOL_* variables, RLIMIT_MEMLOCK, MPI transport variables
 * doctor-tlb.c    whether a 2 MB page is one TLB entry (measured only with
 *                 --measure; tlb-probe.c does the measuring)
 * doctor-helper.c whether hugepool-reserve is installed as install.sh does it,
 *                 and whether the calling user may use it
 *
 * Every file is read below a root directory ("/" unless --root names a
 * prepared tree for tests); nothing is ever written.  This header declares
 * the checks, which doctor.c calls in order.
 */
#ifndef HUGEPOOL_DOCTOR_H
#define HUGEPOOL_DOCTOR_H

#include <stddef.h>

/* ---- the checks ---- */

/* 2 MB pages UCX's SysV shared memory takes per rank when the pool has room
 * (UCX 1.13, Debian's MPICH 4.0.2: 1 to 8 ranks on one node, 3 pages each). */
#define DR_UCX_PAGES_PER_RANK 3ULL

struct dr_need {
  unsigned long long pages_2m; /* pages the user wants free for this job (0: at least one) */
};

/* Fills *free_2m with the free 2 MB pages the process could map now
 * (pool free minus reserved, bounded by cgroup limits later). */
void dr_check_pools(const struct dr_need *need, unsigned long long *free_2m, unsigned long long *reservable_2m);
void dr_check_mounts_thp(void);
/* A pool's directory name to its page size: "hugepages-2048kB" -> 2048;
 * -1 for any other name (doctor-pools.c). */
int dr_parse_pool_dir(const char *name, unsigned long long *kb);
/* The processes that map hugetlb pages, largest first (doctor-holders.c). */
void dr_check_holders(void);
/* In a virtual machine, a note; with do_measure, the measurement. */
void dr_check_tlb(int do_measure);
void dr_check_cgroups(const struct dr_need *need);
void dr_check_limits_env(void);
/* HUGEPOOL_CUDA set: the driver, its devices, the CUDA interposer (doctor-cuda.c). */
void dr_check_cuda(void);
/* pool_short: the pool cannot cover the need, so the helper is the way out. */
void dr_check_helper(const struct dr_need *need, int pool_short);

#endif
