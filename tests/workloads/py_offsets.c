/*
 * The offsets the stack reader's table holds (user/acquire/pylayouts.c),
 * printed from a CPython's own headers: test_functions.py builds this
 * against each version's include directory and compares.
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#if PY_VERSION_HEX >= 0x030b0000
#include "internal/pycore_frame.h"
#endif
#if PY_VERSION_HEX >= 0x03090000
#include "internal/pycore_runtime.h"
#endif
#if PY_VERSION_HEX >= 0x03090000
#include "internal/pycore_interp.h"
#else
#include "internal/pycore_pystate.h"
#endif
#include "frameobject.h"
int main(void)
{
	printf("{ .minor = %d,\n", PY_MINOR_VERSION);
	printf("  .runtime_interp_head = %zu,\n", offsetof(_PyRuntimeState, interpreters.head));
#if PY_VERSION_HEX >= 0x030b0000
	printf("  .interp_threads_head = %zu,\n", offsetof(PyInterpreterState, threads.head));
#else
	printf("  .interp_threads_head = %zu,\n", offsetof(PyInterpreterState, tstate_head));
#endif
	printf("  .interp_next = %zu,\n", offsetof(PyInterpreterState, next));
	printf("  .tstate_next = %zu,\n", offsetof(PyThreadState, next));
	printf("  .tstate_thread_id = %zu,\n", offsetof(PyThreadState, thread_id));
#if PY_VERSION_HEX >= 0x030d0000
	printf("  .tstate_frame = %zu, .cframe_frame = -1,\n", offsetof(PyThreadState, current_frame));
#elif PY_VERSION_HEX >= 0x030b0000
	printf("  .tstate_frame = %zu, .cframe_frame = %zu,\n", offsetof(PyThreadState, cframe), offsetof(_PyCFrame, current_frame));
#else
	printf("  .tstate_frame = %zu, .cframe_frame = -1,\n", offsetof(PyThreadState, frame));
#endif
#if PY_VERSION_HEX >= 0x030d0000
	printf("  .frame_back = %zu, .frame_code = %zu, .frame_owner = %zu,\n", offsetof(_PyInterpreterFrame, previous), offsetof(_PyInterpreterFrame, f_executable), offsetof(_PyInterpreterFrame, owner));
#elif PY_VERSION_HEX >= 0x030b0000
	printf("  .frame_back = %zu, .frame_code = %zu, .frame_owner = %zu,\n", offsetof(_PyInterpreterFrame, previous), offsetof(_PyInterpreterFrame, f_code), offsetof(_PyInterpreterFrame, owner));
#else
	printf("  .frame_back = %zu, .frame_code = %zu, .frame_owner = -1,\n", offsetof(PyFrameObject, f_back), offsetof(PyFrameObject, f_code));
#endif
	printf("  .code_name = %zu,\n", offsetof(PyCodeObject, co_name));
#if PY_VERSION_HEX >= 0x030b0000
	printf("  .code_qualname = %zu,\n", offsetof(PyCodeObject, co_qualname));
#else
	printf("  .code_qualname = -1,\n");
#endif
	printf("  .code_filename = %zu,\n", offsetof(PyCodeObject, co_filename));
	printf("  .code_firstlineno = %zu,\n", offsetof(PyCodeObject, co_firstlineno));
	printf("  .unicode_state = %zu, .unicode_length = %zu,\n", offsetof(PyASCIIObject, state), offsetof(PyASCIIObject, length));
	printf("  .ascii_size = %zu, .compact_size = %zu,\n", sizeof(PyASCIIObject), sizeof(PyCompactUnicodeObject));
	printf("  .ob_type = %zu,\n", offsetof(PyObject, ob_type));
#if PY_VERSION_HEX >= 0x030c0000
	printf("  .owner_cstack = %d,\n", FRAME_OWNED_BY_CSTACK);
#else
	printf("  .owner_cstack = -1,\n");
#endif
	printf("},\n");
	return 0;
}
