// SPDX-License-Identifier: BSD-3-Clause
#include <argp.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "epochs.h"
#include "states.h"
#include "trainbpf.h"

const char *argp_program_version = "trainbpf " TB_VERSION;
const char *argp_program_bug_address = "https://github.com/trainbpf/trainbpf/issues";

static const char doc[] =
"trainbpf: where does the wall-clock time of a training job go?\n"
"\n"
"Accounts every nanosecond of every thread of a job (and of every process it\n"
"forks) to one category: cpu, gpu_wait, comm, data_wait, io, runqueue, lock,\n"
"idle. The headline follows the trainer threads (in each trainer, the thread\n"
"that ran the backward: its main thread in most jobs): time they spend\n"
"waiting for another traced thread counts as what that thread was doing.\n"
"\n"
"CUDA and NCCL are found in each process's own memory map (pip wheels,\n"
"hashed or static builds, containers, dlopen) and probed: time inside\n"
"synchronisation calls and blocking copies is gpu_wait, inside NCCL calls\n"
"comm, with call counts and bytes per collective.\n"
"\n"
"EXAMPLES:\n"
"    sudo trainbpf -p 1234              # trace job 1234 until it exits\n"
"    sudo trainbpf -p 1234 -i 2 -d 60   # live table every 2 s, stop after 60 s\n"
"    sudo trainbpf --format json -- python3 train.py   # launch and trace\n"
"\n"
"SUBCOMMANDS (each has its own --help):\n"
"    sudo trainbpf record -o run.db -- python3 train.py   # into SQLite\n"
"    trainbpf report run.db [--format text|json|csv|html] [--epoch N] [--pid N]\n"
"    trainbpf trace run.db -o trace.json                  # Chrome/Perfetto\n"
"    trainbpf diff before.db after.db\n"
"    sudo trainbpf serve --listen 127.0.0.1:9464         # Prometheus exporter\n"
"    sudo trainbpf top                                   # every job here, live\n"
"    sudo trainbpf dump -p 1234                          # each thread, now\n";

enum { OPT_FORMAT = 0x100, OPT_BTF, OPT_MAX_THREADS, OPT_RINGBUF, OPT_LAUNCHES, OPT_EPOCHS,
       OPT_EPOCH_REGEX, OPT_STATES_RING, OPT_STATES_OUT, OPT_STEP_BLOCKS, OPT_FORCE,
       OPT_REPORT, OPT_NO_PHASES, OPT_LISTEN, OPT_MATCH, OPT_CGROUP, OPT_GRACE,
       OPT_WEB_CONFIG, OPT_DETAIL, OPT_STALL_AFTER, OPT_FUNCTIONS, OPT_STACK_HZ,
       OPT_FOLDED };

#define STR_(x) #x
#define STR(x) STR_(x)

/* Options several commands take, with the same help: written once. */
#define OPT_ENTRY_BTF \
	{ "btf", OPT_BTF, "FILE", 0, "Kernel BTF to use when the kernel has none built in" }
#define OPT_ENTRY_MAX_THREADS \
	{ "max-threads", OPT_MAX_THREADS, "N", 0, "Threads traced at once (default " STR(TB_DEFAULT_SLOTS) ")" }
#define OPT_ENTRY_VERBOSE \
	{ "verbose", 'v', NULL, 0, "Print libbpf debug output" }
#define OPT_ENTRY_NO_PHASES_SEE \
	{ "no-phases", OPT_NO_PHASES, NULL, 0, "Do not probe libtorch for training phases (see trainbpf --help)" }
#define OPT_ENTRY_STALL_AFTER \
	{ "stall-after", OPT_STALL_AFTER, "SEC", 0, "A job is stalled when no rank makes progress (a step, a batch) for max(SEC, 10 x its median step); default 30" }
#define OPT_ENTRY_MATCH \
	{ "match", OPT_MATCH, "REGEX", 0, "Watch the processes whose command line (arguments joined by spaces) matches this POSIX extended regex" }
#define OPT_ENTRY_CGROUP \
	{ "cgroup", OPT_CGROUP, "PATH", 0, "Watch the processes in this cgroup v2 path or below (as /proc/PID/cgroup names it)" }

static const struct argp_option opts[] = {
	{ "pid", 'p', "PID[,PID...]", 0, "Trace these processes, their threads and every descendant" },
	{ "interval", 'i', "SEC", 0, "Live table every SEC seconds (default 5, 0 = none)" },
	{ "duration", 'd', "SEC", 0, "Stop after SEC seconds (default: when the job exits)" },
	{ "format", OPT_FORMAT, "text|json|html", 0, "Final report format (default text; html when -o ends in .html)" },
	{ "detail", OPT_DETAIL, NULL, 0, "Text: every section (processes, threads, epoch blocks, the findings' evidence and advice, CUDA/NCCL), not one screen" },
	{ "output", 'o', "FILE", 0, "Write the final report to FILE (default stdout)" },
	OPT_ENTRY_BTF,
	OPT_ENTRY_MAX_THREADS,
	{ "ringbuf-size", OPT_RINGBUF, "KB", 0, "Event ring buffer, power of two >= 4 (default 256)" },
	{ "launches", OPT_LAUNCHES, NULL, 0, "Also count kernel and graph launches (cudaLaunchKernel, cuLaunchKernel[Ex], cudaGraphLaunch...). Costs the launching thread " TB_LAUNCH_COST " per launch" },
	{ "no-phases", OPT_NO_PHASES, NULL, 0, "Do not probe libtorch for training phases (data, forward, backward, optimizer, checkpoint, validation); they cost " TB_PHASES_COST },
	{ "epochs", OPT_EPOCHS, "auto|marker|passes|regex|workers|interval:SEC", 0, "Where epochs start (default auto: markers if the job writes any, else the first batch of each DataLoader pass (PyTorch >= 2.0), else lines it prints like \"Epoch 3/10\" or \"Epoch 2 done\", else each new generation of DataLoader worker processes (persistent_workers=False), else 60 s windows). Markers: include/trainbpf_mark.h" },
	{ "epoch-regex", OPT_EPOCH_REGEX, "RE", 0, "Epoch lines: a POSIX extended regex, case-insensitive; its first group of digits is the epoch number" },
	{ "states-ring", OPT_STATES_RING, "KB", 0, "State-stream ring buffer, power of two >= 4 (default " STR(TB_STATES_RING_KB) "); used by record and --states-out" },
	{ "step-blocks", OPT_STEP_BLOCKS, "N", 0, "Also print a block (step times, shares, slowest category) every N steps, as they complete" },
	OPT_ENTRY_STALL_AFTER,
	{ "functions", OPT_FUNCTIONS, NULL, 0, "Read the Python stacks of the job's threads (CPython 3.8-3.13, from outside): the report names the Python functions the training loop's time went to, and what each was made of" },
	{ "stack-hz", OPT_STACK_HZ, "HZ", 0, "--functions: samples a second of each CPU, for the time on a CPU (default " STR(TB_PY_DEFAULT_HZ) "; waits are read whole, not sampled)" },
	{ "folded", OPT_FOLDED, "FILE", 0, "--functions: also write the stacks, folded (flamegraph.pl, speedscope), with ns as weights" },
	{ "states-out", OPT_STATES_OUT, "FILE", 0, "Debugging and test aid: write every closed state interval (tid, pid, start_ns, end_ns, cat, cp_cat) to FILE as tab-separated lines" },
	OPT_ENTRY_VERBOSE,
	{},
};

bool cli_format(const char *arg, bool with_csv, enum tb_format *f)
{
	return report_format_parse(arg, f) && (with_csv || *f != TB_FMT_CSV);
}

static double parse_seconds(const char *arg, struct argp_state *state,
			    const char *what)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	if (errno || end == arg || *end || !isfinite(v) || v < 0 || v > 1e7)
		argp_error(state, "invalid %s: '%s' (seconds, >= 0)", what, arg);
	return v;
}

static unsigned long parse_uint(const char *arg, struct argp_state *state,
				const char *what, unsigned long lo,
				unsigned long hi)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || end == arg || *end || arg[0] == '-' || v < lo || v > hi)
		argp_error(state, "invalid %s: '%s' (%lu..%lu)", what, arg, lo, hi);
	return v;
}

static void parse_pids(const char *arg, struct argp_state *state,
		       struct env *env)
{
	char *copy = strdup(arg), *tok, *save = NULL;

	if (!copy)
		argp_failure(state, 1, ENOMEM, "out of memory");
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (env->npids == TB_MAX_PIDS)
			argp_error(state, "at most %d PIDs", TB_MAX_PIDS);
		env->pids[env->npids++] =
			(pid_t)parse_uint(tok, state, "PID", 1, INT_MAX);
	}
	free(copy);
	if (!env->npids)
		argp_error(state, "invalid PID list: '%s'", arg);
}

/* A regex the run will compile: its error now, as a usage error. */
static void check_regex(const char *arg, int flags, struct argp_state *state, const char *what)
{
	regex_t re;
	char why[128];
	int rc = regcomp(&re, arg, flags);

	if (rc) {
		regerror(rc, &re, why, sizeof(why));
		argp_error(state, "invalid %s '%s': %s", what, arg, why);
	}
	regfree(&re);
}

/* The kernel wants a ring buffer's size a power of two of pages. */
static unsigned int parse_ring_kb(const char *arg, struct argp_state *state)
{
	unsigned long kb = parse_uint(arg, state, "ring buffer size", 4, 1 << 20);

	if (kb & (kb - 1))
		argp_error(state, "invalid ring buffer size: '%s' (a power of two)", arg);
	return kb;
}

static error_t parse_arg(int key, char *arg, struct argp_state *state)
{
	struct env *env = state->input;

	switch (key) {
	case 'p':
		parse_pids(arg, state, env);
		break;
	case 'i':
		env->interval_s = parse_seconds(arg, state, "interval");
		break;
	case 'd':
		env->duration_s = parse_seconds(arg, state, "duration");
		if (env->duration_s == 0)
			argp_error(state, "invalid duration: '%s' (> 0)", arg);
		break;
	case 'v':
		env->verbose = true;
		break;
	case OPT_LAUNCHES:
		env->launches = true;
		break;
	case OPT_NO_PHASES:
		env->no_phases = true;
		break;
	case 'o':
		env->output = arg;
		break;
	case OPT_FORMAT:
		if (!cli_format(arg, false, &env->format))
			argp_error(state, "invalid format: '%s' (text, json or html)", arg);
		env->format_set = true;
		break;
	case OPT_DETAIL:
		env->detail = true;
		break;
	case OPT_FUNCTIONS:
		env->functions = true;
		break;
	case OPT_STACK_HZ:
		env->stack_hz = parse_uint(arg, state, "--stack-hz", 1, 10000);
		break;
	case OPT_FOLDED:
		env->folded = arg;
		break;
	case OPT_BTF:
		env->btf_path = arg;
		break;
	case OPT_MAX_THREADS:
		env->max_threads = parse_uint(arg, state, "thread count", 64, 1 << 20);
		break;
	case OPT_RINGBUF:
		env->ringbuf_kb = parse_ring_kb(arg, state);
		break;
	case OPT_STATES_RING:
		env->states_ring_kb = parse_ring_kb(arg, state);
		break;
	case OPT_STATES_OUT:
		env->states_out = arg;
		break;
	case OPT_STALL_AFTER:
		env->stall_after_s = parse_seconds(arg, state, "--stall-after");
		if (env->stall_after_s < 1)
			argp_error(state, "invalid --stall-after: '%s' (seconds, >= 1)", arg);
		break;
	case OPT_STEP_BLOCKS: {
		char *end;
		long n = strtol(arg, &end, 10);

		if (end == arg || *end || n < 1 || n > 10000000)
			argp_error(state, "invalid --step-blocks: '%s' (a count of steps, >= 1)", arg);
		env->step_blocks = n;
		break;
	}
	case OPT_EPOCHS: {
		enum ep_source src;

		if (epochs_parse_source(arg, &src, &env->epoch_interval_s))
			argp_error(state, "invalid epoch source: '%s' (auto, marker, passes, regex, workers or interval:SEC)", arg);
		env->epochs = src;
		break;
	}
	case OPT_EPOCH_REGEX:
		check_regex(arg, REG_EXTENDED | REG_ICASE, state, "epoch regex");
		env->epoch_regex = arg;
		break;
	case ARGP_KEY_ARG:
		/* argp stops at "--"; everything after it is the command. */
		env->command = &state->argv[state->next - 1];
		state->next = state->argc;
		break;
	case ARGP_KEY_END:
		if (!env->npids && !env->command)
			argp_error(state, "nothing to trace: give -p PID or -- COMMAND");
		if (env->npids && env->command)
			argp_error(state, "give -p PID or -- COMMAND, not both");
		if (env->states_out)
			env->states = true;
		if ((env->folded || env->stack_hz) && !env->functions)
			argp_error(state, "--folded and --stack-hz go with --functions");
		if (!env->stack_hz)
			env->stack_hz = TB_PY_DEFAULT_HZ;
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

static void env_defaults(struct env *env)
{
	memset(env, 0, sizeof(*env));
	env->interval_s = 5;
	env->max_threads = TB_DEFAULT_SLOTS;
	env->ringbuf_kb = 256;
	env->states_ring_kb = TB_STATES_RING_KB;
	env->epochs = EP_AUTO;
	env->stall_after_s = 30;
	argp_err_exit_status = 2;
}

void cli_parse(int argc, char **argv, struct env *env)
{
	static const struct argp argp = { opts, parse_arg,
		"-p PID[,PID...]\n-- COMMAND [ARG...]", doc };

	env_defaults(env);
	argp_parse(&argp, argc, argv, ARGP_IN_ORDER, NULL, env);
}

static const char record_doc[] =
"trainbpf record: trace a job like trainbpf does, into a SQLite database\n"
"\n"
"Per thread and second: the time each category gained; processes, threads,\n"
"epochs, steps, fork/exec/exit and marker events as they happen; the GPU\n"
"call counts, the diagnosis and the counters at the end. Committed once a\n"
"second: Ctrl-C, SIGTERM, the job ending or trainbpf being killed leave a\n"
"readable file. Schema: docs/recording.md.\n"
"\n"
"The file is created 0600 and locked while recording. An earlier\n"
"recording there is replaced only with --force; any other file, unless\n"
"empty, never.\n"
"\n"
"With --report FILE, the final report the live tool would print goes to FILE\n"
"at the end as well; `trainbpf report` of the recording prints the same bytes.\n"
"\n"
"EXAMPLES:\n"
"    sudo trainbpf record -o run.db -p 1234\n"
"    sudo trainbpf record -o run.db -d 600 -- python3 train.py\n"
"    sudo trainbpf record -o run.db --report run.json --format json -p 1234\n";

/* The live options, -o naming the database; the final report only with --report. */
static const struct argp_option record_opts[] = {
	{ "output", 'o', "FILE", 0, "The recording (SQLite, required): made 0600, locked while recording" },
	{ "force", OPT_FORCE, NULL, 0, "Replace FILE if it is an earlier recording (never another kind of file)" },
	{ "report", OPT_REPORT, "FILE", 0, "Also write the final report to FILE at the end, as the live tool prints it" },
	{ "format", OPT_FORMAT, "text|json|csv|html", 0, "Format of the --report file (default text; html when it ends in .html)" },
	{ "detail", OPT_DETAIL, NULL, 0, "Text: every section, not one screen (see trainbpf --help)" },
	{ "pid", 'p', "PID[,PID...]", 0, "Trace these processes, their threads and every descendant" },
	{ "interval", 'i', "SEC", 0, "Live table every SEC seconds (default 0 = none)" },
	{ "duration", 'd', "SEC", 0, "Stop after SEC seconds (default: when the job exits)" },
	OPT_ENTRY_BTF,
	OPT_ENTRY_MAX_THREADS,
	{ "ringbuf-size", OPT_RINGBUF, "KB", 0, "Event ring buffer, power of two >= 4 (default 256)" },
	{ "launches", OPT_LAUNCHES, NULL, 0, "Also count kernel and graph launches (see trainbpf --help)" },
	OPT_ENTRY_NO_PHASES_SEE,
	{ "epochs", OPT_EPOCHS, "auto|marker|passes|regex|workers|interval:SEC", 0, "Where epochs start (see trainbpf --help)" },
	{ "epoch-regex", OPT_EPOCH_REGEX, "RE", 0, "Epoch lines: a POSIX extended regex, case-insensitive" },
	{ "stall-after", OPT_STALL_AFTER, "SEC", 0, "A job is stalled when no rank makes progress for max(SEC, 10 x its median step); default 30. The recording keeps the stall the run ended in" },
	{ "functions", OPT_FUNCTIONS, NULL, 0, "Read the Python stacks of the job's threads (see trainbpf --help); the recording keeps them: trainbpf report prints the functions, report --folded the stacks" },
	{ "stack-hz", OPT_STACK_HZ, "HZ", 0, "--functions: on-CPU samples a second of each CPU (default " STR(TB_PY_DEFAULT_HZ) ")" },
	OPT_ENTRY_VERBOSE,
	{},
};

static error_t parse_record_arg(int key, char *arg, struct argp_state *state)
{
	struct env *env = state->input;

	switch (key) {
	case 'o':
		if (!*arg)
			argp_error(state, "invalid output: '' (a file name)");
		env->record_path = arg;
		return 0;
	case OPT_FORCE:
		env->force = true;
		return 0;
	case OPT_REPORT:
		env->output = arg;	/* the live tool's -o: the final report */
		return 0;
	case OPT_FORMAT:
		/* The report subcommand's formats: this file is what it will print. */
		if (!cli_format(arg, true, &env->format))
			argp_error(state, "invalid format: '%s' (text, json, csv or html)", arg);
		env->format_set = true;
		return 0;
	case ARGP_KEY_END:
		if (!env->record_path)
			argp_error(state, "record needs -o FILE");
		if (env->format_set && !env->output)
			argp_error(state, "--format is the format of --report FILE: give --report");
		break;
	}
	return parse_arg(key, arg, state);
}

void cli_parse_record(int argc, char **argv, struct env *env)
{
	static const struct argp argp = { record_opts, parse_record_arg,
		"-o FILE -p PID[,PID...]\n-o FILE -- COMMAND [ARG...]", record_doc };

	env_defaults(env);
	env->interval_s = 0;
	env->states = true;	/* the trace's slices: record_states.c */
	argp_parse(&argp, argc, argv, ARGP_IN_ORDER, NULL, env);
}

static const char dump_doc[] =
"trainbpf dump: every thread of a job now, like py-spy dump, from /proc alone\n"
"\n"
"For each process named and its descendants (DataLoader workers, spawned\n"
"ranks): a line per thread with what it does now (on CPU; sleeping; on a\n"
"futex, a pipe, a socket, in storage I/O...), for how long it has been\n"
"asleep so, its CPU time, the kernel function it sleeps in and the file, pipe\n"
"or socket of the fd it waits on. Nothing is attached: it answers at once.\n"
"No training phase: a snapshot has no history (trainbpf -p PID has it).";

static const struct argp_option dump_opts[] = {
	{ "pid", 'p', "PID[,PID...]", 0, "The processes (and their descendants) to show" },
	{ "format", OPT_FORMAT, "text|json", 0, "Output format (default text)" },
	{ "output", 'o', "FILE", 0, "Write to FILE (default stdout)" },
	{},
};

static error_t parse_dump_arg(int key, char *arg, struct argp_state *state)
{
	struct env *env = state->input;

	switch (key) {
	case 'p':
		parse_pids(arg, state, env);
		return 0;
	case 'o':
		env->output = arg;
		return 0;
	case OPT_FORMAT:
		if (!cli_format(arg, false, &env->format) ||
		    (env->format != TB_FMT_TEXT && env->format != TB_FMT_JSON))
			argp_error(state, "invalid format: '%s' (text or json)", arg);
		return 0;
	case ARGP_KEY_ARG:
		argp_error(state, "unexpected argument: '%s'", arg);
		return 0;
	case ARGP_KEY_END:
		if (!env->npids)
			argp_error(state, "no process: -p PID[,PID...]");
		return 0;
	}
	return ARGP_ERR_UNKNOWN;
}

void cli_parse_dump(int argc, char **argv, struct env *env)
{
	static const struct argp argp = { dump_opts, parse_dump_arg, "-p PID[,PID...]", dump_doc };

	env_defaults(env);
	argp_parse(&argp, argc, argv, 0, NULL, env);
}

static const char top_doc[] =
"trainbpf top: every training job of this node, a line per rank, live\n"
"\n"
"Finds the training processes as `trainbpf serve` does (a process that maps\n"
"libtorch, the CUDA runtime or NCCL; with --match or --cgroup, those instead)\n"
"and shows, every -i seconds, a line per rank: its step time, steps per\n"
"second, where its time went since the last table by training phase, what\n"
"it mostly was (a category), and its job's top finding, or STALLED. On a\n"
"terminal it is redrawn in place: up/down choose a rank, enter opens its\n"
"job's live view (trainbpf -p its ranks), q quits. Otherwise a table after\n"
"another.\n"
"\n"
"EXAMPLES:\n"
"    sudo trainbpf top\n"
"    sudo trainbpf top -i 1 --match 'train\\.py'\n";

static const struct argp_option top_opts[] = {
	{ "interval", 'i', "SEC", 0, "A table every SEC seconds (default 2)" },
	{ "duration", 'd', "SEC", 0, "Stop after SEC seconds (default: Ctrl-C or q)" },
	OPT_ENTRY_MATCH,
	OPT_ENTRY_CGROUP,
	OPT_ENTRY_STALL_AFTER,
	OPT_ENTRY_BTF,
	OPT_ENTRY_MAX_THREADS,
	OPT_ENTRY_NO_PHASES_SEE,
	OPT_ENTRY_VERBOSE,
	{},
};

static const char serve_doc[] =
"trainbpf serve: every training process of this node, for Prometheus\n"
"\n"
"Finds the training processes by itself (a process that maps libtorch, the\n"
"CUDA runtime or NCCL; with --match or --cgroup, those instead), traces them\n"
"with their workers and threads, forgets them when they exit, and serves\n"
"/metrics in the Prometheus text format: per job and rank, where the time\n"
"went by category and by training phase, steps, storage bytes, CUDA and NCCL\n"
"calls (docs/metrics.md). Labels: training_job, rank, local_rank, world_size,\n"
"role.\n"
"Binds to loopback unless --listen says otherwise; TLS and basic auth with\n"
"--web.config.file. SIGHUP looks for new processes at once and reads the web\n"
"config again; SIGINT and SIGTERM stop it, nothing left attached.\n"
"\n"
"EXAMPLES:\n"
"    sudo trainbpf serve\n"
"    sudo trainbpf serve --listen 0.0.0.0:9464 --match 'train\\.py'\n"
"    sudo trainbpf serve --cgroup /kubepods.slice\n";

static const struct argp_option serve_opts[] = {
	{ "listen", OPT_LISTEN, "HOST:PORT", 0, "Serve /metrics there (default 127.0.0.1:9464; [IPV6]:PORT, or PORT on loopback)" },
	OPT_ENTRY_MATCH,
	OPT_ENTRY_CGROUP,
	{ "grace", OPT_GRACE, "SEC", 0, "Keep a job's series this long after its last process exited (default 30)" },
	OPT_ENTRY_STALL_AFTER,
	{ "web.config.file", OPT_WEB_CONFIG, "FILE", 0, "TLS and basic auth for /metrics, in the web-config file format of Prometheus' exporters (docs/metrics.md); read again at SIGHUP" },
	OPT_ENTRY_BTF,
	OPT_ENTRY_MAX_THREADS,
	{ "ringbuf-size", OPT_RINGBUF, "KB", 0, "Event ring buffer, power of two >= 4 (default 256)" },
	OPT_ENTRY_NO_PHASES_SEE,
	OPT_ENTRY_VERBOSE,
	{},
};

static error_t parse_serve_arg(int key, char *arg, struct argp_state *state)
{
	struct env *env = state->input;

	switch (key) {
	case OPT_LISTEN:
		env->listen = arg;
		return 0;
	case OPT_MATCH:
		check_regex(arg, REG_EXTENDED | REG_NOSUB, state, "--match regex");
		env->match = arg;
		return 0;
	case OPT_CGROUP:
		if (arg[0] != '/')
			argp_error(state, "invalid --cgroup: '%s' (a path from the cgroup root, "
				   "as /proc/PID/cgroup shows it)", arg);
		env->cgroup = arg;
		return 0;
	case OPT_GRACE:
		env->grace_s = parse_seconds(arg, state, "grace");
		return 0;
	case OPT_WEB_CONFIG:
		env->web_config = arg;
		return 0;
	case ARGP_KEY_ARG:
		argp_error(state, "%s takes no command: it finds the training processes",
			   env->top ? "top" : "serve");
		return 0;
	case ARGP_KEY_END:
		return 0;
	}
	return parse_arg(key, arg, state);
}

void cli_parse_top(int argc, char **argv, struct env *env)
{
	static const struct argp argp = { top_opts, parse_serve_arg,
		"[-i SEC] [--match REGEX] [--cgroup PATH]", top_doc };

	env_defaults(env);
	env->serve = env->top = true;
	env->interval_s = 2;
	env->grace_s = 10;	/* a job gone leaves the table soon */
	env->epochs = EP_INTERVAL;	/* as serve: epochs are a job's */
	env->epoch_interval_s = 1e7;
	argp_parse(&argp, argc, argv, ARGP_IN_ORDER, NULL, env);
	if (env->interval_s <= 0) {
		fprintf(stderr, "trainbpf top: -i must be above 0\n");
		exit(2);
	}
}

void cli_parse_serve(int argc, char **argv, struct env *env)
{
	static const struct argp argp = { serve_opts, parse_serve_arg,
		"[--listen HOST:PORT] [--match REGEX] [--cgroup PATH]", serve_doc };

	env_defaults(env);
	env->serve = true;
	env->interval_s = 0;
	env->listen = "127.0.0.1:9464";
	env->grace_s = 30;
	/* Epochs are a job's; a node's daemon sees many: none, and no write probes. */
	env->epochs = EP_INTERVAL;
	env->epoch_interval_s = 1e7;
	argp_parse(&argp, argc, argv, ARGP_IN_ORDER, NULL, env);
}
