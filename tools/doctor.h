/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool doctor: shared declarations.
 *
 * doctor.c        command line, the report model, text and JSON output, verdict
 * doctor-node.c   what the kernel says: pools, reservable pages, mounts, THP,
 *                 cgroup limits, RLIMIT_MEMLOCK, MPI transport variables
 * doctor-helper.c whether hugepool-reserve is installed as install.sh does it,
 *                 and whether the calling user may use it
 *
 * Every file is read below a root directory ("/" unless --root names a
 * prepared tree for tests); nothing is ever written.
 */
#ifndef HUGEPOOL_DOCTOR_H
#define HUGEPOOL_DOCTOR_H

#include <stddef.h>

/* Messages and fix commands are cut at their fixed buffers on purpose. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif
#include <sys/stat.h>

/* ---- files below the root ---- */

/* Reads ROOT/rel (rel starts with '/') into buf, NUL-terminated.  Returns the
 * length, or -1 (missing, unreadable, or a symlink inside a --root tree). */
long dr_read(const char *rel, char *buf, size_t len);
/* Reads one unsigned number from ROOT/rel.  Returns 0, or -1. */
int dr_read_ull(const char *rel, unsigned long long *out);
/* lstat/stat of ROOT/rel. */
int dr_lstat(const char *rel, struct stat *st);
int dr_stat(const char *rel, struct stat *st);
/* opendir of ROOT/rel. */
#include <dirent.h>
DIR *dr_opendir(const char *rel);
/* 1 when the doctor reads the real system (no --root). */
int dr_real_root(void);

/* ---- the report ---- */

enum dr_severity { DR_INFO, DR_WARNING, DR_ERROR };

/* A section has rows; each row is one line of text and a JSON object of
 * key/value pairs.  Problems carry the exact command that fixes them. */
void dr_section(const char *name, const char *title);
/* Rows in the current section so far. */
int dr_section_rows(void);
void dr_row(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void dr_kv_num(const char *key, long long value);
void dr_kv_str(const char *key, const char *value);
void dr_problem(enum dr_severity sev, const char *fix, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

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
void dr_check_cgroups(const struct dr_need *need);
void dr_check_limits_env(void);
/* pool_short: the pool cannot cover the need, so the helper is the way out. */
void dr_check_helper(const struct dr_need *need, int pool_short);

#endif
