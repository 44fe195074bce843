/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One traced run's models, held by value: the job (processes, threads,
 * totals) and what is known beside it (CUDA/NCCL counts, the GPUs' own
 * readings, epochs and steps, phases, memory samples for the diagnosis, a
 * stalled job). The live run (app/run.c) and the recording reader
 * (record/recording_read.c) each fill one, made by session_init; every
 * report reads it const. Nothing here is a pointer to a sibling: a model
 * that needs another is handed it, or the session.
 */
#ifndef TB_SESSION_H
#define TB_SESSION_H

#include <stdbool.h>
#include "diagnosis.h"
#include "epochs.h"
#include "gpu.h"
#include "gpu_util.h"
#include "job.h"
#include "phases.h"
#include "pystacks.h"
#include "stall.h"
#include "steps.h"

struct session {
	struct job job;
	struct gpu gpu;		/* CUDA/NCCL probes and their counts */
	struct gpu_util gu;	/* the GPU's own readings, NVML: GU_NOT_TRIED if never read */
	struct epochs ep;	/* epoch and step boundaries */
	struct steps steps;	/* steps from the call period (ep.calls) */
	struct phases phases;
	struct diag diag;	/* memory samples, ranks, saved findings */
	struct stall stall;
	struct pystacks py;	/* --functions: the Python stacks read */
	/*
	 * Phases were looked for (not --no-phases; a recording that has them
	 * and is not cut to one epoch): the reports show a phase section.
	 */
	bool phases_on;
	/* A stall is judged (a live run) or was recorded (schema 10). */
	bool stall_on;
	/* The Python stacks were read (--functions). */
	bool py_on;
};

/* Every model empty; ep.calls is steps. The caller then sets epochs up. */
void session_init(struct session *s);
void session_free(struct session *s);

/* The phases, or NULL when the run has no phase section. */
static inline const struct phases *ses_phases(const struct session *s)
{
	return s->phases_on ? &s->phases : NULL;
}

/* tid's phases (its steps, its spans), or NULL: none, or no phase section. */
static inline const struct ph_thread *ses_phase_thread(const struct session *s, pid_t tid)
{
	return s->phases_on ? phases_thread(&s->phases, tid) : NULL;
}

/* The Python stacks, or NULL when they were not read. */
static inline const struct pystacks *ses_py(const struct session *s)
{
	return s->py_on ? &s->py : NULL;
}

/* The stall model, or NULL when none is judged or recorded. */
static inline const struct stall *ses_stall(const struct session *s)
{
	return s->stall_on ? &s->stall : NULL;
}

#endif
