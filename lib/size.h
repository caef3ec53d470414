/* SPDX-License-Identifier: BSD-3-Clause */
/* The one size parser of the project: the library's HUGEPOOL_* sizes,
 * hugepool-run's options, hugepool-reserve's --size and the benchmarks'
 * arguments all read sizes through it.  Pure: it reads only its arguments
 * (no locale, no allocation), so privileged code may link it. */
#ifndef HUGEPOOL_SIZE_H
#define HUGEPOOL_SIZE_H

#ifdef __cplusplus
extern "C" {
#endif

/* Parses a byte count: decimal digits, then optionally K, M, G or T (any
 * case, powers of 1024) followed by an optional "i" and "B", or a bare "B":
 * "4096", "64M", "2g", "1GiB", "512kb".  Blanks around the text are allowed;
 * signs, fractions, hexadecimal, blanks inside and overflow are not.
 * Returns 0 and sets *out, or -1 (and leaves *out alone). */
int hp_parse_size(const char *text, unsigned long long *out);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_SIZE_H */
