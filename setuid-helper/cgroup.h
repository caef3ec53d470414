/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool-reserve: what cgroup.c (detection, names, the caller's job) and
 * cgroup-job.c (a job's cgroup made, entered and removed by the root side)
 * share.  Their public functions are declared in helper.h; nothing here is
 * used by any other file. */
#ifndef HUGEPOOL_RESERVE_CGROUP_H
#define HUGEPOOL_RESERVE_CGROUP_H

#include <stddef.h>

#include "helper.h"

#pragma GCC visibility push(hidden)

/* <hierarchy>/CG_DIR/job_<id>: every job cgroup of hugepool's. */
#define CG_DIR "hugepool"

/* A directory of the hierarchy opened O_NOFOLLOW, checked to be on a cgroup
 * file system and root-owned (else EPERM); -1 with errno. */
int cg_open_dir(int at, const char *name);
/* A task's cgroup in the hierarchy h (from /proc/<pid>/cgroup; pid
 * "self": the caller's own). */
int cg_task_cgroup(const struct cg_hier *h, const char *pid, char *out, size_t cap);

#pragma GCC visibility pop

#endif
