/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool-reserve: the audit log, to syslog(LOG_AUTHPRIV).  Every other
 * privileged file calls it; it calls none of them.  Rules kept:
 *
 *  1. One line a call, prefixed with who asked (uid, user name, source,
 *     Slurm job): the caller's words never start a line.
 *  2. A line too long for its buffer is cut, never split or dropped.
 */
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>

#include "helper.h"

void reserve_audit(const struct reserve_caller *who, const char *fmt, ...) {
  char msg[1024]; /* syslog takes it whole; the longest reasons (paths, errors) fit */
  const struct passwd *pw = getpwuid(who->uid);
  int n = snprintf(msg, sizeof msg, "uid=%lu user=%s source=%s job=%lu ", (unsigned long)who->uid,
                   pw != NULL ? pw->pw_name : "?", who->source, who->job);
  va_list ap;
  if (n < 0 || (size_t)n >= sizeof msg) n = 0;
  va_start(ap, fmt);
  (void)vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
  va_end(ap);
  syslog(LOG_AUTHPRIV | LOG_NOTICE, "%s", msg);
}
