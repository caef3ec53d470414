/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool doctor: is hugepool-reserve installed the way install.sh (or the
 * hugepool-helper package) installs it, and may the calling user use it?
 * The expected state is setuid-helper/README.md's table: binary
 * root:<group> 2711 on a filesystem without nosuid, config root:root 0644
 * that the helper's own parser accepts, state directory root:<group> 0750
 * with lock and grants root:<group> 0660, the pool's sysfs files
 * <group>-writable, and the tmpfiles.d rule that restores them at boot. */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "doctor.h"
#include "doctor-util.h"
#include "config-parse.h"
#include "helper-paths.h" /* the helper's paths, as it is built (cmake/helper-paths.cmake) */

#define DOCTOR_RESERVE_CONF HELPER_PATH_CONF
#define DOCTOR_RESERVE_STATE_DIR HELPER_PATH_STATE_DIR
#define DOCTOR_RESERVE_JOBS_DIR HELPER_PATH_JOBS_DIR
#define TMPFILES_RULE "/etc/tmpfiles.d/hugepool.conf"         /* install.sh's */
#define TMPFILES_RULE_PKG "/usr/lib/tmpfiles.d/hugepool.conf" /* the hugepool-helper package's */

/* Group and user names: NSS on the real system, the tree's /etc files below
 * --root (so tests never depend on the machine's accounts). */
static int file_lookup(const char *file, const char *name, unsigned long id, int by_name, char *out_name, size_t nlen,
                       unsigned long *out_id, char *members, size_t mlen) {
  char text[65536];
  if (dr_read(file, text, sizeof text) <= 0) return -1;
  char *save = NULL;
  for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    char *f[4] = {0};
    char *p = line;
    for (int i = 0; i < 4 && p; i++) {
      f[i] = p;
      p = strchr(p, ':');
      if (p) *p++ = '\0';
    }
    if (!f[2]) continue;
    unsigned long fid = strtoul(f[2], NULL, 10);
    if (by_name ? strcmp(f[0], name) == 0 : fid == id) {
      if (out_name) (void)snprintf(out_name, nlen, "%s", f[0]);
      if (out_id) *out_id = fid;
      if (members) (void)snprintf(members, mlen, "%s", f[3] ? f[3] : "");
      return 0;
    }
  }
  return -1;
}

static void group_name(gid_t gid, char *out, size_t len) {
  if (dr_real_root()) {
    const struct group *g = getgrgid(gid);
    if (g) {
      (void)snprintf(out, len, "%s", g->gr_name);
      return;
    }
  } else if (file_lookup("/etc/group", NULL, gid, 0, out, len, NULL, NULL, 0) == 0) {
    return;
  }
  (void)snprintf(out, len, "%lu", (unsigned long)gid);
}

static int group_gid(const char *name, gid_t *gid) {
  if (dr_real_root()) {
    const struct group *g = getgrnam(name);
    if (!g) return -1;
    *gid = g->gr_gid;
    return 0;
  }
  unsigned long id;
  if (file_lookup("/etc/group", name, 0, 1, NULL, 0, &id, NULL, 0) != 0) return -1;
  *gid = (gid_t)id;
  return 0;
}

static void user_name(uid_t uid, char *out, size_t len) {
  if (dr_real_root()) {
    const struct passwd *pw = getpwuid(uid);
    if (pw) {
      (void)snprintf(out, len, "%s", pw->pw_name);
      return;
    }
  } else if (file_lookup("/etc/passwd", NULL, uid, 0, out, len, NULL, NULL, 0) == 0) {
    return;
  }
  (void)snprintf(out, len, "%lu", (unsigned long)uid);
}

/* The helper checks the caller's real gid and supplementary groups. */
static int caller_in_group(gid_t gid) {
  if (getgid() == gid) return 1;
  gid_t groups[RESERVE_MAX_GROUPS];
  int n = getgroups(RESERVE_MAX_GROUPS, groups);
  for (int i = 0; i < n; i++)
    if (groups[i] == gid) return 1;
  return 0;
}

/* The mount holding `path` (longest matching mount point) has nosuid. */
static int on_nosuid(const char *path, char *mnt_out, size_t len) {
  char mounts[65536];
  size_t best = 0;
  int nosuid = 0;
  if (dr_read("/proc/mounts", mounts, sizeof mounts) <= 0) return 0;
  char *save = NULL;
  for (char *line = strtok_r(mounts, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    char dev[256], dir[1024], type[64], opts[512];
    if (sscanf(line, "%255s %1023s %63s %511s", dev, dir, type, opts) != 4) continue;
    size_t dl = strlen(dir);
    int match = strcmp(dir, "/") == 0 || (strncmp(path, dir, dl) == 0 && (path[dl] == '/' || path[dl] == '\0'));
    if (match && (dl >= best || strcmp(dir, "/") == 0) && (dl > best || best == 0)) {
      best = strcmp(dir, "/") == 0 ? 1 : dl;
      char o[520];
      (void)snprintf(o, sizeof o, ",%s,", opts);
      nosuid = strstr(o, ",nosuid,") != NULL;
      (void)snprintf(mnt_out, len, "%s", dir);
    }
  }
  return nosuid;
}

/* Where the helper is installed: beside this program (an install prefix of
 * its own: bin/ and sbin/), where this build installs it, on PATH, then the
 * usual places.  Below --root only the fixed places, inside the tree. */
#ifndef DOCTOR_HELPER_INSTALLED
#define DOCTOR_HELPER_INSTALLED "/usr/local/bin/hugepool-reserve"
#endif
static int found_at(const char *path, char *out, size_t len) {
  struct stat st;
  char real[PATH_MAX];
  if (lstat(path, &st) != 0 || !realpath(path, real)) return 0;
  if (stat(real, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  (void)snprintf(out, len, "%s", real);
  return 1;
}

static const char *find_helper(void) {
  /* sbin/: where installs before the helper moved to bin/ put it. */
  static const char *const where[] = {DOCTOR_HELPER_INSTALLED, "/usr/local/bin/hugepool-reserve",
                                      "/usr/bin/hugepool-reserve", "/usr/local/sbin/hugepool-reserve",
                                      "/usr/sbin/hugepool-reserve"};
  static char found[PATH_MAX];
  struct stat st;
  if (dr_real_root()) {
    char self[PATH_MAX], cand[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    char *slash = n > 0 ? (self[n] = '\0', strrchr(self, '/')) : NULL;
    if (slash) {
      *slash = '\0';
      const char *beside[] = {"/hugepool-reserve", "/../sbin/hugepool-reserve"};
      for (int i = 0; i < 2; i++) {
        (void)snprintf(cand, sizeof cand, "%s%s", self, beside[i]);
        if (found_at(cand, found, sizeof found)) return found;
      }
    }
    if (found_at(DOCTOR_HELPER_INSTALLED, found, sizeof found)) return found;
    const char *path = getenv("PATH");
    while (path && *path) {
      size_t len = strcspn(path, ":");
      if (len > 0 && path[0] == '/') {
        (void)snprintf(cand, sizeof cand, "%.*s/hugepool-reserve", (int)len, path);
        if (found_at(cand, found, sizeof found)) return found;
      }
      path += len + (path[len] == ':');
    }
  }
  for (size_t i = 0; i < sizeof where / sizeof where[0]; i++)
    if (dr_lstat(where[i], &st) == 0) return where[i];
  return NULL;
}

/* The helper is optional: nothing about it stops an allocation, so its
 * problems never fail the verdict.  They are notes, and warnings when the
 * pool is short (then the helper is the user's way to grow it). */
/* The helper is optional: its installation problems are notes with their
 * fix, whatever the pool.  What stops this user from reserving pages through
 * it (not installed, not in its group, outside a job, over the site's limit)
 * is a note too, and a warning when the pool is short: then it is what
 * stands between the user and the pages the job needs. */
static const enum dr_severity helper_sev = DR_INFO;
static enum dr_severity use_sev = DR_INFO;

static void check_owned(const char *path, int dir, mode_t mode, uid_t uid, gid_t gid, const char *gname, int *bad) {
  struct stat st;
  char fix[600];
  if (dr_lstat(path, &st) != 0) {
    if (errno != ENOENT) {
      dr_row("%s: not visible to this user (%s); run the doctor as root to check it", path, strerror(errno));
      return;
    }
    if (dir)
      (void)snprintf(fix, sizeof fix, "install -d -o root -g %s -m %04o %s", gname, (unsigned)mode, path);
    else
      (void)snprintf(fix, sizeof fix, "install -o root -g %s -m %04o /dev/null %s", gname, (unsigned)mode, path);
    dr_problem(helper_sev, fix, "%s is missing (the helper never creates its state files)", path);
    *bad = 1;
    return;
  }
  int type_ok = dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode);
  if (!type_ok || st.st_uid != uid || st.st_gid != gid || (st.st_mode & 07777) != mode) {
    char have[64];
    group_name(st.st_gid, have, sizeof have);
    (void)snprintf(fix, sizeof fix, "chown root:%s %s && chmod %04o %s", gname, path, (unsigned)mode, path);
    dr_problem(helper_sev, type_ok ? fix : "", "%s is %s uid %lu group %s mode %04o; the helper needs %s root:%s %04o",
               path,
               S_ISDIR(st.st_mode)   ? "a directory"
               : S_ISREG(st.st_mode) ? "a file"
                                     : "neither file nor directory",
               (unsigned long)st.st_uid, have, (unsigned)(st.st_mode & 07777), dir ? "a directory" : "a file", gname,
               (unsigned)mode);
    *bad = 1;
  }
}

/* The binary: owned by root, setgid to its own group, mode 2711, not on a
 * nosuid mount.  Returns 0 with *out and its group's name in gname, or -1
 * when it cannot be looked at. */
static int check_helper_binary(const char *bin, struct stat *out, char *gname, size_t glen, int *bad_out) {
  struct stat st;
  int bad = 0;
  if (dr_stat(bin, &st) != 0) {
    dr_row("%s: cannot stat", bin);
    return -1;
  }
  group_name(st.st_gid, gname, glen);
  const char *expect_group = st.st_gid != 0 ? gname : "hugepool";
  dr_row("binary %s: uid %lu, group %s, mode %04o", bin, (unsigned long)st.st_uid, gname,
         (unsigned)(st.st_mode & 07777));
  dr_kv_str("installed", bin);
  dr_kv_num("uid", (long long)st.st_uid);
  dr_kv_str("group", gname);
  dr_kv_num("mode", (long long)(st.st_mode & 07777));
  char fix[800];
  if (!S_ISREG(st.st_mode) || st.st_uid != 0 || st.st_gid == 0 || (st.st_mode & 07777) != 02711) {
    gid_t have;
    int make_group = st.st_gid == 0 && group_gid(expect_group, &have) != 0;
    (void)snprintf(fix, sizeof fix, "%s%s%schown root:%s %s && chmod 2711 %s   (as root)",
                   make_group ? "groupadd --system " : "", make_group ? expect_group : "", make_group ? "; " : "",
                   expect_group, bin, bin);
    dr_problem(helper_sev, fix,
               "%s must be owned by root, setgid to its own group (not root), mode 2711 (it is uid %lu, group %s, "
               "mode %04o)",
               bin, (unsigned long)st.st_uid, gname, (unsigned)(st.st_mode & 07777));
    bad = 1;
  }
  char mnt[1024] = "/";
  if (on_nosuid(bin, mnt, sizeof mnt)) {
    (void)snprintf(fix, sizeof fix, "mount -o remount,suid %s   (as root; or install the helper elsewhere)", mnt);
    dr_problem(helper_sev, fix, "%s is on %s, mounted nosuid: its setgid bit is ignored", bin, mnt);
    bad = 1;
  }
  *out = st;
  *bad_out = bad;
  return 0;
}

/* The config: where the helper reads it, checked as the helper checks it.
 * Returns 1 with the config in *out, or 0 (*bad set). */
static int check_helper_config(struct reserve_config *out, int *bad) {
  struct reserve_config cfg;
  int cfg_ok = 0;
  char text[RESERVE_CONF_MAX + 2];
  struct stat cs;
  if (dr_lstat(DOCTOR_RESERVE_CONF, &cs) != 0) {
    /* The directory of the config the helper was built with. */
    char dir[sizeof DOCTOR_RESERVE_CONF];
    (void)snprintf(dir, sizeof dir, "%s", DOCTOR_RESERVE_CONF);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) *slash = '\0';
    char fix[800];
    (void)snprintf(fix, sizeof fix,
                   "install -d -m 0755 %s && printf '%%s\\n' 'max_pages 4096' 'max_fraction 0.5' "
                   "'min_free_mb 2048' 'group hugepool-users' 'require_job no' > " DOCTOR_RESERVE_CONF
                   " && chmod 0644 " DOCTOR_RESERVE_CONF "   (as root, then adjust the limits)",
                   dir);
    dr_problem(helper_sev, fix, "the helper's config %s is missing: it refuses every request", DOCTOR_RESERVE_CONF);
    *bad = 1;
  } else if (!S_ISREG(cs.st_mode) || cs.st_uid != 0 || (cs.st_mode & 022)) {
    dr_problem(helper_sev, "chown root:root " DOCTOR_RESERVE_CONF " && chmod 0644 " DOCTOR_RESERVE_CONF "   (as root)",
               "the helper's config %s must be a regular file owned by root, not writable by group or others (uid "
               "%lu, mode %04o): the helper refuses it",
               DOCTOR_RESERVE_CONF, (unsigned long)cs.st_uid, (unsigned)(cs.st_mode & 07777));
    *bad = 1;
  } else {
    long n = dr_read(DOCTOR_RESERVE_CONF, text, sizeof text);
    char err[256] = "";
    if (n < 0 || n > RESERVE_CONF_MAX) {
      dr_problem(helper_sev, "sudoedit " DOCTOR_RESERVE_CONF, "the helper's config %s is unreadable or over %d bytes",
                 DOCTOR_RESERVE_CONF, RESERVE_CONF_MAX);
      *bad = 1;
    } else if (reserve_parse_config(text, (size_t)n, &cfg, err, sizeof err) != 0) {
      dr_problem(helper_sev, "sudoedit " DOCTOR_RESERVE_CONF, "the helper refuses its config %s: %s", DOCTOR_RESERVE_CONF,
                 err);
      *bad = 1;
    } else {
      cfg_ok = 1;
      dr_row("config %s: max_pages %llu, max_fraction %u.%03u, min_free_mb %llu, group %s, require_job %s",
             DOCTOR_RESERVE_CONF, cfg.max_pages, cfg.max_permille / 1000, cfg.max_permille % 1000, cfg.min_free_mb,
             cfg.group, cfg.require_job ? "yes" : "no");
      dr_kv_str("config", DOCTOR_RESERVE_CONF);
      dr_kv_num("max_pages", (long long)cfg.max_pages);
      dr_kv_num("max_permille", cfg.max_permille);
      dr_kv_num("min_free_mb", (long long)cfg.min_free_mb);
      dr_kv_str("users_group", cfg.group);
      dr_kv_num("require_job", cfg.require_job);
    }
  }
  if (cfg_ok) *out = cfg;
  return cfg_ok;
}

/* The state files, the pool files' group access and the boot rule that
 * keeps it, for a helper of group hgid (gname). */
static void check_helper_state(gid_t hgid, const char *gname, int *bad) {
  char fix[800];
  check_owned(DOCTOR_RESERVE_STATE_DIR, 1, 0750, 0, hgid, gname, bad);
  check_owned(DOCTOR_RESERVE_STATE_DIR "/lock", 0, 0660, 0, hgid, gname, bad);
  check_owned(DOCTOR_RESERVE_STATE_DIR "/grants", 0, 0660, 0, hgid, gname, bad);
  struct stat ss;
  const char *pool = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";
  if (dr_stat(pool, &ss) == 0 && (ss.st_gid != hgid || !(ss.st_mode & S_IWGRP))) {
    (void)snprintf(fix, sizeof fix,
                   "chgrp %s /sys/kernel/mm/hugepages/hugepages-*/nr_hugepages "
                   "/sys/devices/system/node/node*/hugepages/hugepages-*/nr_hugepages && chmod 0664 "
                   "/sys/kernel/mm/hugepages/hugepages-*/nr_hugepages "
                   "/sys/devices/system/node/node*/hugepages/hugepages-*/nr_hugepages   (as root)",
                   gname);
    dr_problem(helper_sev, fix,
               "%s is not writable by group %s (sysfs forgot the mode at boot?): the helper cannot "
               "resize the pool",
               pool, gname);
    *bad = 1;
  }
  struct stat ts;
  if (dr_lstat(TMPFILES_RULE, &ts) != 0 && dr_lstat(TMPFILES_RULE_PKG, &ts) != 0) {
    (void)snprintf(fix, sizeof fix,
                   "printf '%%s\\n' 'z /sys/kernel/mm/hugepages/hugepages-*/nr_hugepages 0664 root %s -' 'z "
                   "/sys/devices/system/node/node*/hugepages/hugepages-*/nr_hugepages 0664 root %s -' "
                   "'d " DOCTOR_RESERVE_JOBS_DIR " 0755 root root -' > " TMPFILES_RULE "   (as root)",
                   gname, gname);
    dr_problem(helper_sev, fix, "%s is missing: the pool files lose their group write access at the next boot",
               TMPFILES_RULE);
  }
}

/* Is this shell in a Slurm job the helper's registry (root-owned) knows? */
static int in_own_job(void) {
  const char *job = getenv("SLURM_JOB_ID");
  char path[256];
  struct stat js;
  int in_job = 0;
  if (job && strspn(job, "0123456789") == strlen(job) && strlen(job) < 20) {
    (void)snprintf(path, sizeof path, DOCTOR_RESERVE_JOBS_DIR "/%s", job);
    in_job = dr_lstat(path, &js) == 0 && S_ISREG(js.st_mode) && js.st_uid == 0;
  }
  return in_job;
}

/* May this user use it?  bad: installation problems; cfg: the config when
 * cfg_ok. */
static const char *helper_may_use(int bad, int cfg_ok, const struct reserve_config cfg, uid_t uid, const char *me) {
  char fix[800];
  const char *may = "no";
  if (bad) {
    may = "no (its installation problems are listed below)";
  } else if (!cfg_ok) {
    may = "no (config)";
  } else if (uid == 0) {
    may = "yes (root)";
  } else {
    gid_t ugid;
    if (group_gid(cfg.group, &ugid) != 0) {
      (void)snprintf(fix, sizeof fix, "groupadd %s && usermod -aG %s %s   (as root; %s logs in again)", cfg.group,
                     cfg.group, me, me);
      dr_problem(helper_sev, fix,
                 "group '%s' named in %s does not exist: nobody but root "
                 "may use the helper",
                 cfg.group, DOCTOR_RESERVE_CONF);
      may = "no (its group does not exist)";
    } else if (!caller_in_group(ugid)) {
      (void)snprintf(fix, sizeof fix, "usermod -aG %s %s   (as root; %s logs in again)", cfg.group, me, me);
      dr_problem(use_sev, fix, "user %s is not in group '%s': the helper refuses them", me,
                 cfg.group);
      may = "no (not in its group)";
    } else if (cfg.require_job) {
      if (!in_own_job()) {
        dr_problem(use_sev,
                   "srun --hugepages=N ...   (or run hugepool-reserve inside your job)",
                   "the config requires a Slurm job of yours on this node (require_job yes) and this shell is not in "
                   "one: the helper refuses until it is");
        may = "only inside a Slurm job on this node";
      } else {
        may = "yes";
      }
    } else {
      may = "yes";
    }
  }
  return may;
}

void dr_check_helper(const struct dr_need *need, int pool_short) {
  dr_section("helper", "hugepool-reserve (pool helper for users without root)");
  use_sev = pool_short ? DR_WARNING : DR_INFO;
  const char *bin = find_helper();
  uid_t uid = getuid();
  char me[64];
  user_name(uid, me, sizeof me);
  unsigned long long want = need->pages_2m ? need->pages_2m : 1;
  if (!bin) {
    dr_row("not installed");
    dr_kv_str("installed", "no");
    if (pool_short && geteuid() != 0)
      dr_problem(use_sev,
                 "install the hugepool-helper package, or run setuid-helper/install.sh from hugepool's source "
                 "tree   (as root)",
                 "the pool is short and hugepool-reserve is not installed: only root can grow the pool");
    return;
  }
  struct stat st;
  char gname[64];
  int bad = 0;
  if (check_helper_binary(bin, &st, gname, sizeof gname, &bad) != 0) return;
  struct reserve_config cfg = {0};
  int cfg_ok = check_helper_config(&cfg, &bad);
  if (st.st_gid != 0) check_helper_state(st.st_gid, gname, &bad);
  const char *may = helper_may_use(bad, cfg_ok, cfg, uid, me);
  if (cfg_ok && want > cfg.max_pages)
    dr_problem(use_sev, "", "the job needs %llu 2 MB pages; the site allows one user %llu through the helper", want,
               cfg.max_pages);
  dr_row("may %s use it: %s", me, may);
  dr_kv_str("user", me);
  dr_kv_str("may_use", may);
}
