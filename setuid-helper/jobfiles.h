/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool-reserve: the Slurm plugin's files beside a job's registry entry
 * (jobfiles.c): <jobs dir>/<job><ext>, ext ".failed", ".iso" or ".kept".
 * Used by spank_hugepool.c alone. */
#ifndef HUGEPOOL_RESERVE_JOBFILES_H
#define HUGEPOOL_RESERVE_JOBFILES_H

#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

/* Written whole by root (the text; errors are left to the audit log). */
void jobfile_write(uint32_t job, const char *ext, const char *text);
/* A root-owned regular file, NUL-terminated into buf; -1 if none. */
int jobfile_read(uint32_t job, const char *ext, char *buf, size_t cap);
/* Removes the job's files of these extensions (NULL-ended). */
void jobfile_drop(uint32_t job, const char *const *exts);

#pragma GCC visibility pop

#endif
