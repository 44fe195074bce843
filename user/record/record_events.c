// SPDX-License-Identifier: BSD-3-Clause
/*
 * Events, epochs and steps. Ring-buffer events arrive between flushes and
 * wait in a queue; epochs are written once closed (a boundary fixes their
 * end, and the epoch flushes at once); step markers as they come. Steps
 * found from the call period are written at the end only: detection drops
 * recent steps again when the loop changes (steps.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "grow.h"
#include "record.h"
#include "session.h"
#include "steps.h"

static struct rec_event *new_event(struct recorder *r, uint64_t ts, const char *type)
{
	struct rec_event *e = tb_grow(r->ev, &r->capev, r->nev + 1, sizeof(*e));

	if (!e)
		abort();	/* as job.c: out of memory, nothing left to say */
	r->ev = e;
	e = &r->ev[r->nev++];
	memset(e, 0, sizeof(*e));
	e->ts = ts;
	e->type = type;
	return e;
}

static void queue_step(struct recorder *r, struct rec_step step)
{
	struct rec_step *n = tb_grow(r->steps, &r->capsteps, r->nsteps + 1, sizeof(*n));

	if (!n)
		abort();
	r->steps = n;
	r->steps[r->nsteps++] = step;
}

void record_on_lifecycle(struct recorder *r, const struct tb_event *e)
{
	static const char *const types[] = {
		[TB_EV_FORK] = "fork", [TB_EV_EXEC] = "exec", [TB_EV_EXIT] = "exit",
	};
	struct rec_event *ev;

	if (!r || e->type < TB_EV_FORK || e->type > TB_EV_EXIT)
		return;
	ev = new_event(r, e->ts, types[e->type]);
	ev->pid = e->pid;
	ev->ppid = e->type == TB_EV_FORK ? (pid_t)e->ppid : 0;
	if (e->type == TB_EV_EXIT) {
		ev->code = e->exit_code;
		ev->has_code = true;
	}
	if (e->type == TB_EV_EXEC)
		snprintf(ev->text, sizeof(ev->text), "%.*s", TB_PATH_LEN, e->path);
}

/* After epochs took it: a training step it began, as the reader will find it. */
void record_on_phase(struct recorder *r, const struct epochs *ep,
		     const struct tb_phase_event *e)
{
	struct rec_phase *n;

	if (!r)
		return;
	for (; r->loop_steps < ep->loop.seen; r->loop_steps++)
		queue_step(r, (struct rec_step){ ep->loop.last, ep->loop_pid, ep->loop_tid,
						 ep->loop_src });
	for (; r->optim_steps < ep->optim.seen; r->optim_steps++)
		queue_step(r, (struct rec_step){ ep->optim.last, ep->loop_pid, ep->loop_tid,
						 EP_STEPS_OPTIM });
	if (r->ph_rows + r->nph >= REC_PHASE_MAX_ROWS ||
	    !(n = tb_grow(r->ph, &r->capph, r->nph + 1, sizeof(*n)))) {
		r->ph_dropped++;
		return;
	}
	r->ph = n;
	r->ph[r->nph++] = (struct rec_phase){ e->ts, e->pid, e->tid, e->phase, e->resolved };
}

static void write_phases(struct recorder *r)
{
	for (int i = 0; i < r->nph && !r->failed; i++) {
		const struct rec_phase *p = &r->ph[i];

		rec_bind_int(r, RS_PHASE_EVENT, 1, p->tid);
		rec_bind_int(r, RS_PHASE_EVENT, 2, p->pid);
		rec_bind_int(r, RS_PHASE_EVENT, 3, p->ts);
		rec_bind_int(r, RS_PHASE_EVENT, 4, p->phase);
		rec_bind_int(r, RS_PHASE_EVENT, 5, p->resolved);
		rec_step(r, RS_PHASE_EVENT);
	}
	r->ph_rows += r->nph;
	r->nph = 0;
}

void record_on_scope(struct recorder *r, const struct tb_scope_event *e)
{
	struct rec_scope *n;

	if (!r)
		return;
	if (r->sc_rows + r->nsc >= REC_SCOPE_MAX_ROWS ||
	    !(n = tb_grow(r->sc, &r->capsc, r->nsc + 1, sizeof(*n)))) {
		r->sc_dropped++;
		return;
	}
	r->sc = n;
	n = &r->sc[r->nsc++];
	*n = (struct rec_scope){ e->ts, e->pid, e->tid, e->open, e->depth, "" };
	/* The job's bytes, cut anywhere by BPF: valid UTF-8 for the trace's JSON. */
	if (e->open)
		pystacks_scope_name(n->name, sizeof(n->name), &e->name);
}

static void write_scopes(struct recorder *r)
{
	for (int i = 0; i < r->nsc && !r->failed; i++) {
		const struct rec_scope *c = &r->sc[i];

		rec_bind_int(r, RS_SCOPE, 1, c->tid);
		rec_bind_int(r, RS_SCOPE, 2, c->pid);
		rec_bind_int(r, RS_SCOPE, 3, c->ts);
		rec_bind_int(r, RS_SCOPE, 4, c->open);
		rec_bind_int(r, RS_SCOPE, 5, c->depth);
		if (c->open)
			rec_bind_text(r, RS_SCOPE, 6, c->name);
		else
			rec_bind_null(r, RS_SCOPE, 6);
		rec_step(r, RS_SCOPE);
	}
	r->sc_rows += r->nsc;
	r->nsc = 0;
}

/* The lines of a write that match the epoch regex, "\n"-joined. */
static bool matched_lines(const struct epochs *ep, char *buf, char *out, size_t len)
{
	char *save = NULL;
	size_t off = 0;

	out[0] = '\0';
	if (!ep->re_ok)
		return false;
	for (char *line = strtok_r(buf, "\r\n", &save); line;
	     line = strtok_r(NULL, "\r\n", &save))
		if (!regexec(&ep->re, line, 0, NULL, 0) && off < len)
			off += snprintf(out + off, len - off, "%s%s", off ? "\n" : "", line);
	return off > 0;
}

/* After epochs_on_event: a marker it took as a step is a step here too. */
void record_on_text(struct recorder *r, const struct epochs *ep,
		    const struct tb_text_event *e)
{
	char buf[TB_TEXT_LEN + 1], lines[TB_TEXT_LEN + 1];
	size_t len = e->len < TB_TEXT_LEN ? e->len : TB_TEXT_LEN;
	struct rec_event *ev;

	if (!r)
		return;
	memcpy(buf, e->text, len);
	buf[len] = '\0';
	if (e->type == TB_EV_TEXT && !matched_lines(ep, buf, lines, sizeof(lines)))
		return;
	buf[strcspn(buf, "\n")] = '\0';	/* a marker is one line */
	ev = new_event(r, e->ts, e->type == TB_EV_MARK ? "mark" : "text");
	ev->pid = e->pid;
	ev->tid = e->tid;
	snprintf(ev->text, sizeof(ev->text), "%s", e->type == TB_EV_MARK ? buf : lines);
	for (; r->marker_steps < ep->marks.seen; r->marker_steps++)
		queue_step(r, (struct rec_step){ .ts = e->ts, .pid = e->pid,
						 .src = EP_STEPS_MARKER });
}

static void bind_or_null(struct recorder *r, int i, int64_t v, bool known)
{
	if (known)
		rec_bind_int(r, RS_EVENT, i, v);
}

static int write_events(struct recorder *r)
{
	for (int i = 0; i < r->nev && !r->failed; i++) {
		const struct rec_event *e = &r->ev[i];

		rec_bind_int(r, RS_EVENT, 1, e->ts);
		rec_bind_text(r, RS_EVENT, 2, e->type);
		bind_or_null(r, 3, e->pid, e->pid);
		bind_or_null(r, 4, e->tid, e->tid);
		bind_or_null(r, 5, e->ppid, e->ppid);
		bind_or_null(r, 6, e->code, e->has_code);
		if (e->text[0])
			rec_bind_text(r, RS_EVENT, 7, e->text);
		rec_step(r, RS_EVENT);
	}
	r->nev = 0;
	return r->failed ? -1 : 0;
}

/* tid: the thread whose calls, fetch or backward gave the step; 0 for markers. */
static int write_step(struct recorder *r, const char *source, pid_t pid, pid_t tid,
		      uint64_t ts)
{
	rec_bind_text(r, RS_STEP, 1, source);
	if (pid)
		rec_bind_int(r, RS_STEP, 2, pid);
	rec_bind_int(r, RS_STEP, 3, ts);
	if (tid)
		rec_bind_int(r, RS_STEP, 4, tid);
	return rec_step(r, RS_STEP);
}

static int write_queued_steps(struct recorder *r)
{
	for (int i = 0; i < r->nsteps && !r->failed; i++)
		write_step(r, epochs_step_source_name(r->steps[i].src), r->steps[i].pid,
			   r->steps[i].tid, r->steps[i].ts);
	r->nsteps = 0;
	return r->failed ? -1 : 0;
}

/*
 * One process's deltas in a closed epoch. They are interpolated to the
 * boundary between two refreshes (epochs.h): the 1 s flushes cannot give
 * them back, so they are kept as the live tool took them.
 */
static int write_epoch_proc(struct recorder *r, enum ep_source s, int seq,
			    const struct ep_proc *d)
{
	rec_bind_text(r, RS_EPOCH_PROC, 1, epochs_source_name(s));
	rec_bind_int(r, RS_EPOCH_PROC, 2, seq);
	rec_bind_int(r, RS_EPOCH_PROC, 3, d->pid);
	rec_bind_int(r, RS_EPOCH_PROC, 4, d->start);
	if (d->end)
		rec_bind_int(r, RS_EPOCH_PROC, 5, d->end);
	for (int c = 0; c < TB_NCAT; c++) {
		rec_bind_int(r, RS_EPOCH_PROC, 6 + c, d->own[c]);
		rec_bind_int(r, RS_EPOCH_PROC, 6 + TB_NCAT + c, d->main_cp[c]);
		rec_bind_int(r, RS_EPOCH_PROC, 6 + 2 * TB_NCAT + c, d->main_own[c]);
	}
	/* A folded row (pid 0) has no process row to tell its parent and role. */
	rec_bind_int(r, RS_EPOCH_PROC, 6 + 3 * TB_NCAT, d->ppid);
	rec_bind_text(r, RS_EPOCH_PROC, 7 + 3 * TB_NCAT, role_name(d->role));
	rec_bind_int(r, RS_EPOCH_PROC, 8 + 3 * TB_NCAT, d->folded);
	return rec_step(r, RS_EPOCH_PROC);
}

/* Its steps as counted at its close: steps found later do not change them. */
static void bind_epoch_steps(struct recorder *r, const struct ep_steps *st)
{
	rec_bind_int(r, RS_EPOCH, 7, st->count);
	rec_bind_double(r, RS_EPOCH, 8, st->total_ms);
	rec_bind_double(r, RS_EPOCH, 9, st->min_ms);
	rec_bind_double(r, RS_EPOCH, 10, st->max_ms);
	rec_bind_double(r, RS_EPOCH, 11, st->sum_sq);
	rec_bind_int(r, RS_EPOCH, 12, st->syncs);
	rec_bind_text(r, RS_EPOCH, 13, epochs_step_source_name(st->source));
}

/*
 * What its phases were made of, as JSON (SQLite reads it with json_each):
 * {"data": {"cpu": ns, ...}, ...}, the categories that are not 0.
 */
static void bind_epoch_made_of(struct recorder *r, const struct epoch *e)
{
	char buf[PH_NLOOP * TB_NCAT * 36 + 64];
	size_t n = 0;

	n += snprintf(buf + n, sizeof(buf) - n, "{");
	for (int p = 0; p < PH_NLOOP; p++) {
		n += snprintf(buf + n, sizeof(buf) - n, "%s\"%s\":{", p ? "," : "", ph_names[p]);
		for (int c = 0, k = 0; c < TB_NCAT; c++)
			if (e->ph_cp[p][c])
				n += snprintf(buf + n, sizeof(buf) - n, "%s\"%s\":%llu", k++ ? "," : "",
					      tb_cat_names[c], (unsigned long long)e->ph_cp[p][c]);
		n += snprintf(buf + n, sizeof(buf) - n, "}");
	}
	snprintf(buf + n, sizeof(buf) - n, "}");
	rec_bind_text(r, RS_EPOCH, 15 + PH_NLOOP, buf);
}

/*
 * seq: its place in its source's list, which its epoch_procs rows name.
 * off: how far the label was moved to the job's numbers at the end
 * (epochs_align_labels): the row keeps the number it was closed with, as
 * the epochs recorded before, and the reader aligns them all alike.
 */
static int write_epoch(struct recorder *r, enum ep_source s, int seq, const struct epoch *e,
		       long off)
{
	rec_bind_text(r, RS_EPOCH, 1, epochs_source_name(s));
	rec_bind_int(r, RS_EPOCH, 2, e->label - off);
	rec_bind_int(r, RS_EPOCH, 3, e->start);
	rec_bind_int(r, RS_EPOCH, 4, e->end);
	rec_bind_int(r, RS_EPOCH, 5, e->complete);
	rec_bind_int(r, RS_EPOCH, 6, seq);
	bind_epoch_steps(r, &e->steps);
	rec_bind_int(r, RS_EPOCH, 14, e->late_start);
	for (int p = 0; p < PH_NLOOP; p++)
		rec_bind_int(r, RS_EPOCH, 15 + p, (int64_t)e->ph[p]);
	bind_epoch_made_of(r, e);
	rec_step(r, RS_EPOCH);
	for (int i = 0; i < e->n && !r->failed; i++)
		write_epoch_proc(r, s, seq, &e->d[i]);
	record_gpu_epoch(r, s, seq, e);
	return r->failed ? -1 : 0;
}

bool record_epoch_closed(const struct recorder *r, const struct session *ses)
{
	for (int s = 0; s < EP_NSRC; s++)
		if (ses->ep.src[s].closed > r->epochs_written[s])
			return true;
	return false;
}

int record_events(struct recorder *r, const struct session *ses)
{
	write_events(r);
	write_phases(r);
	write_scopes(r);
	write_queued_steps(r);
	for (int s = 0; s < EP_NSRC && !r->failed; s++) {
		const struct ep_stream *st = &ses->ep.src[s];

		for (; r->epochs_written[s] < st->closed && !r->failed; r->epochs_written[s]++) {
			const struct epoch *e = ep_stream_closed(st, r->epochs_written[s]);

			if (e)	/* merged away before a flush: never, a flush follows each close */
				write_epoch(r, s, r->epochs_written[s], e,
					    s == EP_PASSES ? ses->ep.pass_label_off : 0);
		}
	}
	return r->failed ? -1 : 0;
}

/* The thread of process pid whose steps stand for it: the main one if it has any. */
static const struct st_thread *step_thread(const struct steps *st, pid_t pid)
{
	const struct st_thread *best = NULL;

	for (int i = 0; i < st->nth; i++) {
		const struct st_thread *t = &st->th[i];

		if (t->pid != pid || !t->nbounds)
			continue;
		if (t->tid == pid)
			return t;
		if (!best || t->nbounds > best->nbounds)
			best = t;
	}
	return best;
}

/*
 * At the end: the step starts the call period gave, one thread per
 * process, in the order the threads made their first call: the run's
 * steps come from the main thread with the most of them, the first on a
 * tie (steps_bounds), and the reader must find the same one.
 */
int record_call_steps(struct recorder *r, const struct steps *st)
{
	for (int i = 0; st && i < st->nth && !r->failed; i++) {
		const struct st_thread *t = &st->th[i];

		if (step_thread(st, t->pid) != t)
			continue;
		for (int k = 0; k < t->nbounds && !r->failed; k++)
			write_step(r, "calls", t->pid, t->tid, t->bounds[k]);
	}
	return r->failed ? -1 : 0;
}
