// SPDX-License-Identifier: BSD-3-Clause
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "discover.h"
#include "libraries.h"
#include "procfs.h"
#include "procmaps.h"

#define DSC_MAX_PROCS 65536

int discover_init(struct discover *d, const char *match, const char *cgroup)
{
	memset(d, 0, sizeof(*d));
	d->self = getpid();
	d->cgroup = cgroup;
	if (match) {
		int err = regcomp(&d->re, match, REG_EXTENDED | REG_NOSUB);

		if (err) {
			char why[128];

			regerror(err, &d->re, why, sizeof(why));
			fprintf(stderr, "trainbpf: invalid --match regex: %s\n", why);
			return -1;
		}
		d->has_re = true;
	}
	return 0;
}

static bool alive_in(const struct job *job, pid_t pid)
{
	const struct proc_rec *p = job_proc_const(job, pid);

	return p && job_proc_alive(p);
}

/* Ourselves, traced already, or its traced parent's fork made it traced already (or will). */
static bool not_new(const struct discover *d, const struct job *job, pid_t pid, pid_t ppid)
{
	return pid == d->self || alive_in(job, pid) || alive_in(job, ppid);
}

/* Its command line, arguments joined by spaces, matches. */
static bool cmdline_matches(const struct discover *d, pid_t pid)
{
	char buf[4096];
	int n = procfs_cmdline(pid, buf, sizeof(buf));

	if (n <= 0)
		return false;
	for (int i = 0; i < n - 1; i++)
		if (!buf[i])
			buf[i] = ' ';
	return !regexec(&d->re, buf, 0, NULL, 0);
}

/* Its cgroup (v2: the "0::" line) is d->cgroup or below it. */
static bool in_cgroup(const struct discover *d, pid_t pid)
{
	char path[64], buf[4096], *line;
	size_t n = strlen(d->cgroup);

	snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
	if (procfs_read_file(path, buf, sizeof(buf)) < 0 || !(line = strstr(buf, "0::")))
		return false;
	line += 3;
	while (n > 1 && d->cgroup[n - 1] == '/')
		n--;
	return !strncmp(line, d->cgroup, n) && (line[n] == '/' || line[n] == '\n' || !line[n]);
}

/* It maps a library that marks a job (libraries.h: libtorch, the CUDA runtime, NCCL). */
static bool maps_libraries(struct discover *d, pid_t pid)
{
	struct procmaps pm;
	struct map_line m;
	bool found = false;

	if (procmaps_open(&pm, pid, false))
		return false;
	d->maps_read++;
	while (!found && procmaps_next(&pm, &m)) {
		if (procmaps_path(&pm, &m))
			continue;
		for (int f = 0; f < LIB_NFAMILIES && !found; f++)
			found = tb_libraries[f].marks_job && library_named(m.path, f);
	}
	procmaps_close(&pm);
	return found;
}

static int by_pid(const void *a, const void *b)
{
	const struct dsc_seen *x = a, *y = b;

	return (x->pid > y->pid) - (x->pid < y->pid);
}

/*
 * Whether pid is one to watch. The libraries are looked for again only
 * when the process's code changed since it was last looked at (an
 * import torch maps them): reading its status costs a hundredth of its
 * maps.
 */
static bool told_to(const struct discover *d, pid_t pid)
{
	return (!d->has_re || cmdline_matches(d, pid)) && (!d->cgroup || in_cgroup(d, pid));
}

static bool wanted(struct discover *d, pid_t pid, const struct proc_stat *st,
		   struct dsc_seen *next)
{
	struct dsc_seen key = { .pid = pid }, *old;

	if (d->has_re || d->cgroup)
		return told_to(d, pid);
	next->pid = pid;
	next->starttime = st->starttime;
	next->code_kb = procfs_code_kb(pid);
	old = bsearch(&key, d->seen, d->nseen, sizeof(key), by_pid);
	if (old && old->starttime == st->starttime && old->code_kb == next->code_kb)
		return false;
	return next->code_kb && maps_libraries(d, pid);
}

int discover_scan(struct discover *d, struct tracer *tr, const struct job *job)
{
	pid_t *pids = malloc(sizeof(pid_t) * DSC_MAX_PROCS);
	pid_t *ppids = malloc(sizeof(pid_t) * DSC_MAX_PROCS);
	struct dsc_seen *next = calloc(DSC_MAX_PROCS, sizeof(*next));
	int n, added = 0, nnext = 0;

	if (!pids || !ppids || !next)
		goto cleanup;
	n = procfs_all(pids, ppids, DSC_MAX_PROCS);
	for (int i = 0; i < n; i++) {
		struct proc_stat st;

		if (not_new(d, job, pids[i], ppids[i]) ||
		    procfs_stat(pids[i], 0, &st) || procfs_is_kthread(&st))
			continue;
		if (wanted(d, pids[i], &st, &next[nnext]) &&
		    !tracer_add_process(tr, pids[i], true))
			added++;
		if (next[nnext].pid)
			nnext++;
	}
	if (added)
		tracer_add_descendants(tr);
	qsort(next, nnext, sizeof(*next), by_pid);
	free(d->seen);
	d->seen = next;
	d->nseen = nnext;
	next = NULL;
cleanup:
	free(pids);
	free(ppids);
	free(next);
	return added;
}

int discover_exec(struct discover *d, struct tracer *tr, const struct job *job, pid_t pid)
{
	struct proc_stat st;

	if ((!d->has_re && !d->cgroup) || procfs_stat(pid, 0, &st) ||
	    not_new(d, job, pid, st.ppid) || !told_to(d, pid) ||
	    tracer_add_process(tr, pid, true))
		return 0;
	tracer_add_descendants(tr);
	return 1;
}

void discover_free(struct discover *d)
{
	if (d->has_re)
		regfree(&d->re);
	free(d->seen);
	d->seen = NULL;
}
