/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the epochs keep, bounded (epochs.h says how far): snapshots that
 * follow the job's folds, an epoch's rows folded per parent and role,
 * older epochs and generations merged two by two. Used by epochs.c only;
 * it calls nothing of epochs.c.
 */
#ifndef TB_EPOCHS_FOLD_H
#define TB_EPOCHS_FOLD_H

#include "epochs.h"
#include "job.h"

/* s->p with room for n entries, from the pool if it has one; -1 if out of memory. */
int ep_snap_alloc(struct epochs *ep, struct ep_snap *s, int n);
/* s->p back to the pool (or freed), s empty. */
void ep_snap_release(struct epochs *ep, struct ep_snap *s);
void ep_pool_free(struct epochs *ep);

/* Row i of a snapshot, NULL if the process was not in the job then. */
const struct ep_tot *ep_tot_at(const struct ep_snap *s, int i);
/* ep_tot_of would copy before on: p's main thread need not be looked up. */
bool ep_tot_reusable(const struct ep_tot *before, const struct proc_rec *p);
/*
 * A process's totals now, into a snapshot entry, mt's (its loop thread,
 * may be NULL) as its main_*; those of before (its entry in the last
 * snapshot, or NULL) if they were final.
 */
void ep_tot_of(struct ep_tot *t, const struct proc_rec *p, const struct thread_rec *mt,
	       const struct ep_tot *before);
/* An epoch row's identity (not its times) from a snapshot entry. */
void ep_row_of(struct ep_proc *d, const struct ep_tot *t);

/*
 * The job folded: a snapshot's entries follow job->procs (members summed
 * into their aggregate's entry). Before that, for the open epoch of st:
 * the folded members' times in it (prev, the last tick, holds their final
 * totals), counted and tallied for the aggregate's row.
 */
void ep_snap_remap(struct epochs *ep, struct ep_snap *s, const struct job *job,
		   const struct job_fold *f);
void ep_folds_on_fold(struct ep_stream *st, const struct ep_snap *prev,
		      const struct job_fold *f);
/* At an epoch's close: the aggregates' rows get those counts and tallies. */
void ep_folds_into_rows(struct ep_stream *st, struct ep_proc *d, int n);

/* Past EP_MAX_EPOCHS (EP_MAX_GENS): the older half, merged two by two. */
void ep_stream_merge_older(struct ep_stream *st);
/* job: whose parents may still live (NULL: all have ended, a recording's). */
void ep_gens_merge_older(struct epochs *ep, const struct job *job);

#endif
