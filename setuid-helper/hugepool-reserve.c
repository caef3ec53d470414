/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool-reserve: let a user size the node's hugepage pool within site
 * limits.  Installed setgid to a group that may write the pool's sysfs files
 * (see README.md); it trusts nothing it inherits.
 *
 *   hugepool-reserve PAGES [--node N] [--size 2M|1G]
 *   hugepool-reserve --status | --release | --help
 *
 * Rules kept, before anything else is done:
 *  1. argc == 0 (or argv[0] == "") is a usage error.
 *  2. Descriptors 0-2 are open (on /dev/null if they were closed), every
 *     other inherited descriptor is closed.
 *  3. The environment is cleared; nothing is taken from it.
 *  4. Every signal but SIGKILL and SIGSTOP is blocked; umask 077; cwd /.
 *  5. The caller's identity is the real uid/gid and groups, never argv.
 *  6. Nothing is run: no exec, no shell, no fork.
 */
#define _GNU_SOURCE /* close_range */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "reserve.h"

extern char **environ;

static const char usage[] =
    "usage: hugepool-reserve PAGES [--node N] [--size 2M|1G]\n"
    "       hugepool-reserve --status [--json] | --release | --help | --version\n"
    "\n"
    "PAGES   make sure you hold at least PAGES pages in the hugepage pool of this\n"
    "        node (or of NUMA node N); repeating the call, e.g. once per MPI rank,\n"
    "        does not add more.  Site limits apply (see --status and your admin).\n"
    "        A size with its unit (512M, 2G) asks for the pages of --size it needs.\n"
    "--status   pool per node (total, free, reserved, surplus) and your grants;\n"
    "           --json: the same as one JSON object\n"
    "--release  give back every page you were granted\n";

/* Descriptors 0-2 must be open, or a file we open later could become
 * "stderr" and receive our messages; everything else inherited is closed. */
static void sanitize_fds(void) {
  int fd;
  for (fd = 0; fd <= 2; fd++) {
    if (fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
      if (open("/dev/null", O_RDWR | O_NOCTTY) != fd) _exit(RESERVE_FAIL);
    }
  }
  if (close_range(3, ~0U, 0) != 0) {
    struct rlimit rl;
    long max = 65536;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY && (long)rl.rlim_max < max)
      max = (long)rl.rlim_max;
    for (fd = 3; fd < max; fd++) close(fd);
  }
}

static void say(int fd, const char *prefix, const char *text) {
  dprintf(fd, "hugepool-reserve: %s%s%s", prefix, text, text[0] != '\0' && text[strlen(text) - 1] == '\n' ? "" : "\n");
}

#ifdef HUGEPOOL_RESERVE_TEST_ROOT
/* Test builds only: show what the helper itself sees after sanitizing. */
static int test_env(void) {
  char **e;
  DIR *d;
  struct dirent *ent;
  int n = 0;
  for (e = environ; e != NULL && *e != NULL; e++) {
    dprintf(1, "env: %s\n", *e);
    n++;
  }
  dprintf(1, "env-count: %d\n", n);
  d = opendir("/proc/self/fd");
  if (d == NULL) return RESERVE_FAIL;
  dprintf(1, "fds:");
  while ((ent = readdir(d)) != NULL) {
    if (ent->d_name[0] == '.' || atoi(ent->d_name) == dirfd(d)) continue;
    dprintf(1, " %s", ent->d_name);
  }
  dprintf(1, "\n");
  closedir(d);
  dprintf(1, "umask: %03o\n", (unsigned)umask(077));
  return RESERVE_OK;
}
#endif

/* A step of main returns 0 to go on, or END(status) to exit with status. */
#define END(status) (-(status) - 1)
#define END_STATUS(rc) (-(rc) - 1)

/* Before anything else: descriptors, environment, signals, umask, cwd,
 * RLIMIT_FSIZE, the log.  0, or -1: nothing may run. */
static int main_sanitize(void) {
  sigset_t all;
  sanitize_fds();
  if (clearenv() != 0) environ = NULL;
  /* Ignore keyboard and terminal signals: an update runs to its end.  (A
   * caller can still SIGKILL or SIGSTOP us; see README.md, threat model.) */
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, NULL);
  umask(077);
  if (chdir("/") != 0) return -1;
  /* A small RLIMIT_FSIZE would cut our writes short: soft limit up to the
   * hard one here; the core refuses to write the table if that is not enough. */
  (void)reserve_fsize_ok();
  openlog("hugepool-reserve", LOG_PID, LOG_AUTHPRIV);
  return 0;
}

/* The arguments: 0 to go on with rq; END(status) when done here
 * (--version, --help, a usage error). */
static int main_args(int argc, char *argv[], const struct reserve_caller *who, struct reserve_request *rq) {
  const char *perr;
  if (argc == 2 && strcmp(argv[1], "--version") == 0) {
    dprintf(1, "hugepool-reserve %s\n", HUGEPOOL_VERSION);
    return END(RESERVE_OK);
  }
#ifdef HUGEPOOL_RESERVE_TEST_ROOT
  /* Test builds only; the parsers are the same objects in every build. */
  if (argc == 2 && strcmp(argv[1], "--test-env") == 0) return END(test_env());
#endif
  if (reserve_parse_args(argc, argv, rq, &perr) != 0) {
    say(2, "", perr);
    dprintf(2, "%s", usage);
    /* The arguments themselves are not logged: they are the caller's text. */
    reserve_audit(who, "action=usage outcome=refused reason=\"%s\"", perr);
    return END(RESERVE_USAGE);
  }
  if (rq->action == ACT_HELP) {
    dprintf(1, "%s", usage);
    return END(RESERVE_OK);
  }
  return 0;
}

/* Room for as many groups as Linux allows (65536): a smaller array would
 * refuse, or cut, a caller with many.  0, or -1. */
static int main_groups(struct reserve_caller *who) {
  static gid_t groups[65536];
  int ng = getgroups((int)(sizeof groups / sizeof groups[0]), groups);
  if (ng < 0) {
    say(2, "", "cannot read your supplementary groups");
    return -1;
  }
  who->groups = groups;
  who->ngroups = ng;
  return 0;
}

/* The config and the caller's right to ask: 0 to go on, or END(status).
 * A caller outside the group still gets --status's pool figures (what
 * sysfs shows everyone) and the reason, never the table (README.md). */
static int main_allowed(const struct reserve_caller *who, const struct reserve_request *rq, struct reserve_config *conf,
                        char *msg, size_t msglen) {
  char what[128], node[16];
  int rc = reserve_load_config(conf, msg, msglen);
  if (rc == 0 && reserve_authorize(conf, who, msg, msglen) != 0) {
    if (rq->action == ACT_STATUS) return END(reserve_status_pool(1, msg, rq->json));
    rc = -1;
  }
  if (rc == 0) return 0;
  reserve_node_name(node, sizeof node, rq->node);
  if (rq->action == ACT_GRANT)
    snprintf(what, sizeof what, "action=grant size=%ukB node=%s request=%llu granted=0", rq->size_kb, node, rq->pages);
  else
    snprintf(what, sizeof what, "action=%s", rq->action == ACT_STATUS ? "status" : "release");
  say(2, "refused: ", msg);
  reserve_audit(who, "%s outcome=refused reason=\"%s\"", what, msg);
  return END(RESERVE_FAIL);
}

static int main_run(const struct reserve_config *conf, const struct reserve_caller *who,
                    const struct reserve_request *rq, char *msg, size_t msglen) {
  int rc;
  if (rq->action == ACT_STATUS) return reserve_status(who, 1, rq->json);
  if (rq->action == ACT_RELEASE)
    rc = reserve_release(who, msg, msglen);
  else if (rq->action == ACT_GRANT)
    rc = reserve_grant(conf, who, rq, msg, msglen);
  else
    return RESERVE_USAGE;
  say(rc == RESERVE_OK ? 1 : 2, rc == RESERVE_OK ? "" : "failed: ", msg);
  return rc == RESERVE_OK ? RESERVE_OK : RESERVE_FAIL;
}

int main(int argc, char *argv[]) {
  struct reserve_request rq;
  struct reserve_config conf;
  struct reserve_caller who;
  char msg[2048];
  int rc;
  /* With argc == 0, argv[1] would be the first environment string. */
  /* (Linux >= 5.18 turns argc == 0 into argv[0] == "": refuse that too.) */
  if (argc < 1 || argv == NULL || argv[0] == NULL || argv[0][0] == '\0') return RESERVE_USAGE;
  if (main_sanitize() != 0) return RESERVE_FAIL;
  memset(&who, 0, sizeof who);
  who.uid = getuid();
  who.gid = getgid();
  who.source = "helper";
  if ((rc = main_args(argc, argv, &who, &rq)) != 0) return END_STATUS(rc);
  if (main_groups(&who) != 0) return RESERVE_FAIL;
  if ((rc = main_allowed(&who, &rq, &conf, msg, sizeof msg)) != 0) return END_STATUS(rc);
  return main_run(&conf, &who, &rq, msg, sizeof msg);
}
