/* SPDX-License-Identifier: BSD-3-Clause */
/* slurm_smuggle VALUE OUTFILE: a hostile Slurm client.  Submits a batch job
 * whose --hugepages value skips the client-side check of the SPANK plugin
 * (it goes straight into the job's SPANK environment), to prove that the
 * root-side prolog validates it again.  Prints the job id. */
#include <stdio.h>
#include <unistd.h>

#include <slurm/slurm.h>

int main(int argc, char *argv[]) {
  job_desc_msg_t d;
  submit_response_msg_t *resp = NULL;
  char opt[256];
  char *spank_env[] = {opt, NULL};
  char *env[] = {"PATH=/usr/bin:/bin", NULL};
  if (argc != 3) return 2;
  slurm_init(NULL);
  snprintf(opt, sizeof opt, "_SLURM_SPANK_OPTION_hugepool_hugepages=%s", argv[1]);
  slurm_init_job_desc_msg(&d);
  d.name = "smuggle";
  d.script = "#!/bin/sh\necho TASK-RAN\n";
  d.user_id = getuid();
  d.group_id = getgid();
  d.min_nodes = 1;
  d.work_dir = "/tmp";
  d.std_out = argv[2];
  d.environment = env;
  d.env_size = 1;
  d.spank_job_env = spank_env;
  d.spank_job_env_size = 1;
  if (slurm_submit_batch_job(&d, &resp) != 0) {
    slurm_perror("slurm_submit_batch_job");
    return 1;
  }
  printf("%u\n", resp->job_id);
  slurm_free_submit_response_response_msg(resp);
  return 0;
}
