/* SPDX-License-Identifier: BSD-3-Clause */
/* The tool's life, live or recording: from options to exit status. */
#ifndef TB_RUN_H
#define TB_RUN_H

#include "cli.h"

/*
 * Traces env's targets until they exit, time runs out or a signal, then
 * prints the final report (or finishes env->record_path). Returns the exit
 * status: 0, the launched command's, 1 on a runtime error, 127 when the
 * command cannot start.
 */
int run_trace(const struct env *env);

#endif
