/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool-reserve: who may ask.  Shared by the helper and the Slurm
 * plugin.  Rules kept:
 *
 *  1. Root always may.
 *  2. Otherwise only members of the config's group (primary or
 *     supplementary, as the caller was started with).
 *  3. With require_job, only owners of a job on the node: root-owned
 *     registry entries only; a registry that cannot be read refuses (fail
 *     closed, neither "yes" nor "no").
 */
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>

#include "helper.h"

int reserve_authorize(const struct reserve_config *c, const struct reserve_caller *who, char *err, size_t errlen) {
  const struct group *gr;
  int i, member = 0;
  if (who->uid == 0) return 0;
  gr = getgrnam(c->group);
  if (gr == NULL) {
    snprintf(err, errlen, "group '%s' from the config does not exist", c->group);
    return -1;
  }
  member = who->gid == gr->gr_gid;
  for (i = 0; i < who->ngroups && !member; i++) member = who->groups[i] == gr->gr_gid;
  if (!member) {
    snprintf(err, errlen,
             "you are not in group '%s', whose members may reserve pages: ask your administrator to add you to "
             "'%s' (--status works without it)",
             c->group, c->group);
    return -1;
  }
  if (c->require_job && (i = reserve_user_has_job(who->uid, 0)) <= 0) {
    if (i < 0)
      snprintf(err, errlen, "the Slurm job registry %s cannot be read (%s): ask your administrator", RESERVE_JOBS_DIR,
               strerror(errno));
    else
      snprintf(err, errlen, "you have no Slurm job running on this node");
    return -1;
  }
  return 0;
}
