// SPDX-License-Identifier: BSD-3-Clause
#include <stdio.h>
#include <string.h>
#include "pylayouts.h"
#include "pystack.h"

/*
 * offsetof in each version's headers (Include/cpython/pystate.h,
 * Include/internal/pycore_{runtime,interp,frame}.h, Include/cpython/
 * code.h, Include/cpython/unicodeobject.h): pyenv's 3.8.18, 3.9.18,
 * 3.10.13, 3.11.7 (Debian 12's 3.11.2 the same) and 3.12.1, release
 * builds. A patch release does not move them: the layout of these
 * structures is part of what a minor version keeps.
 */
static const struct py_offsets table[] = {
	{ .minor = 8, .runtime_interp_head = 32, .interp_threads_head = 8, .interp_next = 0,
	  .tstate_next = 8, .tstate_thread_id = 176, .tstate_frame = 24, .cframe_frame = -1,
	  .frame_back = 24, .frame_code = 32, .frame_owner = -1, .owner_cstack = -1,
	  .code_name = 112, .code_qualname = -1, .code_filename = 104, .code_firstlineno = 40,
	  .unicode_state = 32, .unicode_length = 16, .ascii_size = 48, .compact_size = 72,
	  .ob_type = 8 },
	{ .minor = 9, .runtime_interp_head = 32, .interp_threads_head = 8, .interp_next = 0,
	  .tstate_next = 8, .tstate_thread_id = 176, .tstate_frame = 24, .cframe_frame = -1,
	  .frame_back = 24, .frame_code = 32, .frame_owner = -1, .owner_cstack = -1,
	  .code_name = 112, .code_qualname = -1, .code_filename = 104, .code_firstlineno = 40,
	  .unicode_state = 32, .unicode_length = 16, .ascii_size = 48, .compact_size = 72,
	  .ob_type = 8 },
	{ .minor = 10, .runtime_interp_head = 32, .interp_threads_head = 8, .interp_next = 0,
	  .tstate_next = 8, .tstate_thread_id = 176, .tstate_frame = 24, .cframe_frame = -1,
	  .frame_back = 24, .frame_code = 32, .frame_owner = -1, .owner_cstack = -1,
	  .code_name = 112, .code_qualname = -1, .code_filename = 104, .code_firstlineno = 40,
	  .unicode_state = 32, .unicode_length = 16, .ascii_size = 48, .compact_size = 72,
	  .ob_type = 8 },
	/* 3.11: frames move to the interpreter's own stack, reached through the cframe. */
	{ .minor = 11, .runtime_interp_head = 40, .interp_threads_head = 16, .interp_next = 0,
	  .tstate_next = 8, .tstate_thread_id = 152, .tstate_frame = 56, .cframe_frame = 8,
	  .frame_back = 48, .frame_code = 32, .frame_owner = 69, .owner_cstack = -1,
	  .code_name = 120, .code_qualname = 128, .code_filename = 112, .code_firstlineno = 72,
	  .unicode_state = 32, .unicode_length = 16, .ascii_size = 48, .compact_size = 72,
	  .ob_type = 8 },
	/* 3.12: a C call into Python leaves a shim frame (FRAME_OWNED_BY_CSTACK). */
	{ .minor = 12, .runtime_interp_head = 40, .interp_threads_head = 72, .interp_next = 0,
	  .tstate_next = 8, .tstate_thread_id = 136, .tstate_frame = 56, .cframe_frame = 0,
	  .frame_back = 8, .frame_code = 0, .frame_owner = 70, .owner_cstack = 3,
	  .code_name = 120, .code_qualname = 128, .code_filename = 112, .code_firstlineno = 68,
	  .unicode_state = 32, .unicode_length = 16, .ascii_size = 40, .compact_size = 56,
	  .ob_type = 8 },
};

const struct py_offsets *py_offsets_table(int minor)
{
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (table[i].minor == minor)
			return &table[i];
	return NULL;
}

/*
 * _Py_DebugOffsets as 3.13 lays it out (Include/internal/pycore_runtime.h),
 * up to the unicode object's part; every field a uint64_t.
 */
struct debug_offsets_313 {
	char cookie[8];		/* "xdebugpy" */
	uint64_t version;	/* PY_VERSION_HEX */
	uint64_t free_threaded;
	struct { uint64_t size, finalizing, interpreters_head; } runtime_state;
	struct {
		uint64_t size, id, next, threads_head, gc, imports_modules, sysdict, builtins,
			ceval_gil, gil_runtime_state, gil_runtime_state_enabled,
			gil_runtime_state_locked, gil_runtime_state_holder;
	} interpreter_state;
	struct {
		uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id,
			datastack_chunk, status;
	} thread_state;
	struct { uint64_t size, previous, executable, instr_ptr, localsplus, owner; } interpreter_frame;
	struct {
		uint64_t size, filename, name, qualname, linetable, firstlineno, argcount,
			localsplusnames, localspluskinds, co_code_adaptive;
	} code_object;
	struct { uint64_t size, ob_type; } pyobject;
	struct { uint64_t size, tp_name, tp_repr, tp_flags; } type_object;
	struct { uint64_t size, ob_item, ob_size; } tuple_object;
	struct { uint64_t size, ob_item, ob_size; } list_object;
	struct { uint64_t size, ma_keys, ma_values; } dict_object;
	struct { uint64_t size, ob_fval; } float_object;
	struct { uint64_t size, lv_tag, ob_digit; } long_object;
	struct { uint64_t size, ob_size, ob_sval; } bytes_object;
	struct { uint64_t size, state, length, asciiobject_size; } unicode_object;
};

size_t py_offsets_debug_len(void)
{
	return sizeof(struct debug_offsets_313);
}

/* An offset that fits an int, else -1 (py_offsets_sane refuses it). */
static int off(uint64_t v)
{
	return v < 65536 ? (int)v : -1;
}

int py_offsets_debug(const void *buf, size_t len, struct py_offsets *o, char *why,
		     size_t whylen)
{
	struct debug_offsets_313 d;

	if (len < sizeof(d)) {
		snprintf(why, whylen, "its _PyRuntime could not be read");
		return -1;
	}
	memcpy(&d, buf, sizeof(d));
	if (memcmp(d.cookie, "xdebugpy", 8)) {
		snprintf(why, whylen, "its _PyRuntime does not start with _Py_DebugOffsets");
		return -1;
	}
	if ((d.version >> 16) != 0x030d) {
		snprintf(why, whylen, "Python %d.%d: _Py_DebugOffsets of a layout not known here",
			 (int)(d.version >> 24 & 0xff), (int)(d.version >> 16 & 0xff));
		return -1;
	}
	if (d.free_threaded) {
		snprintf(why, whylen, "a free-threaded build (3.13t): not read");
		return -1;
	}
	*o = (struct py_offsets){
		.minor = 13,
		.runtime_interp_head = off(d.runtime_state.interpreters_head),
		.interp_threads_head = off(d.interpreter_state.threads_head),
		.interp_next = off(d.interpreter_state.next),
		.tstate_next = off(d.thread_state.next),
		.tstate_thread_id = off(d.thread_state.thread_id),
		.tstate_frame = off(d.thread_state.current_frame),
		.cframe_frame = -1,
		.frame_back = off(d.interpreter_frame.previous),
		.frame_code = off(d.interpreter_frame.executable),
		.frame_owner = off(d.interpreter_frame.owner),
		.owner_cstack = 3,	/* FRAME_OWNED_BY_CSTACK, pycore_frame.h */
		.code_name = off(d.code_object.name),
		.code_qualname = off(d.code_object.qualname),
		.code_filename = off(d.code_object.filename),
		.code_firstlineno = off(d.code_object.firstlineno),
		.unicode_state = off(d.unicode_object.state),
		.unicode_length = off(d.unicode_object.length),
		.ascii_size = off(d.unicode_object.asciiobject_size),
		/* PyCompactUnicodeObject: utf8_length and utf8 after the ASCII head. */
		.compact_size = off(d.unicode_object.asciiobject_size) + 16,
		.ob_type = off(d.pyobject.ob_type),
	};
	if (!py_offsets_sane(o)) {
		snprintf(why, whylen, "its _Py_DebugOffsets are out of range");
		return -1;
	}
	return 0;
}

bool py_offsets_sane(const struct py_offsets *o)
{
	/* BPF reads a frame's head (TB_PY_FRAME_HEAD = 72 bytes) and takes fields in it. */
	const int head = TB_PY_FRAME_HEAD;

	return o->runtime_interp_head >= 0 && o->interp_threads_head >= 0 &&
	       o->interp_next >= 0 && o->tstate_next >= 0 && o->tstate_thread_id >= 0 &&
	       o->tstate_frame >= 0 && o->frame_back >= 0 && o->frame_back + 8 <= head &&
	       o->frame_code >= 0 && o->frame_code + 8 <= head && o->frame_owner < head &&
	       o->code_name >= 0 && o->code_filename >= 0 && o->code_firstlineno >= 0 &&
	       o->unicode_state >= 0 && o->unicode_length >= 0 && o->ascii_size > 0 &&
	       o->compact_size > o->ascii_size && o->ob_type >= 0 &&
	       o->tstate_frame < 65536 && o->cframe_frame < 32768;
}
