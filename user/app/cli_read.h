/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The subcommands that read a recording, without root: report, trace,
 * diff. The first argument names the subcommand; `record` (the writer)
 * dispatches the same way from main().
 */
#ifndef TB_CLI_READ_H
#define TB_CLI_READ_H

#include <stdbool.h>
#include <stdio.h>
#include "recording_read.h"

enum rd_format { RD_TEXT, RD_JSON, RD_CSV };

struct read_env {
	const char *inputs[2];
	int ninputs;
	const char *output;	/* NULL: stdout */
	enum rd_format format;
	struct rec_filter filter;
};

/*
 * If argv[1] names one of these subcommands, runs it and stores its exit
 * status in *rc (0, 1 runtime error, 2 bad options); else false.
 */
bool cli_read_dispatch(int argc, char **argv, int *rc);

#endif
