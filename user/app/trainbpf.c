// SPDX-License-Identifier: BSD-3-Clause
/*
 * trainbpf: the subcommand by the first argument, else the live tool. The
 * life of a trace is in run.c; report, trace and diff in cli_read.c.
 */
#include <string.h>
#include "cli.h"
#include "cli_read.h"
#include "run.h"

static int live_main(int argc, char **argv)
{
	struct env env;

	cli_parse(argc, argv, &env);
	return run_trace(&env);
}

static int serve_main(int argc, char **argv)
{
	struct env env;

	argv[0] = "trainbpf serve";
	cli_parse_serve(argc, argv, &env);
	return run_trace(&env);
}

static int record_main(int argc, char **argv)
{
	struct env env;

	argv[0] = "trainbpf record";	/* argp names the program by it */
	cli_parse_record(argc, argv, &env);
	return run_trace(&env);
}

/*
 * The subcommands, by the first argument; anything else is the live tool's
 * options. To add one: a line here and a NAME_main(argc, argv) that gets
 * argv from the subcommand's name on (argv[0] = "NAME").
 */
static const struct command {
	const char *name;
	int (*main)(int argc, char **argv);
} commands[] = {
	{ "record", record_main },	/* writes a recording (run.c) */
	{ "report", report_main },	/* read one: cli_read.c */
	{ "trace", trace_main },
	{ "diff", diff_main },
	{ "serve", serve_main },	/* a node's daemon for Prometheus (run.c, serve.c) */
};

int main(int argc, char **argv)
{
	for (size_t i = 0; argc > 1 && i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].main(argc - 1, argv + 1);
	return live_main(argc, argv);
}
