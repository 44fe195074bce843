// SPDX-License-Identifier: BSD-3-Clause
/*
 * The one table of probed libraries (user/model/libraries.c) against what
 * its users decide: BPF's name check at mmap (bpf/lib_names.bpf.h, run
 * here as the plain C it is), the probes' own matching, serve's discovery.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include "libraries.h"

#include "../../bpf/lib_names.bpf.h"

/* The dentry name as the BPF program reads it: its first 15 bytes. */
static int bpf_sees(const char *file)
{
	char name[16] = { 0 };

	strncpy(name, file, sizeof(name) - 1);
	return probed_name(name);
}

/* Files each family is really shipped as (distributions, wheels with hashes). */
static const char *const shipped[LIB_NFAMILIES][3] = {
	[LIB_CUDART] = { "libcudart.so.12", "libcudart-d0da41ae.so.11.0", "libcudart.so.13.0.48" },
	[LIB_CUDA] = { "libcuda.so.1", "libcuda.so.575.57.08", "libcuda-3fa1b2c4.so.1" },
	[LIB_NCCL] = { "libnccl.so.2", "libnccl.so.2.21.5", "libnccl-0f2b1a3c.so.2" },
	[LIB_TORCH] = { "libtorch_cpu.so", "libtorch_python.so", "libtorch_cpu.so" },
	[LIB_PYTHON] = { "python3.11", "libpython3.12.so.1.0", "python3" },
};

/* Every file of a family named in the table, and only of that family. */
START_TEST(table_names_what_is_shipped)
{
	for (int f = 0; f < LIB_NFAMILIES; f++)
		for (int i = 0; i < 3; i++) {
			char path[256];

			snprintf(path, sizeof(path), "/opt/lib/%s", shipped[f][i]);
			for (int g = 0; g < LIB_NFAMILIES; g++)
				ck_assert_msg(library_named(path, g) == (g == f), "%s as %s: %d",
					      path, probe_family_names[g], library_named(path, g));
		}
}
END_TEST

/* BPF wakes user space for every file of a family that asks it to, and no other. */
START_TEST(bpf_list_held_to_the_table)
{
	for (int f = 0; f < LIB_NFAMILIES; f++)
		for (int i = 0; i < 3; i++)
			ck_assert_msg(bpf_sees(shipped[f][i]) == tb_libraries[f].mmap_wakes,
				      "%s (%s): BPF %d, table %d", shipped[f][i],
				      probe_family_names[f], bpf_sees(shipped[f][i]),
				      tb_libraries[f].mmap_wakes);
}
END_TEST

/* Libraries that every CUDA job maps and nothing probes: no wakeup for them. */
START_TEST(bpf_skips_the_others)
{
	static const char *const others[] = {
		"libc.so.6", "libcublas.so.12", "libcudnn.so.9", "libcufft.so.11",
		"libstdc++.so.6", "libtorch.so", "libnvidia-ml.so.1", "lib", "",
		"libpython3.11.so.1.0", "python3.11",
	};

	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		ck_assert_msg(!bpf_sees(others[i]), "%s woke user space", others[i]);
		for (int f = 0; f < LIB_NFAMILIES; f++)
			ck_assert_msg(!tb_libraries[f].mmap_wakes ||
				      !library_named(others[i], f), "%s named %s", others[i],
				      probe_family_names[f]);
	}
}
END_TEST

/* serve: the runtime, NCCL and libtorch mark a job; the driver and Python do not. */
START_TEST(what_marks_a_job)
{
	ck_assert(tb_libraries[LIB_CUDART].marks_job);
	ck_assert(tb_libraries[LIB_NCCL].marks_job);
	ck_assert(tb_libraries[LIB_TORCH].marks_job);
	ck_assert(!tb_libraries[LIB_CUDA].marks_job);	/* nvidia-smi, a monitoring agent */
	ck_assert(!tb_libraries[LIB_PYTHON].marks_job);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("libraries");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, table_names_what_is_shipped);
	tcase_add_test(tc, bpf_list_held_to_the_table);
	tcase_add_test(tc, bpf_skips_the_others);
	tcase_add_test(tc, what_marks_a_job);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
