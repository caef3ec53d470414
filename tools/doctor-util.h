/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool doctor: the utilities every check uses (doctor-util.c): files
 * below the root, and the report the checks fill and doctor.c prints.
 */
#ifndef HUGEPOOL_DOCTOR_UTIL_H
#define HUGEPOOL_DOCTOR_UTIL_H

#include <stddef.h>

/* Messages and fix commands are cut at their fixed buffers on purpose. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif
#include <sys/stat.h>

/* ---- files below the root ---- */

/* Reads ROOT/rel (rel starts with '/') into buf, NUL-terminated.  Returns the
 * length, or -1 (missing, unreadable, or a symlink inside a --root tree). */
long dr_read(const char *rel, char *buf, size_t len);
/* fopen(ROOT/rel, "r") with dr_read's rules; NULL when it cannot. */
#include <stdio.h>
FILE *dr_fopen(const char *rel);
/* Reads one unsigned number from ROOT/rel.  Returns 0, or -1. */
int dr_read_ull(const char *rel, unsigned long long *out);
/* lstat/stat of ROOT/rel. */
int dr_lstat(const char *rel, struct stat *st);
int dr_stat(const char *rel, struct stat *st);
/* opendir of ROOT/rel. */
#include <dirent.h>
DIR *dr_opendir(const char *rel);
/* 1 when the doctor reads the real system (no --root). */
int dr_real_root(void);
/* Sets the root (a checked, absolute directory other than "/"). */
void dr_set_root(const char *dir);

/* ---- the report ---- */

enum dr_severity { DR_INFO, DR_WARNING, DR_ERROR };

/* A section has rows; each row is one line of text and a JSON object of
 * key/value pairs.  Problems carry the exact command that fixes them. */
void dr_section(const char *name, const char *title);
/* Rows in the current section so far. */
int dr_section_rows(void);
void dr_row(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void dr_kv_num(const char *key, long long value);
void dr_kv_str(const char *key, const char *value);
void dr_problem(enum dr_severity sev, const char *fix, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Problems of severity DR_ERROR so far. */
int dr_errors(void);
/* Prints the report and its verdict, as one JSON object (json) or as text. */
void dr_print(int json);

#endif
