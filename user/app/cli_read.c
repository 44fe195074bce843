// SPDX-License-Identifier: BSD-3-Clause
#include <argp.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cli_read.h"
#include "gzip.h"
#include "output.h"
#include "report.h"
#include "safe_open.h"

enum { OPT_FORMAT = 0x100, OPT_EPOCH, OPT_PID, OPT_FAIL_SLOWER, OPT_DETAIL, OPT_FOLDED };

static const struct argp_option report_opts[] = {
	{ "format", OPT_FORMAT, "text|json|csv|html", 0, "Report format (default text; html when -o ends in .html)" },
	{ "detail", OPT_DETAIL, NULL, 0, "Text: every section (processes, threads, epoch blocks, the findings' evidence and advice, CUDA/NCCL), not one screen" },
	{ "epoch", OPT_EPOCH, "N", 0, "Only epoch N's window (its label, as the report prints it)" },
	{ "pid", OPT_PID, "PID", 0, "Only this process and its threads" },
	{ "output", 'o', "FILE", 0, "Write to FILE (default stdout)" },
	{ "folded", OPT_FOLDED, "FILE", 0, "Also write the Python stacks of a recording made with --functions, folded (flamegraph.pl, speedscope), ns as weights" },
	{},
};

static const struct argp_option trace_opts[] = {
	{ "output", 'o', "FILE", 0, "Write the trace to FILE (required; gzip'ed if it ends in .gz)" },
	{},
};

static const struct argp_option diff_opts[] = {
	{ "output", 'o', "FILE", 0, "Write to FILE (default stdout)" },
	{ "format", OPT_FORMAT, "text|html", 0, "Diff format (default text; html when -o ends in .html)" },
	{ "fail-if-slower", OPT_FAIL_SLOWER, "PCT", 0,
	  "Exit 3 when B's steps/s is more than PCT% below A's (a CI gate)" },
	{},
};

static long parse_long(const char *arg, struct argp_state *state, const char *what,
		       long lo)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v < lo || v > INT_MAX)
		argp_error(state, "invalid %s: '%s'", what, arg);
	return v;
}

static double parse_pct(const char *arg, struct argp_state *state)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	if (errno || end == arg || *end || !(v >= 0 && v < 100))
		argp_error(state, "invalid percentage: '%s' (0 to 100)", arg);
	return v;
}

static error_t parse_arg(int key, char *arg, struct argp_state *state)
{
	struct read_env *env = state->input;

	switch (key) {
	case 'o':
		env->output = arg;
		break;
	case OPT_FORMAT:
		if (!cli_format(arg, true, &env->format))
			argp_error(state, "invalid format: '%s' (text, json, csv or html)", arg);
		env->format_set = true;
		break;
	case OPT_DETAIL:
		env->detail = true;
		break;
	case OPT_FOLDED:
		env->folded = arg;
		break;
	case OPT_FAIL_SLOWER:
		env->fail_if_slower = parse_pct(arg, state);
		break;
	case OPT_EPOCH:
		env->filter.epoch_set = true;
		env->filter.epoch = parse_long(arg, state, "epoch", LONG_MIN);
		break;
	case OPT_PID:
		env->filter.pid = (pid_t)parse_long(arg, state, "PID", 1);
		break;
	case ARGP_KEY_ARG:
		if (env->ninputs == READ_MAX_INPUTS)
			argp_error(state, "too many files: '%s' (%d at most)", arg, READ_MAX_INPUTS);
		env->inputs[env->ninputs++] = arg;
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

/*
 * The output, emptied now that there is something to write, and never one
 * of the recordings read (by device and inode: any name of it); NULL: said.
 */
static FILE *open_out_at(const struct read_env *env, const char *path)
{
	FILE *f = out_open(path);

	for (int i = 0; f && f != stdout && i < env->ninputs; i++)
		if (safe_same_file(fileno(f), env->inputs[i])) {
			fprintf(stderr, "trainbpf: %s is an input (%s): not written\n", path,
				env->inputs[i]);
			fclose(f);
			return NULL;
		}
	if (f && out_begin(f, path)) {
		fclose(f);
		return NULL;
	}
	return f;
}

static FILE *open_out(const struct read_env *env)
{
	return open_out_at(env, env->output);
}

static int close_out(FILE *f, const char *path)
{
	return out_close(f, path) ? 1 : 0;
}

/* An error line: sqlite quotes names from the file, bytes and all. */
static void say(const char *err)
{
	fputs("trainbpf: ", stderr);
	for (const unsigned char *p = (const unsigned char *)err; *p; p++)
		fputc(*p >= 0x20 && *p < 0x7f ? *p : '?', stderr);
	fputc('\n', stderr);
}

/* Opens and loads one recording; one line on stderr if it cannot. */
static int load(struct recording *r, const char *path, const struct rec_filter *flt)
{
	char err[512];

	if (rec_open(r, path, err, sizeof(err)) || rec_load(r, flt, err, sizeof(err))) {
		say(err);
		rec_close(r);
		return -1;
	}
	return 0;
}

/*
 * Several recordings: one job's ranks on several nodes, merged. Windows
 * and processes are each node's own: no --epoch or --pid.
 */
static int run_merged(const struct read_env *env)
{
	struct recording *r = calloc(env->ninputs, sizeof(*r));
	struct rec_filter flt = { .fold = true };
	struct merged *m = NULL;
	char err[512];
	int loaded = 0, rc = 1;
	FILE *out;

	if (env->filter.epoch_set || env->filter.pid || env->format == TB_FMT_CSV ||
	    env->format == TB_FMT_HTML) {
		fprintf(stderr, "trainbpf report: several recordings are merged into one job's "
			"report, text or json, without --epoch or --pid\n");
		free(r);
		return 2;
	}
	if (!r)
		return 1;
	for (; loaded < env->ninputs; loaded++)
		if (load(&r[loaded], env->inputs[loaded], &flt))
			goto cleanup;
	if (merged_open(&m, r, env->ninputs, err, sizeof(err))) {
		say(err);
		goto cleanup;
	}
	if (!(out = open_out(env)))
		goto cleanup;
	if (env->format == TB_FMT_JSON)
		merged_json(out, m);
	else
		merged_text(out, m);
	rc = close_out(out, env->output);
cleanup:
	merged_close(m);
	for (int i = 0; i < loaded; i++)
		rec_close(&r[i]);
	free(r);
	return rc;
}

/* report --folded: the recording's Python stacks, as the live --folded writes them. */
static int write_folded(const struct read_env *env, const struct recording *r)
{
	FILE *f = open_out_at(env, env->folded);

	if (!f)
		return 1;
	if (report_functions_folded(f, &r->ses)) {
		out_close(f, env->folded);
		return 1;
	}
	return close_out(f, env->folded);
}

static int run_report(const struct read_env *env)
{
	struct recording r;
	struct run_counters c;
	FILE *out;
	int rc;
	struct rec_filter flt = env->filter;

	if (env->folded && (env->ninputs > 1 || flt.epoch_set || flt.pid)) {
		fprintf(stderr, "trainbpf report: --folded writes one recording's stacks, the whole "
			"run's: not with several files, --epoch or --pid\n");
		return 2;
	}
	if (env->ninputs > 1)
		return run_merged(env);

	flt.fold = true;	/* the report shows what the live one would */
	if (load(&r, env->inputs[0], &flt))
		return 1;
	if (env->folded && !ses_py(&r.ses)) {
		fprintf(stderr, "trainbpf report: %s has no Python stacks (record with "
			"--functions)\n", r.path);
		rec_close(&r);
		return 1;
	}
	out = open_out(env);
	if (!out) {
		rec_close(&r);
		return 1;
	}
	rec_counters(&r, &c);
	report_write(out, env->format, &r.ses, &c, r.end_ns);
	rc = close_out(out, env->output);
	if (!rc && env->folded)
		rc = write_folded(env, &r);
	rec_close(&r);
	return rc;
}

/* A name ending in .gz: the trace is written gzip'ed (Perfetto opens it so). */
static bool gz_named(const char *path)
{
	size_t n = path ? strlen(path) : 0;

	return n > 3 && !strcmp(path + n - 3, ".gz");
}

/*
 * trace_export into memory, then gzip'ed into out: a trace is a few
 * hundred bytes a state interval (5 MB for 23 s of a small job), a
 * twentieth of that gzip'ed. As trace_export returns; -1 and err on error.
 */
static int trace_gz(struct recording *r, FILE *out, char *err, size_t errlen)
{
	char *text = NULL, *gz = NULL;
	size_t len = 0, gzlen;
	FILE *mem = open_memstream(&text, &len);
	int states = -1;

	if (!mem) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	states = trace_export(r, mem, err, errlen);
	if (fclose(mem) && states >= 0) {
		snprintf(err, errlen, "out of memory");
		states = -1;
	}
	if (states >= 0 && gz_compress(text, len, &gz, &gzlen)) {
		snprintf(err, errlen, "gzip failed");
		states = -1;
	}
	if (states >= 0)
		fwrite(gz, 1, gzlen, out);	/* close_out says if a write failed */
	free(text);
	free(gz);
	return states;
}

static int run_trace(const struct read_env *env)
{
	struct recording r;
	char err[512];
	FILE *out;
	int rc = 1, states;

	if (rec_open(&r, env->inputs[0], err, sizeof(err))) {
		say(err);
		return 1;
	}
	out = open_out(env);
	if (!out)
		goto cleanup;
	states = gz_named(env->output) ? trace_gz(&r, out, err, sizeof(err)) :
					 trace_export(&r, out, err, sizeof(err));
	if (states < 0) {
		say(err);
		close_out(out, env->output);
		goto cleanup;
	}
	if (!states)
		fprintf(stderr, "trainbpf: %s: no states recorded (a recording without the "
			"state stream): the trace has the counters, epochs and steps only\n", r.path);
	else if (r.states_lost)
		fprintf(stderr, "trainbpf: %s: warning: %llu state intervals were lost while "
			"recording\n", r.path, (unsigned long long)r.states_lost);
	rc = close_out(out, env->output);
cleanup:
	rec_close(&r);
	return rc;
}

/* --fail-if-slower: 3, and a line, when B is slower than allowed; 1 when it cannot tell. */
static int slower_gate(const struct read_env *env, const struct recording *a,
		       const struct recording *b)
{
	double slower = diff_slower_pct(a, b);

	if (env->fail_if_slower < 0)
		return 0;
	if (isnan(slower)) {
		fprintf(stderr, "trainbpf diff: --fail-if-slower: no training steps to compare in "
			"A or B\n");
		return 1;
	}
	if (slower <= env->fail_if_slower)
		return 0;
	fprintf(stderr, "trainbpf diff: B is %.1f%% slower than A (steps/s), more than %g%%\n",
		slower, env->fail_if_slower);
	return 3;
}

static int run_diff(const struct read_env *env)
{
	struct recording a, b;
	FILE *out;
	int rc = 1;

	if (env->format != TB_FMT_TEXT && env->format != TB_FMT_HTML) {
		fprintf(stderr, "trainbpf diff: --format: text or html\n");
		return 2;
	}
	if (load(&a, env->inputs[0], &env->filter))
		return 1;
	if (load(&b, env->inputs[1], &env->filter)) {
		rec_close(&a);
		return 1;
	}
	out = open_out(env);
	if (out) {
		diff_write(out, env->format, &a, &b);
		rc = close_out(out, env->output);
	}
	if (!rc)
		rc = slower_gate(env, &a, &b);
	rec_close(&a);
	rec_close(&b);
	return rc;
}

/* How one of these subcommands is called: its options, files and help. */
struct read_cmd {
	const char *name;
	const struct argp_option *opts;
	const char *args, *doc;
	int nfiles, max_files;
	bool needs_output;
	int (*run)(const struct read_env *env);
};

static const struct read_cmd report_cmd = {
	"report", report_opts, "RUN.DB [RUN.DB...]",
	"Print the report of a recording (trainbpf record), as the live tool prints it. "
	"Several recordings of one job, one per node (matched by the job's id from the "
	"ranks' environment, or a shared NCCL communicator), are merged into one report: "
	"each rank side by side, and the diagnosis across them all (the straggler).\v"
	"EXAMPLES:\n    trainbpf report run.db\n    trainbpf report run.db --format csv --epoch 3\n"
	"    trainbpf report run.db --format json --pid 1234\n"
	"    trainbpf report run.db -o run.html   # one page, charts, opens offline\n"
	"    trainbpf report node0.db node1.db node2.db node3.db", 1, READ_MAX_INPUTS, false,
	run_report,
};

static const struct read_cmd trace_cmd = {
	"trace", trace_opts, "RUN.DB -o TRACE.JSON",
	"Write a recording as a Chrome trace (open it in ui.perfetto.dev or "
	"chrome://tracing): each thread's states, epochs, steps, and per-process "
	"category shares per flush.", 1, 1, true, run_trace,
};

static const struct read_cmd diff_cmd = {
	"diff", diff_opts, "A.DB B.DB",
	"Two recordings side by side: headline shares, epochs matched by label, "
	"steps/s, and how the diagnosis changed.", 2, 2, false, run_diff,
};

/* argv[0] is the subcommand's name: "trainbpf NAME" in --help and errors. */
static int read_main(const struct read_cmd *c, int argc, char **argv)
{
	struct read_env env = { .format = TB_FMT_TEXT, .fail_if_slower = -1 };
	struct argp argp = { c->opts, parse_arg, c->args, c->doc };
	char name[64];

	snprintf(name, sizeof(name), "trainbpf %s", c->name);
	argv[0] = name;
	argp_err_exit_status = 2;
	argp_parse(&argp, argc, argv, 0, NULL, &env);
	env.format = report_format_for(env.output, env.format, env.format_set, env.detail);
	if (env.ninputs < c->nfiles || env.ninputs > c->max_files ||
	    (c->needs_output && !env.output)) {
		fprintf(stderr, "%s: usage: %s %s (see --help)\n", name, name, c->args);
		return 2;
	}
	return c->run(&env);
}

int report_main(int argc, char **argv)
{
	return read_main(&report_cmd, argc, argv);
}

int trace_main(int argc, char **argv)
{
	return read_main(&trace_cmd, argc, argv);
}

int diff_main(int argc, char **argv)
{
	return read_main(&diff_cmd, argc, argv);
}
