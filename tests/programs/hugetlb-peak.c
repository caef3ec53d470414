/* SPDX-License-Identifier: BSD-3-Clause */
/* hugetlb-peak REPORT -- program [args...]
 *
 * Runs the program in a session of its own and, until it exits, reads the
 * kernel's view of every process of that session, and of their descendants
 * that started sessions of their own (a server's children: PostgreSQL's
 * backends call setsid), every 10 ms:
 * Private_Hugetlb and Shared_Hugetlb of /proc/<pid>/smaps_rollup.  REPORT
 * gets the peak of their sum over the session, the peak of one process, and
 * the number of samples; also, for the held-against-touched table, the peak
 * of the session's Rss (the pages it touched, summed over its processes)
 * and the peak of the pool pages held (HugePages_Total - Free + Rsvd of
 * /proc/meminfo, against its value at the start: the caller holds the pool
 * lock, so nothing else changes it).  Exits as the program did (128 + signal when it
 * was killed), so a caller sees its status as if it had run it directly.
 * Its stdin, stdout and stderr are the program's.  Processes of the session
 * (or descendants) still there when the program has exited (a child stuck in a hang the
 * program's timeout did not reach) are killed with SIGKILL, so they hold no
 * pool pages for the runs and tests after; REPORT counts them. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Of process `pid` (fields 4, 6 and 22 of /proc/<pid>/stat): its parent,
 * session and start time; false if it is gone or a zombie (which maps
 * nothing and cannot be killed). */
static bool proc_info(const char *pid, long *ppid, long *sid, unsigned long long *start) {
  char path[64], buf[1024];
  snprintf(path, sizeof(path), "/proc/%s/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  /* The command name may hold spaces and parentheses: fields follow the last ')'. */
  char *p = strrchr(buf, ')');
  long pgrp = 0;
  char state = 0;
  if (!p || sscanf(p + 1, " %c %ld %ld %ld %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &state,
                   ppid, &pgrp, sid, start) != 5)
    return false;
  return state != 'Z' && state != 'X';
}

/* The processes found in the program's session or descending from one of
 * them, by pid and start time (a pid may be reused). */
static struct tracked {
  long pid;
  unsigned long long start;
} *tracked;
static size_t n_tracked, cap_tracked;

static bool is_tracked(long pid, unsigned long long start) {
  for (size_t i = 0; i < n_tracked; i++)
    if (tracked[i].pid == pid && (start == 0 || tracked[i].start == start)) return true;
  return false;
}

/* Whether process `name` (a d_name of /proc) is the program's: of its
 * session, or a child of one already found (readdir lists a parent, of the
 * lower pid, first, mostly; a later sample finds the others). */
static bool ours(const char *name, long sid) {
  long ppid = 0, s = -1;
  unsigned long long start = 0;
  if (!proc_info(name, &ppid, &s, &start)) return false;
  long pid = strtol(name, NULL, 10);
  if (is_tracked(pid, start)) return true;
  if (s != sid && !is_tracked(ppid, 0)) return false;
  if (n_tracked == cap_tracked) {
    size_t cap = cap_tracked ? cap_tracked * 2 : 256;
    struct tracked *t = realloc(tracked, cap * sizeof(*t));
    if (!t) return true; /* counted, not remembered */
    tracked = t;
    cap_tracked = cap;
  }
  tracked[n_tracked++] = (struct tracked){pid, start};
  return true;
}

/* From one read of a process's smaps_rollup, in KiB (0 if gone):
 * Private_Hugetlb + Shared_Hugetlb, and Rss (which leaves hugetlb out). */
static void rollup_kib(const char *pid, long *hugetlb, long *rss) {
  char path[300], line[256]; /* pid: a d_name of /proc */
  *hugetlb = *rss = 0;
  snprintf(path, sizeof(path), "/proc/%s/smaps_rollup", pid);
  FILE *f = fopen(path, "r");
  if (!f) return;
  long v = 0;
  while (fgets(line, sizeof(line), f)) {
    if (sscanf(line, "Private_Hugetlb: %ld kB", &v) == 1 || sscanf(line, "Shared_Hugetlb: %ld kB", &v) == 1)
      *hugetlb += v;
    else if (sscanf(line, "Rss: %ld kB", &v) == 1)
      *rss = v;
  }
  fclose(f);
}

/* HugePages_Total - HugePages_Free + HugePages_Rsvd: the pool pages that
 * are in use or promised (-1 if /proc/meminfo cannot be read). */
static long pool_held(void) {
  FILE *f = fopen("/proc/meminfo", "r");
  if (!f) return -1;
  char line[256];
  long v, held = 0;
  while (fgets(line, sizeof(line), f)) {
    if (sscanf(line, "HugePages_Total: %ld", &v) == 1 || sscanf(line, "HugePages_Rsvd: %ld", &v) == 1) held += v;
    if (sscanf(line, "HugePages_Free: %ld", &v) == 1) held -= v;
  }
  fclose(f);
  return held;
}

/* SIGKILL to every process of session `sid` and their descendants (the
 * program has exited): how many there were.  Repeated until none is left
 * or 5 s have passed. */
static long kill_session(long sid) {
  long killed = 0;
  const struct timespec pause = {0, 20 * 1000 * 1000};
  for (int round = 0; round < 250; round++) {
    long seen = 0;
    DIR *d = opendir("/proc");
    if (!d) break;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      if (e->d_name[0] < '1' || e->d_name[0] > '9' || !ours(e->d_name, sid)) continue;
      seen++;
      if (kill((pid_t)strtol(e->d_name, NULL, 10), SIGKILL) == 0 && round == 0) killed++;
    }
    closedir(d);
    if (seen == 0) break;
    nanosleep(&pause, NULL);
  }
  return killed;
}

int main(int argc, char **argv) {
  if (argc < 4 || strcmp(argv[2], "--") != 0) {
    fprintf(stderr, "usage: hugetlb-peak REPORT -- program [args...]\n");
    return 2;
  }
  pid_t child = fork();
  if (child < 0) {
    perror("hugetlb-peak: fork");
    return 2;
  }
  if (child == 0) {
    setsid();
    execvp(argv[3], argv + 3);
    fprintf(stderr, "hugetlb-peak: %s: %s\n", argv[3], strerror(errno));
    _exit(127);
  }
  long peak_total = 0, peak_one = 0, samples = 0, peak_rss = 0, peak_held = 0, held_base = pool_held();
  int status = 0;
  const struct timespec tick = {0, 10 * 1000 * 1000};
  for (;;) {
    pid_t r = waitpid(child, &status, WNOHANG);
    if (r == child) break;
    if (r < 0 && errno != EINTR) {
      perror("hugetlb-peak: waitpid");
      return 2;
    }
    DIR *d = opendir("/proc");
    if (d) {
      long total = 0, rss = 0;
      struct dirent *e;
      while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        if (!ours(e->d_name, (long)child)) continue;
        long kib, rss_one;
        rollup_kib(e->d_name, &kib, &rss_one);
        total += kib;
        if (kib > peak_one) peak_one = kib;
        rss += rss_one;
      }
      closedir(d);
      if (total > peak_total) peak_total = total;
      if (rss > peak_rss) peak_rss = rss;
      long held = pool_held();
      if (held_base >= 0 && held - held_base > peak_held) peak_held = held - held_base;
      samples++;
    }
    nanosleep(&tick, NULL);
  }
  long left = kill_session((long)child);
  FILE *out = fopen(argv[1], "w");
  if (!out) {
    perror("hugetlb-peak: report");
    return 2;
  }
  fprintf(out,
          "peak_session_kib %ld\npeak_process_kib %ld\nsamples %ld\nleft_killed %ld\npeak_session_rss_kib %ld\n"
          "peak_pool_held_pages %ld\n",
          peak_total, peak_one, samples, left, peak_rss, peak_held);
  fclose(out);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}
