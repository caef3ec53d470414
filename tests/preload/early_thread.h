/* SPDX-License-Identifier: BSD-3-Clause */
/* early_thread_lib.c's calls, for early_thread.c. */
#ifndef HUGEPOOL_TEST_EARLY_THREAD_H
#define HUGEPOOL_TEST_EARLY_THREAD_H
/* Operations the library's thread has made so far. */
unsigned long early_thread_ops(void);
/* Stops the thread: its pattern mismatches and failed mallocs (and its
 * operations in *ops_out); -1 if it never started. */
long early_thread_stop(unsigned long *ops_out);
#endif
