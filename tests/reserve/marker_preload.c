/* SPDX-License-Identifier: BSD-3-Clause */
/* A library that leaves a file behind when a dynamic loader runs it, as
 * LD_PRELOAD (constructor) or as LD_AUDIT (la_version).  The helper must
 * never load it. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

static void leave_marker(void) {
  const char *path = getenv("HUGEPOOL_TEST_MARKER");
  if (path != NULL) close(open(path, O_WRONLY | O_CREAT | O_APPEND, 0666));
}

__attribute__((constructor)) static void on_load(void) { leave_marker(); }

unsigned int la_version(unsigned int version);
unsigned int la_version(unsigned int version) {
  leave_marker();
  return version;
}
