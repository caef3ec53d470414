/* SPDX-License-Identifier: BSD-3-Clause */
/* The option reader the MPI entry points share with the core.  Not
 * installed.
 *
 * libhugepool_preload.so reads every HUGEPOOL_* variable once, at load,
 * with the option table's rules (options.h: choices without case, sizes
 * with units, nothing under AT_SECURE), and exports this one function for
 * libhugepool_mpi_preload.so (mpi/), which links no part of the core and
 * looks it up by name at run time.  So HUGEPOOL_POLICY=Strict is strict in
 * the core and in MPI_Alloc_mem alike, and a value the table refuses gets
 * the table's default in both.  Declarations only: any layer may include
 * it; it takes no lock. */
#ifndef HUGEPOOL_OPTION_READER_H
#define HUGEPOOL_OPTION_READER_H

#ifdef __cplusplus
extern "C" {
#endif

#define HP_PRELOAD_OPTION_SYMBOL "hugepool_preload_option"

/* The value of option `name` ("HUGEPOOL_POLICY") as the preload read it: a
 * choice as its index in the table ("strict|thp|small|fallback": strict is
 * 0, HUGEPOOL_POLICY_STRICT), a switch 0 or 1, a size in bytes.  0 and
 * *value, or -1 when `name` is no option. */
__attribute__((visibility("default"))) int hugepool_preload_option(const char *name, long long *value);
typedef int (*hp_preload_option_fn)(const char *name, long long *value);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_OPTION_READER_H */
