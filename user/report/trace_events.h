/* SPDX-License-Identifier: BSD-3-Clause */
/* The Chrome trace's events, shared by its tracks (trace_export.c, trace_py.c). */
#ifndef TB_TRACE_EVENTS_H
#define TB_TRACE_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include "json_writer.h"
#include "recording_read.h"

/* Opens an event with the fields every one starts with (ph: "X", "B", "M"...). */
void trace_event(struct jw *j, const char *ph, const char *scope, const char *name,
		 const char *cat, int pid, int tid);
/* A metadata event naming (what: "thread_name"...) a track. */
void trace_meta_name(struct jw *j, const char *what, int pid, int tid, const char *name);
/* The thread's name (its last entry's), or NULL. */
const char *trace_thread_comm(const struct recording *r, pid_t pid, pid_t tid);
/* Whether the recording has the table (name: a literal of ours) into *has: 0, or -1. */
int trace_has_table(struct recording *r, const char *name, bool *has, char *err,
		    size_t errlen);

#endif
