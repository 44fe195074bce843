// SPDX-License-Identifier: BSD-3-Clause
/*
 * `trainbpf dump`: a snapshot (model/snapshot.h) as text, a block per
 * process and a line per thread, or as JSON (docs/json.md, "dump").
 */
#include <stdio.h>
#include <string.h>
#include "json_writer.h"
#include "report.h"
#include "sections.h"
#include "snapshot.h"

static void text_proc(FILE *f, const struct snap_proc *p)
{
	char name[ESC_LEN(TB_COMM_LEN)];

	fprintf(f, "\nPID %d %s (%s", p->pid, report_esc(name, sizeof(name), p->comm),
		snap_role_name(p->role));
	if (p->role != SNAP_ROOT)
		fprintf(f, ", of %d", p->ppid);
	if (p->rank >= 0)
		fprintf(f, ", rank %d", p->rank);
	fprintf(f, "), %d thread%s%s\n", p->nthreads, p->nthreads == 1 ? "" : "s",
		p->threads_over ? " (more not read)" : "");
	fprintf(f, "  %-8s %-16s %-26s %10s %10s  %s\n", "TID", "THREAD", "NOW", "FOR", "CPU",
		"WHERE");
}

static void text_thread(FILE *f, const struct snap_thread *t)
{
	char name[ESC_LEN(TB_COMM_LEN)], target[ESC_LEN(SNAP_TARGET_LEN)], waited[32];

	if (t->state == 'R' || !t->waited_ns)
		snprintf(waited, sizeof(waited), "-");
	else
		snprintf(waited, sizeof(waited), "%.1f s", t->waited_ns / 1e9);
	fprintf(f, "  %-8d %-16s %-26s %10s %8.1f s  %s", t->tid,
		report_esc(name, sizeof(name), t->comm), snap_wait_words(t), waited,
		t->cpu_ns / 1e9, t->wchan[0] ? t->wchan : "-");
	if (t->target[0])
		fprintf(f, " (fd %ld: %s)", t->arg0, report_esc(target, sizeof(target), t->target));
	fputc('\n', f);
}

void dump_text(FILE *f, const struct snapshot *s)
{
	int threads = 0;

	for (int i = 0; i < s->nprocs; i++)
		threads += s->procs[i].nthreads;
	fprintf(f, "trainbpf dump: %d process%s, %d threads, read in %.0f ms%s\n", s->nprocs,
		s->nprocs == 1 ? "" : "es", threads, s->read_ns / 1e6,
		s->procs_over ? " (more processes not read)" : "");
	fprintf(f, "NOW: what each thread does now; FOR: how long it has been asleep so; "
		"WHERE: the kernel function it sleeps in. No phase: a snapshot has no "
		"history (trainbpf -p PID has it)\n");
	for (int i = 0; i < s->nprocs; i++) {
		const struct snap_proc *p = &s->procs[i];

		text_proc(f, p);
		for (int k = 0; k < p->nthreads; k++)
			text_thread(f, &p->threads[k]);
	}
}

static void json_thread(struct jw *w, const struct snap_thread *t)
{
	char state[2] = { t->state ? t->state : '?', 0 };

	jw_object(w);
	jw_int_field(w, "tid", t->tid);
	jw_string_field(w, "comm", t->comm);
	jw_string_field(w, "state", state);
	jw_string_field(w, "now", snap_wait_words(t));
	if (t->syscall >= 0)
		jw_int_field(w, "syscall", t->syscall);
	else
		jw_null_field(w, "syscall");
	if (t->target[0]) {
		jw_int_field(w, "fd", t->arg0);
		jw_string_field(w, "fd_target", t->target);
	} else {
		jw_null_field(w, "fd");
		jw_null_field(w, "fd_target");
	}
	jw_string_field(w, "wchan", t->wchan);
	if (t->state == 'R' || !t->waited_ns)
		jw_null_field(w, "asleep_s");
	else
		jw_float_field(w, "asleep_s", t->waited_ns / 1e9, 3);
	jw_float_field(w, "cpu_s", t->cpu_ns / 1e9, 3);
	jw_end_object(w);
}

void dump_json(FILE *f, const struct snapshot *s)
{
	struct jw w;

	jw_init(&w, f);
	jw_object(&w);
	jw_string_field(&w, "tool", "trainbpf dump");
	jw_float_field(&w, "taken_unix_s", s->taken_unix_s, 6);
	jw_float_field(&w, "read_s", s->read_ns / 1e9, 6);
	jw_int_field(&w, "processes_not_read", s->procs_over);
	jw_name(&w, "processes");
	jw_array_lines(&w);
	for (int i = 0; i < s->nprocs; i++) {
		const struct snap_proc *p = &s->procs[i];

		jw_object(&w);
		jw_int_field(&w, "pid", p->pid);
		jw_int_field(&w, "ppid", p->ppid);
		jw_string_field(&w, "comm", p->comm);
		jw_string_field(&w, "started", snap_role_name(p->role));
		if (p->rank >= 0)
			jw_int_field(&w, "rank", p->rank);
		else
			jw_null_field(&w, "rank");
		jw_bool_field(&w, "threads_not_all_read", p->threads_over);
		jw_name(&w, "threads");
		jw_array(&w);
		for (int k = 0; k < p->nthreads; k++)
			json_thread(&w, &p->threads[k]);
		jw_end_array(&w);
		jw_end_object(&w);
	}
	jw_end_array(&w);
	jw_end_object(&w);
	fputc('\n', f);
}
