// SPDX-License-Identifier: BSD-3-Clause
/* The Chrome trace's events, as every track writes them (trace_events.h). */
#include <sqlite3.h>
#include <stdio.h>
#include "report.h"
#include "trace_events.h"

void trace_event(struct jw *j, const char *ph, const char *scope, const char *name,
		 const char *cat, int pid, int tid)
{
	jw_object(j);
	jw_string_field(j, "ph", ph);
	if (scope)
		jw_string_field(j, "s", scope);
	jw_string_field(j, "name", name);
	if (cat)
		jw_string_field(j, "cat", cat);
	jw_int_field(j, "pid", pid);
	jw_int_field(j, "tid", tid);
}

void trace_meta_name(struct jw *j, const char *what, int pid, int tid, const char *name)
{
	trace_event(j, "M", NULL, what, NULL, pid, tid);
	jw_int_field(j, "ts", 0);
	jw_name(j, "args");
	jw_object(j);
	jw_string_field(j, "name", name);
	jw_end_object(j);
	jw_end_object(j);
}

const char *trace_thread_comm(const struct recording *r, pid_t pid, pid_t tid)
{
	const struct proc_rec *p = job_proc_const(&r->ses.job, pid);
	const char *comm = NULL;

	for (int j = 0; p && j < p->nthreads; j++)
		if (p->threads[j].tid == tid)
			comm = p->threads[j].comm;
	return comm;
}

static void table_count(sqlite3_stmt *st, void *arg)
{
	*(uint64_t *)arg = (uint64_t)sqlite3_column_int64(st, 0);
}

/* Whether the recording has the table (name: a literal of ours) into *has: 0, or -1. */
int trace_has_table(struct recording *r, const char *name, bool *has, char *err,
		    size_t errlen)
{
	char sql[128];
	uint64_t n = 0;

	snprintf(sql, sizeof(sql), "SELECT count(*) FROM sqlite_master WHERE type = 'table' "
		 "AND name = '%s'", name);
	if (rec_query(r, sql, table_count, &n, err, errlen))
		return -1;
	*has = n > 0;
	return 0;
}
