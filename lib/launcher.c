/* SPDX-License-Identifier: BSD-3-Clause */
/* The launchers' variables, in one table (launcher.h says what for).  For
 * each thing, the first variable in table order that holds a valid value
 * wins: a process started by hydra inside a Slurm allocation gets hydra's
 * rank, not Slurm's. */
#define _GNU_SOURCE
#include "launcher.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef enum { RANK, LOCAL_RANK, LOCAL_RANKS, JOB, WHAT_COUNT } what;

static const struct {
  what what;
  const char *name;
} variables[] = {
    /* the MPI rank */
    {RANK, "PMI_RANK"},             /* MPICH/hydra (PMI-1/2) */
    {RANK, "PMIX_RANK"},            /* PMIx (Open MPI 5, Slurm --mpi=pmix) */
    {RANK, "OMPI_COMM_WORLD_RANK"}, /* Open MPI */
    {RANK, "MPI_LOCALRANKID"},      /* MPICH/hydra, when nothing better is set */
    {RANK, "PALS_RANKID"},          /* Cray PALS (aprun's successor) */
    {RANK, "SLURM_PROCID"},         /* srun */
    /* the rank's index on its node */
    {LOCAL_RANK, "MPI_LOCALRANKID"},
    {LOCAL_RANK, "OMPI_COMM_WORLD_LOCAL_RANK"},
    {LOCAL_RANK, "PMIX_LOCAL_RANK"},
    {LOCAL_RANK, "SLURM_LOCALID"},
    /* the number of ranks on the node */
    {LOCAL_RANKS, "MPI_LOCALNRANKS"},
    {LOCAL_RANKS, "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {LOCAL_RANKS, "PMIX_LOCAL_SIZE"},
    {LOCAL_RANKS, "SLURM_NTASKS_PER_NODE"},
    /* the job */
    {JOB, "SLURM_JOB_ID"},
    {JOB, "PBS_JOBID"},
    {JOB, "LSB_JOBID"},
    {JOB, "PMIX_NAMESPACE"},
    {JOB, "OMPI_MCA_orte_jobid"},
};

static struct {
  bool read, mpi_rank;
  long rank, local_rank, local_ranks;
  char job[64];
} at_load = {.rank = -1, .local_rank = -1};

/* A rank: a number >= 0, all of the text; else -1. */
static long parse_rank(const char *v) {
  if (!v || !*v) return -1;
  char *end = NULL;
  long r = strtol(v, &end, 10);
  return *end == '\0' && r >= 0 ? r : -1;
}

/* A count of ranks: digits only, 1 to 1 << 20; 0 otherwise. */
static long parse_ranks(const char *v) {
  if (!v || !*v) return 0;
  long n = 0;
  for (const char *p = v; *p; p++) {
    if (*p < '0' || *p > '9' || n > (1L << 20)) return 0;
    n = n * 10 + (*p - '0');
  }
  return n >= 1 && n <= (1L << 20) ? n : 0;
}

/* A rank from any RANK variable but srun's. */
static bool mpi_rank_set(void) {
  for (size_t i = 0; i < sizeof(variables) / sizeof(variables[0]); i++)
    if (variables[i].what == RANK && strcmp(variables[i].name, "SLURM_PROCID") != 0 &&
        parse_rank(getenv(variables[i].name)) >= 0)
      return true;
  return false;
}

/* The first valid value of `w`'s variables: a number (-1 or 0 if none). */
static long first_number(what w) {
  long none = w == LOCAL_RANKS ? 0 : -1;
  for (size_t i = 0; i < sizeof(variables) / sizeof(variables[0]); i++) {
    if (variables[i].what != w) continue;
    const char *v = getenv(variables[i].name);
    long n = w == LOCAL_RANKS ? parse_ranks(v) : parse_rank(v);
    if (n != none) return n;
  }
  return none;
}

static void first_job(char job[64]) {
  job[0] = '\0';
  for (size_t i = 0; i < sizeof(variables) / sizeof(variables[0]) && !job[0]; i++) {
    const char *v = variables[i].what == JOB ? getenv(variables[i].name) : NULL;
    if (v) (void)strncat(job, v, 63);
  }
}

void launcher_init(void) {
  at_load.rank = first_number(RANK);
  at_load.mpi_rank = mpi_rank_set();
  at_load.local_rank = first_number(LOCAL_RANK);
  at_load.local_ranks = first_number(LOCAL_RANKS);
  first_job(at_load.job);
  at_load.read = true;
}

/* Before init (a report from a constructor that ran first): read now. */
static void ensure_read(void) {
  if (!at_load.read) launcher_init();
}

long launcher_rank(void) {
  ensure_read();
  return at_load.rank;
}

bool launcher_mpi_rank(void) {
  ensure_read();
  return at_load.mpi_rank;
}

long launcher_local_rank(void) {
  ensure_read();
  return at_load.local_rank;
}

long launcher_local_ranks(void) {
  ensure_read();
  return at_load.local_ranks;
}

const char *launcher_job(void) {
  ensure_read();
  return at_load.job;
}
