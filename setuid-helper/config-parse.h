/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool-reserve: the site config and its parser (parse.c; pure, no I/O).
 *
 * The one header of the helper that code outside it includes: the doctor
 * (tools/doctor-helper.c) judges a config exactly as the helper does by
 * calling this parser.  The helper's own files see it through reserve.h.
 */
#ifndef HUGEPOOL_RESERVE_CONFIG_PARSE_H
#define HUGEPOOL_RESERVE_CONFIG_PARSE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RESERVE_CONF_MAX 4096  /* bytes */
#define RESERVE_MAX_GROUPS 256 /* groups looked up for membership of the config's group (plugin, doctor) */

struct reserve_config {
  unsigned long long max_pages;         /* per user on this node, in 2 MB pages */
  unsigned max_permille;                /* hugetlb memory <= this/1000 of MemTotal */
  unsigned long long min_free_mb;       /* MemAvailable that must remain */
  char group[64];                       /* group allowed to use the helper */
  int require_job;                      /* caller must own a Slurm job on the node */
  int require_isolation;                /* refuse a job's tasks when its hugetlb cgroup cannot be set up */
  int default_job_pages_set;            /* default_job_pages was given */
  unsigned long long default_job_pages; /* reservation limit of a job without --hugepages */
};

/* Parses the site config.  Returns 0, or -1 with a message in err. */
int reserve_parse_config(const char *text, size_t len, struct reserve_config *c, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
