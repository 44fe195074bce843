// SPDX-License-Identifier: BSD-3-Clause
#include <string.h>
#include "libraries.h"

const struct tb_library tb_libraries[LIB_NFAMILIES] = {
	[LIB_CUDART] = { { "libcudart.", "libcudart-" }, true, true },
	[LIB_CUDA] = { { "libcuda.", "libcuda-" }, true, false },
	[LIB_NCCL] = { { "libnccl.", "libnccl-" }, true, true },
	/* Two libraries, no hashes; a job maps both, libtorch_cpu first. */
	[LIB_TORCH] = { { "libtorch_cpu.", "libtorch_python." }, true, true },
	/*
	 * python3.11, libpython3.12.so.1.0: mapped at exec (the executable)
	 * or with it (its libpython), found by the first look at the maps;
	 * every Python process has it, so it says nothing of a job.
	 */
	[LIB_PYTHON] = { { "python3", "libpython3" }, false, false },
};

bool library_named(const char *path, enum probe_family f)
{
	const char *b = strrchr(path, '/');

	b = b ? b + 1 : path;
	for (int i = 0; i < 2; i++)
		if (!strncmp(b, tb_libraries[f].prefix[i], strlen(tb_libraries[f].prefix[i])))
			return true;
	return false;
}
