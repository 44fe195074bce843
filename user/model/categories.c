// SPDX-License-Identifier: BSD-3-Clause
#include <string.h>
#include "categories.h"

const char *const tb_cat_names[TB_NCAT] = {
	[TB_CPU] = "cpu", [TB_GPU_WAIT] = "gpu_wait", [TB_COMM] = "comm",
	[TB_DATA_WAIT] = "data_wait", [TB_IO] = "io",
	[TB_RUNQUEUE] = "runqueue", [TB_LOCK] = "lock", [TB_IDLE] = "idle",
};

const char *const tb_cat_short[TB_NCAT] = {
	"cpu", "gpu", "comm", "data", "io", "rq", "lock", "idle",
};

const char *const tb_rollup_names[TB_NROLLUP] = {
	"computation", "communication", "io_data", "other",
};

const char *const tb_rollup_labels[TB_NROLLUP] = {
	"computation", "communication", "io & data", "other",
};

const int tb_rollup_cats[TB_NROLLUP][4] = {
	[TB_R_COMPUTATION] = { TB_CPU, TB_GPU_WAIT, -1 },
	[TB_R_COMMUNICATION] = { TB_COMM, -1 },
	[TB_R_IO_DATA] = { TB_DATA_WAIT, TB_IO, -1 },
	[TB_R_OTHER] = { TB_RUNQUEUE, TB_LOCK, TB_IDLE, -1 },
};

enum tb_rollup tb_cat_rollup(int cat)
{
	for (int r = 0; r < TB_NROLLUP; r++)
		for (int k = 0; tb_rollup_cats[r][k] >= 0; k++)
			if (tb_rollup_cats[r][k] == cat)
				return r;
	return TB_R_OTHER;
}

uint64_t sum_cats(const uint64_t c[TB_NCAT])
{
	uint64_t s = 0;

	for (int i = 0; i < TB_NCAT; i++)
		s += c[i];
	return s;
}

void rollup_pct(const uint64_t cats[TB_NCAT], double pct[TB_NROLLUP])
{
	uint64_t total = sum_cats(cats);

	memset(pct, 0, sizeof(double) * TB_NROLLUP);
	if (!total)
		return;
	for (int c = 0; c < TB_NCAT; c++)
		pct[tb_cat_rollup(c)] += 100.0 * cats[c] / total;
}

static int64_t positive_sum(const int64_t c[TB_NCAT])
{
	int64_t t = 0;

	for (int i = 0; i < TB_NCAT; i++)
		t += c[i] > 0 ? c[i] : 0;
	return t;
}

static double share_of(const int64_t c[TB_NCAT], int cat, int64_t total)
{
	return total > 0 && c[cat] > 0 ? (double)c[cat] / total : 0.0;
}

enum tb_worker_kind worker_kind(const int64_t own[TB_NCAT], double *io, double *cpu)
{
	int64_t total = positive_sum(own);

	*io = share_of(own, TB_IO, total);
	*cpu = share_of(own, TB_CPU, total) + share_of(own, TB_RUNQUEUE, total);
	if (*io >= 0.3 && *io >= *cpu)
		return TB_WK_IO_BOUND;
	return *cpu >= 0.5 ? TB_WK_CPU_BOUND : TB_WK_WAITING;
}

void worker_tally_add(struct worker_tally *t, pid_t pid, const int64_t own[TB_NCAT])
{
	int64_t total = positive_sum(own);
	double io, cpu;

	if (total <= 0)
		return;
	t->n[worker_kind(own, &io, &cpu)]++;
	if (io + cpu > t->busy) {
		t->busy = io + cpu;
		t->busiest = pid;
		t->cpu = share_of(own, TB_CPU, total);
		t->io = io;
	}
}

void worker_tally_merge(struct worker_tally *t, const struct worker_tally *o)
{
	for (int k = 0; k < TB_NWK; k++)
		t->n[k] += o->n[k];
	if (o->busy > t->busy) {
		t->busy = o->busy;
		t->busiest = o->busiest;
		t->cpu = o->cpu;
		t->io = o->io;
	}
}

int worker_tally_count(const struct worker_tally *t)
{
	return t->n[TB_WK_IO_BOUND] + t->n[TB_WK_CPU_BOUND] + t->n[TB_WK_WAITING];
}
