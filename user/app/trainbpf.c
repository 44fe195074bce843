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

static int record_main(int argc, char **argv)
{
	struct env env;

	argv[0] = "trainbpf record";	/* argp names the program by it */
	cli_parse_record(argc, argv, &env);
	return run_trace(&env);
}

/*
 * Subcommands, by the first argument; anything else is the live tool's
 * options. To add one: a line here and a NAME_main(argc, argv) that gets
 * argv from the subcommand's name on (argv[0] = "NAME").
 */
static const struct subcommand {
	const char *name;
	int (*main)(int argc, char **argv);
} subcommands[] = {
	{ "record", record_main },
};

int main(int argc, char **argv)
{
	int rc;

	/* report, trace, diff: reading recordings (cli_read.c). */
	if (cli_read_dispatch(argc, argv, &rc))
		return rc;
	for (size_t i = 0; argc > 1 && i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
		if (!strcmp(argv[1], subcommands[i].name))
			return subcommands[i].main(argc - 1, argv + 1);
	return live_main(argc, argv);
}
