/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool-reserve: shared declarations.
 *
 * parse.c   pure parsers (numbers, arguments, config, grant table); no I/O,
 *           so the fuzz target and the unit tests call them directly; the
 *           config's parser is declared in config-parse.h (the doctor's).
 * the rest  the privileged core (see helper.h), linked into the helper and
 *           the Slurm SPANK plugin; its reserve_* functions below say which
 *           file holds them.
 */
#ifndef HUGEPOOL_RESERVE_H
#define HUGEPOOL_RESERVE_H

#include <stddef.h>
#include <sys/types.h>

#include "config-parse.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RESERVE_MAX_PAGES 10000000ULL /* largest PAGES accepted on the command line */
#define RESERVE_MAX_NODE 1023
#define RESERVE_MAX_GRANTS 512
#define RESERVE_GRANTS_MAX 32768 /* bytes */
#define RESERVE_PAGE_2M 2048U    /* kB */
#define RESERVE_PAGE_1G 1048576U /* kB */

/* ---- parse.c ---- */

/* Strict unsigned decimal: digits only, no sign, no space, no leading zero
 * (except "0" itself), value <= max.  Returns 0 and sets *out, or -1. */
int reserve_parse_count(const char *s, unsigned long long max, unsigned long long *out);

enum reserve_action { ACT_GRANT, ACT_STATUS, ACT_RELEASE, ACT_HELP };

struct reserve_request {
  enum reserve_action action;
  unsigned long long pages; /* ACT_GRANT: 1..RESERVE_MAX_PAGES */
  int node;                 /* -1: any node (global pool file) */
  unsigned size_kb;         /* RESERVE_PAGE_2M or RESERVE_PAGE_1G */
  int for_job;              /* the Slurm prolog: pages are a new job's, added to the user's grant */
  int json;                 /* ACT_STATUS: --json */
};

/* Returns 0, or -1 with *err set to a static message. */
int reserve_parse_args(int argc, char *const argv[], struct reserve_request *rq, const char **err);

struct reserve_grant_entry {
  uid_t uid;
  int node; /* -1: any */
  unsigned size_kb;
  unsigned long long pages;
};

/* A grant or a release being made: written to the table (with fsync)
 * before the pool changes, cleared in the same write that records the
 * outcome.  One left behind (the helper was killed in between) is settled
 * by the next locked call: for a grant, pages the pool gained are charged to
 * uid, or given back; for a release, pages the pool did not give up are
 * charged to uid again.  Either way every page in the pool is charged. */
enum { RESERVE_INTENT_GRANT = 1, RESERVE_INTENT_RELEASE = 2 };
struct reserve_intent {
  int active;     /* 0, RESERVE_INTENT_GRANT or RESERVE_INTENT_RELEASE */
  uid_t uid;
  int node; /* -1: any */
  unsigned size_kb;
  unsigned long long before; /* nr_hugepages before the write */
  unsigned long long delta;  /* pages asked of the kernel (grant) or given back to it (release) */
  unsigned long long pages;  /* uid's grant once all delta pages are in (grant) or out (release) */
};

struct reserve_grants {
  size_t n;
  struct reserve_grant_entry g[RESERVE_MAX_GRANTS];
  struct reserve_intent intent;
};

/* The grant table: "uid node|any size_kb pages" lines, at most one per
 * (uid, node, size), at most one "intent uid node|any size_kb before delta
 * pages" or "release uid node|any size_kb before delta pages" line, closed
 * by "end <checksum>" (16 hex digits of reserve_grants_checksum over
 * everything before that line).  An empty text
 * is an empty table; anything else without a matching end line is corrupt. */
unsigned long long reserve_grants_checksum(const char *text, size_t len);
int reserve_parse_grants(const char *text, size_t len, struct reserve_grants *gs);
/* "any" for -1, else the node's number: the one spelling of a node everywhere. */
void reserve_node_name(char *buf, size_t cap, int node);
/* Returns the length written (without NUL), or 0 if cap is too small. */
size_t reserve_format_grants(const struct reserve_grants *gs, char *buf, size_t cap);

/* ---- the privileged core ---- */

struct reserve_caller {
  uid_t uid;
  gid_t gid;
  const gid_t *groups; /* supplementary groups, as many as the caller has */
  int ngroups;
  unsigned long job;  /* Slurm job id when called from the plugin, else 0 */
  const char *source; /* "helper" or "slurm" */
};

/* Exit codes of the helper; the core functions return them too, and
 * RESERVE_BUSY (the lock stayed held; the helper exits 1) so that the Slurm
 * epilog can retry. */
enum { RESERVE_OK = 0, RESERVE_FAIL = 1, RESERVE_USAGE = 2, RESERVE_BUSY = 3 };

/* state.c: is RLIMIT_FSIZE (soft, raised to the hard limit if needed) large
 * enough to rewrite the grant table in one piece?  1 yes, 0 no. */
int reserve_fsize_ok(void);
/* Is RLIMIT_NOFILE (soft, raised to the hard limit if needed) large enough
 * for every file a call opens at once?  1 yes, 0 no. */
int reserve_nofile_ok(void);
/* config.c: loads and checks the root-owned config file (owner, mode, type). */
int reserve_load_config(struct reserve_config *c, char *err, size_t errlen);
/* authorize.c: is the caller in the configured group (or root), owner of a
 * job if required? */
int reserve_authorize(const struct reserve_config *c, const struct reserve_caller *who, char *err, size_t errlen);
/* pool.c: a grant, the status. */
int reserve_grant(const struct reserve_config *c, const struct reserve_caller *who, const struct reserve_request *rq,
                  char *msg, size_t msglen);
/* status.c: --status, as text or (json) one JSON object. */
int reserve_status(const struct reserve_caller *who, int fd, int json);
int reserve_status_pool(int fd, const char *why, int json);
/* release.c */
int reserve_release(const struct reserve_caller *who, char *msg, size_t msglen);
/* state.c: the Slurm job registry (written by root only): who owns which
 * job on this node. */
int reserve_job_register(unsigned long job, uid_t uid);
int reserve_job_unregister(unsigned long job);
/* 1: uid owns a registered job (but except_job), 0: none, -1: the registry
 * cannot be read (errno; fail closed: neither "yes" nor "no"). */
int reserve_user_has_job(uid_t uid, unsigned long except_job);
/* audit.c: one line to syslog(LOG_AUTHPRIV). */
void reserve_audit(const struct reserve_caller *who, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif

#endif
