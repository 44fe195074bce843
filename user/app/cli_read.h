/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The subcommands that read a recording, without root: report, trace,
 * diff. main() picks them from its command table; each gets argv from its
 * own name on (argv[0] = "report") and returns the exit status: 0, 1 for
 * a runtime error, 2 for bad options.
 */
#ifndef TB_CLI_READ_H
#define TB_CLI_READ_H

#include <stdbool.h>
#include <stdio.h>
#include "cli.h"
#include "recording_read.h"

/* A merged report's recordings at most: a job's ranks, one file per node. */
#define READ_MAX_INPUTS 256

struct read_env {
	const char *inputs[READ_MAX_INPUTS];
	int ninputs;
	const char *output;	/* NULL: stdout */
	enum tb_format format;
	bool format_set;	/* --format given: else -o's name may choose (report_format_for) */
	struct rec_filter filter;
	bool detail;		/* report --detail: the text with every section */
	const char *folded;	/* report --folded FILE: the recorded Python stacks */
	double fail_if_slower;	/* diff: exit 3 when B's steps/s is this % below A's; < 0: never */
};

int report_main(int argc, char **argv);
int trace_main(int argc, char **argv);
int diff_main(int argc, char **argv);

#endif
