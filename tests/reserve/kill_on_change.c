/* SPDX-License-Identifier: BSD-3-Clause */
/* kill_on_change FILE CMD [ARGS...]: run CMD and SIGKILL it the moment FILE
 * is closed after a write (inotify).  Prints "killed" if the kill came before CMD ended,
 * else "ended"; exits 0 either way, 2 on a usage or setup error. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char *argv[]) {
  char ev[4096] __attribute__((aligned(8)));
  int in, st;
  pid_t pid;
  if (argc < 3) return 2;
  in = inotify_init1(IN_CLOEXEC);
  if (in < 0 || inotify_add_watch(in, argv[1], IN_CLOSE_WRITE) < 0) {
    perror("inotify");
    return 2;
  }
  pid = fork();
  if (pid < 0) return 2;
  if (pid == 0) {
    execvp(argv[2], argv + 2);
    _exit(127);
  }
  if (read(in, ev, sizeof ev) <= 0) return 2;
  kill(pid, SIGKILL);
  if (waitpid(pid, &st, 0) != pid) return 2;
  puts(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL ? "killed" : "ended");
  return 0;
}
