// SPDX-License-Identifier: BSD-3-Clause
#include <string.h>
#include "libraries.h"

const struct tb_library tb_libraries[GF_NFAMILIES] = {
	[GF_CUDART] = { { "libcudart.", "libcudart-" }, true, true },
	[GF_CUDA] = { { "libcuda.", "libcuda-" }, true, false },
	[GF_NCCL] = { { "libnccl.", "libnccl-" }, true, true },
	/* Two libraries, no hashes; a job maps both, libtorch_cpu first. */
	[GF_TORCH] = { { "libtorch_cpu.", "libtorch_python." }, true, true },
	/*
	 * python3.11, libpython3.12.so.1.0: mapped at exec (the executable)
	 * or with it (its libpython), found by the first look at the maps;
	 * every Python process has it, so it says nothing of a job.
	 */
	[GF_PYTHON] = { { "python3", "libpython3" }, false, false },
};

bool library_named(const char *path, enum gpu_family f)
{
	const char *b = strrchr(path, '/');

	b = b ? b + 1 : path;
	for (int i = 0; i < 2; i++)
		if (!strncmp(b, tb_libraries[f].prefix[i], strlen(tb_libraries[f].prefix[i])))
			return true;
	return false;
}
