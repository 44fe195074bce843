// SPDX-License-Identifier: BSD-3-Clause
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "memory.h"
#include "procfs.h"

void mem_sampler_init(struct mem_sampler *s, struct diag *d)
{
	*s = (struct mem_sampler){ .d = d, .proc_root = "/proc" };
}

static void sample_memory(struct mem_sampler *s, uint64_t now)
{
	char buf[4096], path[64];
	uint64_t total, avail;

	snprintf(path, sizeof(path), "%s/meminfo", s->proc_root);
	if (procfs_read_file(path, buf, sizeof(buf)) < 0 ||
	    procfs_parse_meminfo(buf, &total, &avail))
		return;
	diag_add_memory(s->d, total, avail, now);
}

/*
 * RANK=N from the environment torchrun and most launchers set. Read again
 * at the next samples while it is not there: a child read between its
 * fork and its exec has its parent's environment (seen: a rank named by
 * PID only). A few times at most: most processes have none.
 */
#define RANK_READS 4
static void read_rank(struct mem_sampler *s, struct dg_pinfo *p)
{
	char buf[65536], path[64];
	const char *v;
	ssize_t n;

	p->env_reads++;
	snprintf(path, sizeof(path), "%s/%d/environ", s->proc_root, p->pid);
	n = procfs_read_file(path, buf, sizeof(buf));
	if (n > 0 && (v = procfs_env_get(buf, n, "RANK")))
		p->rank = atoi(v);
}

static void sample_proc(struct mem_sampler *s, pid_t pid, uint64_t now)
{
	struct dg_pinfo *p = diag_pinfo(s->d, pid);
	char buf[256], path[64];
	unsigned long long size, res;

	if (!p)
		return;
	p->seen_ns = now;
	if (p->rank < 0 && p->env_reads < RANK_READS)
		read_rank(s, p);
	snprintf(path, sizeof(path), "%s/%d/statm", s->proc_root, pid);
	if (procfs_read_file(path, buf, sizeof(buf)) < 0 ||
	    sscanf(buf, "%llu %llu", &size, &res) != 2)
		return;
	diag_add_rss(p, now, res * (sysconf(_SC_PAGESIZE) / 1024));
}

void mem_sample(struct mem_sampler *s, const struct job *job, uint64_t now, bool force)
{
	if (!force && now < s->next)
		return;
	s->next = now + DG_SAMPLE_NS;
	sample_memory(s, now);
	for (int i = 0; i < job->nprocs; i++)
		if (job_proc_alive(&job->procs[i]))
			sample_proc(s, job->procs[i].pid, now);
	diag_forget_gone(s->d, now);
}
