/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What only /proc tells, for the diagnosis (diagnosis.h): the machine's
 * available memory, each live process's RSS, and its rank (RANK in its
 * environment, read once). Sampled once a second and at epoch boundaries,
 * on trainbpf's clock: the job pays nothing for it.
 */
#ifndef TB_MEMORY_H
#define TB_MEMORY_H

#include <stdbool.h>
#include <stdint.h>
#include "diagnosis.h"
#include "job.h"

struct mem_sampler {
	struct diag *d;		/* where the samples go */
	const char *proc_root;	/* "/proc"; tests point it elsewhere */
	uint64_t next;		/* the next sample is due */
};

void mem_sampler_init(struct mem_sampler *s, struct diag *d);
/* Once a second (force: now): memory, RSS and ranks of the live processes. */
void mem_sample(struct mem_sampler *s, const struct job *job, uint64_t now, bool force);

#endif
