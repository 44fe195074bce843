/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `trainbpf serve` finds the training processes of a node by itself: a
 * process that maps libtorch, the CUDA runtime or NCCL; or, when told,
 * one whose command line matches --match or that runs in --cgroup (both,
 * if both are given; the libraries are then not asked for). What it
 * finds is traced from then on with its descendants (its DataLoader
 * workers, its helpers) and its threads.
 */
#ifndef TB_DISCOVER_H
#define TB_DISCOVER_H

#include <regex.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "tracer.h"

/* A process looked at: its code size then, so its maps are read again only if it changed. */
struct dsc_seen {
	pid_t pid;
	unsigned long long starttime;
	uint64_t code_kb;
};

struct discover {
	bool has_re;
	regex_t re;
	const char *cgroup;	/* a cgroup v2 path prefix; NULL: any */
	struct dsc_seen *seen;	/* sorted by pid */
	int nseen;
	pid_t self;
	uint64_t maps_read;	/* /proc/PID/maps reads so far (the scan's cost) */
};

/* -1 and one line on stderr for a bad regex. */
int discover_init(struct discover *d, const char *match, const char *cgroup);
/* Traces what it finds that is not traced yet; how many processes it added. */
int discover_scan(struct discover *d, struct tracer *tr, const struct job *job);
/*
 * With --match or --cgroup: pid, which has just exec'ed, traced now if it
 * matches (tracer_opts.watch_execs), not at the next scan. 1 if added.
 */
int discover_exec(struct discover *d, struct tracer *tr, const struct job *job, pid_t pid);
void discover_free(struct discover *d);

#endif
