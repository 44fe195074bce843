/* SPDX-License-Identifier: BSD-3-Clause */
/* Command-line options: what the user asked for, nothing else. */
#ifndef TB_CLI_H
#define TB_CLI_H

#include <stdbool.h>
#include <sys/types.h>
#include "report_write.h"	/* enum tb_format: chosen beside the writers */

#define TB_MAX_PIDS 64
/* Measured by bench/probe_cost.sh and bench/gpu_overhead.sh; see bench/RESULTS.md. */
#define TB_PHASES_COST "about 14 uprobe hits per training step, 0.1 ms on the build VM (bench/phase_cost.sh)"
/*
 * --functions' on-CPU samples a second of each CPU: a prime, so that they
 * do not fall in step with the kernel's tick (250 or 1000 Hz) or a loop's
 * own round periods; enough for a function of 10% of a 60 s run to be
 * named within 1.3 points (its binomial spread, 2 sigma).
 */
#define TB_PY_DEFAULT_HZ 97
#define TB_LAUNCH_COST "about 1 us (2 when cudaLaunchKernel reaches cuLaunchKernel): +3.5-5% step time at 25k launches/s on the build VM"


struct env {
	pid_t pids[TB_MAX_PIDS];
	int npids;
	char **command;		/* argv after "--", NULL-terminated */
	double interval_s;	/* live table period; 0 = none */
	double duration_s;	/* 0 = until the target exits */
	enum tb_format format;
	bool format_set;	/* --format given: record needs --report with it */
	bool detail;		/* --detail: the text report with every section */
	const char *output;	/* final report file; NULL: stdout (record: none) */
	bool verbose;
	const char *btf_path;	/* NULL: the kernel's own */
	unsigned int max_threads;
	unsigned int ringbuf_kb;
	bool states;		/* stream state intervals (user/states.h): record, --states-out */
	unsigned int states_ring_kb;
	const char *states_out;	/* --states-out: the stream as text, for tests */
	double stall_after_s;	/* --stall-after: the stall threshold's floor (stall.h) */
	int step_blocks;	/* --step-blocks N: a live block every N steps; 0 none */
	bool launches;		/* probe launches too (costly: opt-in) */
	bool no_phases;		/* --no-phases: no libtorch probes, no phase table */
	bool functions;		/* --functions: the Python stack reader */
	unsigned int stack_hz;	/* --stack-hz: its on-CPU samples a second of each CPU */
	const char *folded;	/* --folded FILE */
	int epochs;		/* enum ep_source (epochs.h) */
	double epoch_interval_s;	/* --epochs interval:SEC */
	const char *epoch_regex;	/* NULL: EP_DEFAULT_REGEX */
	const char *record_path;	/* record: the SQLite file (-o); NULL: live */
	bool force;		/* record --force: an earlier recording may be replaced */
	/* serve: a node's daemon for Prometheus (docs/metrics.md) */
	bool serve;
	bool top;		/* trainbpf top: serve's machinery, a table on the terminal */
	const char *listen;	/* HOST:PORT of /metrics */
	const char *match;	/* watch processes whose command line matches */
	const char *cgroup;	/* watch processes in this cgroup (v2 path) */
	double grace_s;		/* a job's series stay this long after its last process */
	const char *web_config;	/* --web.config.file: TLS and basic auth (web_config.h) */
};

/* "text", "json", "html", and "csv" when with_csv; false if arg is none of them. */
bool cli_format(const char *arg, bool with_csv, enum tb_format *f);
/* Parses argv into env. Exits with status 2 and one line on bad input. */
void cli_parse(int argc, char **argv, struct env *env);
/* The same for "record" (argv[0] is "record"): -o is the database. */
void cli_parse_record(int argc, char **argv, struct env *env);
/* The same for "serve": no target, the daemon finds them. */
void cli_parse_serve(int argc, char **argv, struct env *env);
/* The same for "top": serve's, with a table every -i seconds instead of /metrics. */
void cli_parse_top(int argc, char **argv, struct env *env);
/* trainbpf dump -p PID[,PID...] [--format text|json] [-o FILE] */
void cli_parse_dump(int argc, char **argv, struct env *env);

#endif
