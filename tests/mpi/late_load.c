/* SPDX-License-Identifier: BSD-3-Clause */
/* A program that knows nothing of MPI until it runs: it loads a module
 * linked with MPI with dlopen(RTLD_LOCAL), as Python loads an mpi4py-style
 * extension module, and calls it.
 *   hugepool-mpi-late-load MODULE.so */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  void *module = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!module) {
    (void)fprintf(stderr, "late_load: %s\n", dlerror());
    return 2;
  }
  int (*run)(void) = NULL;
  void *sym = dlsym(module, "late_module_run");
  memcpy(&run, &sym, sizeof(run));
  return run ? run() : 2;
}
