/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The text outputs (the final report, --states-out, report/trace/diff -o)
 * and stdout: opened by the rules of safe_open.h, emptied only when the
 * output is ready to be written, every write checked at the end. Errors
 * are one line on stderr.
 */
#ifndef TB_OUTPUT_H
#define TB_OUTPUT_H

#include <stdio.h>

/*
 * path, or stdout for NULL; NULL on error. Nothing in the file is lost yet;
 * a file it made is removed again if closed before out_begin.
 */
FILE *out_open(const char *path);
/* Empties a regular file before the output is written. -1 on error. */
int out_begin(FILE *f, const char *path);
/* Flushes and closes (stdout: flushes); -1 if any write failed. */
int out_close(FILE *f, const char *path);

#endif
