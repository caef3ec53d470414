/* SPDX-License-Identifier: BSD-3-Clause */
/* The one size parser (see size.h).  No strtoull: its locale and its
 * acceptance of signs and "0x" would each need a check of their own. */
#include "size.h"

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

static unsigned suffix_shift(char c) {
  switch (c) {
    case 'k':
    case 'K': return 10;
    case 'm':
    case 'M': return 20;
    case 'g':
    case 'G': return 30;
    case 't':
    case 'T': return 40;
    default: return 0;
  }
}

int hp_parse_size(const char *text, unsigned long long *out) {
  if (!text) return -1;
  const char *p = text;
  while (is_blank(*p)) p++;
  if (*p < '0' || *p > '9') return -1; /* no sign, no empty */
  unsigned long long v = 0;
  for (; *p >= '0' && *p <= '9'; p++) {
    unsigned d = (unsigned)(*p - '0');
    if (v > (~0ULL - d) / 10) return -1;
    v = v * 10 + d;
  }
  unsigned shift = suffix_shift(*p);
  if (shift) {
    p++;
    if (*p == 'i' || *p == 'I') p++;
  }
  if (*p == 'b' || *p == 'B') p++;
  while (is_blank(*p)) p++;
  if (*p != '\0') return -1;
  if (shift && v > (~0ULL >> shift)) return -1;
  *out = v << shift;
  return 0;
}
