/* SPDX-License-Identifier: BSD-3-Clause */
/* Who started this process (launcher.c): its MPI rank, its index and the
 * number of ranks on its node, and its job, from the variables of whichever
 * launcher or batch system set them (MPICH/hydra, Open MPI, PMIx, Slurm,
 * PBS, LSF).  Not installed.
 *
 * Rules: every launcher variable the library reads is in launcher.c's one
 * table, and is read once, at init (launcher_init), like the options: the
 * program may write its process title over the environment later (redis,
 * nginx and postgres do).  Used by the statistics (stats.c: rank, local
 * rank, job) and by the pool's share (share.c: ranks on the node).  No lock:
 * written once at init, then only read. */
#ifndef HUGEPOOL_LAUNCHER_H
#define HUGEPOOL_LAUNCHER_H

#include <stdbool.h>

#include "os.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads the table's variables (again, if called again). */
HP_INTERNAL void launcher_init(void);
/* The MPI rank, or -1. */
HP_INTERNAL long launcher_rank(void);
/* Whether an MPI launcher started this process: an MPI rank variable
 * (PMI, PMIx, Open MPI, hydra) holds a rank.  srun's SLURM_PROCID alone
 * does not count: srun starts programs that are no MPI ranks too. */
HP_INTERNAL bool launcher_mpi_rank(void);
/* The rank's index on its node, or -1. */
HP_INTERNAL long launcher_local_rank(void);
/* The number of ranks on the node (1 to 1 << 20), or 0 when no launcher
 * says (or says something that is not such a count). */
HP_INTERNAL long launcher_local_ranks(void);
/* The batch system's or launcher's job id as it was set (at most 63
 * bytes), or "". */
HP_INTERNAL const char *launcher_job(void);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_LAUNCHER_H */
