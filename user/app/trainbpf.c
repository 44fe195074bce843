// SPDX-License-Identifier: BSD-3-Clause
/*
 * trainbpf: the subcommand by the first argument, else the live tool. The
 * life of a trace is in run.c; report, trace and diff in cli_read.c.
 */
#include <stdio.h>
#include <string.h>
#include "cli.h"
#include "cli_read.h"
#include "output.h"
#include "report_write.h"
#include "run.h"
#include "snapshot_read.h"

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

static int top_main(int argc, char **argv)
{
	struct env env;

	argv[0] = "trainbpf top";
	cli_parse_top(argc, argv, &env);
	return run_trace(&env);
}

static int record_main(int argc, char **argv)
{
	struct env env;

	argv[0] = "trainbpf record";	/* argp names the program by it */
	cli_parse_record(argc, argv, &env);
	return run_trace(&env);
}

/* A snapshot of the job's threads from /proc: nothing attached, no BPF. */
static int dump_main(int argc, char **argv)
{
	struct snapshot s;
	struct env env;
	char err[256];
	FILE *f;
	int rc;

	argv[0] = "trainbpf dump";
	cli_parse_dump(argc, argv, &env);
	if (snapshot_take(&s, env.pids, env.npids, err, sizeof(err))) {
		fprintf(stderr, "trainbpf dump: %s\n", err);
		return 1;
	}
	f = out_open(env.output);
	rc = !f || out_begin(f, env.output);
	if (!rc) {
		dump_write(f, env.format, &s);
		rc = out_close(f, env.output) != 0;
	} else if (f) {
		out_close(f, env.output);
	}
	snapshot_free(&s);
	return rc;
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
	{ "top", top_main },	/* every job of the node, a line per rank (top.c) */
	{ "dump", dump_main },		/* every thread of a job now, from /proc */
};

int main(int argc, char **argv)
{
	for (size_t i = 0; argc > 1 && i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].main(argc - 1, argv + 1);
	return live_main(argc, argv);
}
