/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Where CPython keeps what the stack reader follows, per minor version:
 * from _PyRuntime to each interpreter and its threads, from a thread to
 * its frames, from a frame to its code, and a code object's name, file and
 * first line. 3.8-3.12 from a table (offsetof in each version's own
 * headers, release builds; tests/unit/test_pylayouts.c checks it against
 * the headers where they are installed); 3.13 on from the interpreter
 * itself (_Py_DebugOffsets, at the start of _PyRuntime, made to be read
 * from outside).
 */
#ifndef TB_PYLAYOUTS_H
#define TB_PYLAYOUTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct py_offsets {
	int minor;			/* 3.minor */
	int runtime_interp_head;	/* _PyRuntimeState.interpreters.head */
	int interp_threads_head;	/* PyInterpreterState: tstate_head, threads.head (3.11+) */
	int interp_next;
	int tstate_next;
	int tstate_thread_id;		/* PyThreadState.thread_id: pthread_self() */
	int tstate_frame;		/* frame (<3.11), cframe (3.11, 3.12), current_frame */
	int cframe_frame;		/* _PyCFrame.current_frame; -1: no cframe */
	int frame_back;			/* f_back, or _PyInterpreterFrame.previous */
	int frame_code;			/* f_code, or f_executable (3.13) */
	int frame_owner;		/* _PyInterpreterFrame.owner; -1: none */
	int owner_cstack;		/* FRAME_OWNED_BY_CSTACK; -1: none */
	int code_name;
	int code_qualname;		/* -1 before 3.11 */
	int code_filename;
	int code_firstlineno;
	int unicode_state;		/* PyASCIIObject.state (the kind, compact and ascii bits) */
	int unicode_length;
	int ascii_size;			/* sizeof(PyASCIIObject): an ASCII string's data follows */
	int compact_size;		/* sizeof(PyCompactUnicodeObject): another's */
	int ob_type;
};

/* PyTypeObject.tp_name, after the variable object's head (every version read). */
#define PY_TP_NAME 24
/* The first minor version whose interpreter says its own offsets. */
#define PY_DEBUG_OFFSETS_MINOR 13

/* The table's row for 3.minor (8-12), NULL if none. */
const struct py_offsets *py_offsets_table(int minor);

/*
 * The offsets _Py_DebugOffsets gives (buf: the first len bytes of
 * _PyRuntime). 0; -1 if buf does not start with its cookie, or it is of
 * a layout not known here (3.14 on), or of a free-threaded build, with
 * why.
 */
int py_offsets_debug(const void *buf, size_t len, struct py_offsets *out, char *why,
		     size_t whylen);
/* Bytes of _PyRuntime py_offsets_debug reads. */
size_t py_offsets_debug_len(void);

/* The offsets every use stays within: a frame's head, BPF's read of it. */
bool py_offsets_sane(const struct py_offsets *o);

#endif
