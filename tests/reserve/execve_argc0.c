/* SPDX-License-Identifier: BSD-3-Clause */
/* execve_argc0 PROGRAM [ENV...]: run PROGRAM with an empty argv (argc == 0). */
#include <stdio.h>
#include <unistd.h>

int main(int argc, char *argv[]) {
  char *no_args[] = {NULL};
  if (argc < 2) return 2;
  execve(argv[1], no_args, &argv[2]);
  perror("execve");
  return 127;
}
