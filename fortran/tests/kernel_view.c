/* The kernel's view for the Fortran tests: one /proc/self/smaps field of the
 * mapping holding an address, one /proc/meminfo field (tests/mpi/kernel_view.h
 * reads them; this gives them C linkage for bind(C)). */
#include "../../tests/mpi/kernel_view.h"

long hp_test_smaps_kb(const void *addr, const char *key);
long hp_test_meminfo(const char *key);

long hp_test_smaps_kb(const void *addr, const char *key) { return smaps_field(addr, key); }
long hp_test_meminfo(const char *key) { return meminfo(key); }
