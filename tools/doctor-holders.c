/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool doctor: who holds the node's hugetlb pages.  A job told "0 free
 * of 100" asks first who has them; ps, top and a batch system's accounting
 * cannot say (a process's hugetlb pages are not in its RSS).  The kernel
 * says, per process, in /proc/PID/status ("HugetlbPages:", kB: the pages it
 * has faulted in, of every size; readable by every user as ps's view is,
 * unless /proc is mounted hidepid or the process is in another PID
 * namespace).  Rules kept:
 *  1. What a process wrote is hostile: its name goes out as printable ASCII
 *     alone (the kernel escapes only '\n' and '\\' in it; ESC, BEL, CR pass),
 *     cut at 15 characters; so do user names.
 *  2. Bounded: status is read a line at a time into a fixed buffer (a
 *     Groups: line can be many KiB), the rest of a longer line skipped; the
 *     LISTED largest holders are kept, the others summed.
 *  3. A process that ends while it is read is skipped, not an error.
 * The pages the pools have in use and the sum of what processes map differ:
 * shared pages count once per process that maps them (and, where a large
 * shared mapping shares its page tables, in the process that faulted them
 * in); pages of a SysV segment, a hugetlbfs file or a memfd count in no
 * process while nothing maps them; pages reserved and not yet touched count
 * as free. */
#define _GNU_SOURCE
#include <dirent.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"
#include "doctor-util.h"

#define LISTED 10 /* processes listed, largest first */

struct holder {
  long pid;
  unsigned long uid;
  unsigned long long kb;
  char name[16];
};

/* What one status file says. */
struct status {
  int has_mm;       /* a VmRSS: line: the process has memory of its own */
  int has_field;    /* a HugetlbPages: line */
  int zombie_group; /* its first thread has exited, others run (State: Z, Threads: > 1) */
  unsigned long long kb;
  unsigned long uid; /* effective, as ps shows it */
  char name[16];
};

/* Rule 1: printable ASCII or '?', up to the end or len - 1 characters. */
static void clean(const char *from, char *out, size_t len) {
  size_t n = 0;
  for (; *from && *from != '\n' && n + 1 < len; from++) {
    char c = *from;
    if (c < 0x20 || c > 0x7e) c = '?';
    out[n++] = c;
  }
  out[n] = '\0';
}

/* "key:\t..." at the start of line: the value after the blanks, or NULL. */
static const char *value_of(const char *line, const char *key) {
  size_t klen = strlen(key);
  if (strncmp(line, key, klen) != 0) return NULL;
  line += klen;
  while (*line == ' ' || *line == '\t') line++;
  return line;
}

/* Reads rel (a status file) a line at a time; 0, or -1 when it is gone. */
static int read_status(const char *rel, struct status *st) {
  memset(st, 0, sizeof *st);
  FILE *f = dr_fopen(rel);
  if (!f) return -1;
  char line[256];
  int state_z = 0;
  long threads = 0;
  while (fgets(line, sizeof line, f)) {
    size_t len = strlen(line);
    if (len && line[len - 1] != '\n') { /* rule 2: the rest of a long line */
      int c;
      while ((c = getc(f)) != EOF && c != '\n') {
      }
    }
    const char *v;
    if ((v = value_of(line, "Name:")) != NULL)
      clean(v, st->name, sizeof st->name);
    else if ((v = value_of(line, "State:")) != NULL)
      state_z = *v == 'Z';
    else if ((v = value_of(line, "Uid:")) != NULL) {
      char *end = NULL;
      (void)strtoul(v, &end, 10);      /* real */
      st->uid = strtoul(end, NULL, 10); /* effective */
    } else if ((v = value_of(line, "Threads:")) != NULL)
      threads = strtol(v, NULL, 10);
    else if (value_of(line, "VmRSS:"))
      st->has_mm = 1;
    else if ((v = value_of(line, "HugetlbPages:")) != NULL) {
      char *end = NULL;
      unsigned long long kb = strtoull(v, &end, 10);
      if (end != v && strncmp(end, " kB", 3) == 0) {
        st->has_field = 1;
        st->kb = kb;
      }
    }
  }
  (void)fclose(f);
  st->zombie_group = state_z && threads > 1;
  return 0;
}

/* A thread group whose first thread has exited: its memory shows in the
 * status of a thread still running. */
static void read_other_thread(long pid, struct status *st) {
  char rel[64];
  (void)snprintf(rel, sizeof rel, "/proc/%ld/task", pid);
  DIR *d = dr_opendir(rel);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    char *end = NULL;
    long tid = strtol(e->d_name, &end, 10);
    if (*end != '\0' || tid <= 0 || tid == pid) continue;
    struct status t;
    (void)snprintf(rel, sizeof rel, "/proc/%ld/task/%ld/status", pid, tid);
    if (read_status(rel, &t) == 0 && t.has_mm) {
      st->has_mm = t.has_mm;
      st->has_field = t.has_field;
      st->kb = t.kb;
      break;
    }
  }
  closedir(d);
}

static int parse_pid(const char *name, long *pid) {
  if (name[0] < '1' || name[0] > '9') return -1;
  char *end = NULL;
  long v = strtol(name, &end, 10);
  if (*end != '\0' || v <= 0) return -1;
  *pid = v;
  return 0;
}

/* Keeps top[] (n of LISTED) sorted, largest first. */
static void keep_top(struct holder *top, size_t *n, const struct holder *h) {
  size_t at = *n;
  while (at > 0 && top[at - 1].kb < h->kb) at--;
  if (at >= LISTED) return;
  size_t last = *n < LISTED ? *n : LISTED - 1;
  memmove(&top[at + 1], &top[at], (last - at) * sizeof *top);
  top[at] = *h;
  if (*n < LISTED) (*n)++;
}

/* The user's name for uid (the real node only: a --root tree's uids are not
 * this system's), cleaned; a uid seen before is not looked up again (NSS may
 * be a directory server). */
static const char *user_name(unsigned long uid, char *buf, size_t len) {
  static unsigned long seen_uid[LISTED];
  static char seen_name[LISTED][64];
  static size_t nseen;
  for (size_t i = 0; i < nseen; i++)
    if (seen_uid[i] == uid) {
      (void)snprintf(buf, len, "%s", seen_name[i]);
      return buf;
    }
  (void)snprintf(buf, len, "uid %lu", uid);
  struct passwd pw, *found = NULL;
  char store[16384];
  if (dr_real_root() && getpwuid_r((uid_t)uid, &pw, store, sizeof store, &found) == 0 && found && found->pw_name[0])
    clean(found->pw_name, buf, len < 33 ? len : 33);
  if (nseen < LISTED) {
    seen_uid[nseen] = uid;
    (void)snprintf(seen_name[nseen++], sizeof seen_name[0], "%s", buf);
  }
  return buf;
}

/* Every pool's pages in use (total - free), in kB, the 2 MB pages reserved
 * and not yet touched, and whether any pool has pages. */
static void pools_in_use(unsigned long long *in_use_kb, unsigned long long *reserved_2m, int *have_pool) {
  *in_use_kb = 0;
  *reserved_2m = 0;
  *have_pool = 0;
  DIR *d = dr_opendir("/sys/kernel/mm/hugepages");
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    unsigned long long kb = 0, total = 0, free = 0, resv = 0;
    char path[PATH_MAX];
    if (dr_parse_pool_dir(e->d_name, &kb) != 0 || kb == 0) continue;
    (void)snprintf(path, sizeof path, "/sys/kernel/mm/hugepages/%s/nr_hugepages", e->d_name);
    if (dr_read_ull(path, &total) != 0) continue;
    (void)snprintf(path, sizeof path, "/sys/kernel/mm/hugepages/%s/free_hugepages", e->d_name);
    (void)dr_read_ull(path, &free);
    (void)snprintf(path, sizeof path, "/sys/kernel/mm/hugepages/%s/resv_hugepages", e->d_name);
    (void)dr_read_ull(path, &resv);
    *have_pool |= total > 0;
    if (total > free && total - free <= ULLONG_MAX / kb / 2) *in_use_kb += (total - free) * kb;
    if (kb == 2048) *reserved_2m = resv;
  }
  closedir(d);
}

void dr_check_holders(void) {
  unsigned long long in_use_kb, reserved_2m;
  int have_pool;
  pools_in_use(&in_use_kb, &reserved_2m, &have_pool);
  dr_section("holders", "who holds the pools' pages (per process: /proc/PID/status HugetlbPages)");
  if (!have_pool && in_use_kb == 0) {
    dr_row("the pools are empty: no process can hold a page");
    dr_kv_num("processes", 0);
    return;
  }
  DIR *d = dr_opendir("/proc");
  if (!d) {
    dr_row("/proc cannot be read: holders unknown");
    return;
  }
  struct holder top[LISTED];
  size_t ntop = 0, nholders = 0, with_mm = 0, with_field = 0;
  unsigned long long mapped_kb = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    long pid;
    char rel[64];
    struct status st;
    if (parse_pid(e->d_name, &pid) != 0) continue;
    (void)snprintf(rel, sizeof rel, "/proc/%ld/status", pid);
    if (read_status(rel, &st) != 0) continue; /* rule 3 */
    if (st.zombie_group) read_other_thread(pid, &st);
    with_mm += st.has_mm != 0;
    with_field += st.has_field != 0;
    if (!st.has_field || st.kb == 0) continue; /* no memory, none mapped, or a kernel without the field */
    struct holder h = {.pid = pid, .uid = st.uid, .kb = st.kb};
    memcpy(h.name, st.name, sizeof h.name);
    nholders++;
    mapped_kb += h.kb;
    keep_top(top, &ntop, &h);
  }
  closedir(d);
  if (with_mm > 0 && with_field == 0) {
    dr_row("this kernel reports no hugetlb pages per process (HugetlbPages: since Linux 4.4)");
    dr_kv_num("processes", -1);
    return;
  }
  char user[40];
  unsigned long long listed_kb = 0;
  for (size_t i = 0; i < ntop; i++) {
    const struct holder *h = &top[i];
    listed_kb += h->kb;
    int mib = h->kb >= 1024;
    dr_row("pid %-8ld %-12s %-15s %8llu %s", h->pid, user_name(h->uid, user, sizeof user), h->name,
           mib ? h->kb >> 10 : h->kb, mib ? "MiB" : "KiB");
    dr_kv_num("pid", h->pid);
    dr_kv_num("uid", (long long)h->uid);
    dr_kv_str("user", user);
    dr_kv_str("name", h->name);
    dr_kv_num("hugetlb_kb", (long long)h->kb);
  }
  if (nholders > ntop) {
    dr_row("%zu more process%s: %llu MiB", nholders - ntop, nholders - ntop == 1 ? "" : "es",
           (mapped_kb - listed_kb) >> 10);
    dr_kv_num("more_processes", (long long)(nholders - ntop));
    dr_kv_num("more_hugetlb_kb", (long long)(mapped_kb - listed_kb));
  }
  /* Pages freed while /proc was read: the smaller count of the two. */
  unsigned long long after_kb, after_resv;
  int after_pool;
  pools_in_use(&after_kb, &after_resv, &after_pool);
  if (after_kb < in_use_kb) in_use_kb = after_kb;
  dr_row("%zu process%s map%s %llu MiB of hugetlb pages; the pools have %llu MiB in use, and %llu 2 MB page%s "
         "reserved and not yet touched (counted free)",
         nholders, nholders == 1 ? "" : "es", nholders == 1 ? "s" : "", mapped_kb >> 10, in_use_kb >> 10, reserved_2m,
         reserved_2m == 1 ? "" : "s");
  dr_kv_num("processes", (long long)nholders);
  dr_kv_num("mapped_kb", (long long)mapped_kb);
  dr_kv_num("in_use_kb", (long long)in_use_kb);
  dr_kv_num("reserved_pages_2m", (long long)reserved_2m);
  /* 4 MiB of slack for pages mapped while /proc was read. */
  if (in_use_kb > mapped_kb + 4096)
    dr_problem(DR_INFO, "ipcs -m",
               "%llu MiB of the pools' pages are in use and mapped by no process this user can see: a SysV shared "
               "memory segment (ipcs -m lists them, ipcrm removes one), a file on a hugetlbfs mount or a memfd "
               "nobody maps now, pages still pinned by a device, or processes hidden from this user (another "
               "container or PID namespace; /proc mounted hidepid)",
               (in_use_kb - mapped_kb) >> 10);
}
