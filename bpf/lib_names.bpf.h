/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * Whether a file mapped executable is one of the libraries whose mapping
 * wakes user space (user/model/libraries.c, mmap_wakes), from the first
 * bytes of its name. Looser than the table's prefixes, never narrower:
 * "libcuda" takes libcudart and libcuda, "libtorch_" libtorch_cpu and
 * libtorch_python; a name matched here for nothing costs one read of the
 * maps, and code found in a library of another name waits for user
 * space's own look. Plain C with no helper, so that
 * tests/unit/test_libraries.c runs it against the table.
 */
#ifndef LIB_NAMES_BPF_H
#define LIB_NAMES_BPF_H

static __always_inline int probed_name(const char *n)
{
	if (n[0] != 'l' || n[1] != 'i' || n[2] != 'b')
		return 0;
	if (n[3] == 't' && n[4] == 'o' && n[5] == 'r' && n[6] == 'c' && n[7] == 'h' &&
	    n[8] == '_')
		return 1;	/* libtorch_cpu, libtorch_python */
	if (n[3] == 'c' && n[4] == 'u' && n[5] == 'd' && n[6] == 'a')
		return 1;	/* libcudart, libcuda */
	return n[3] == 'n' && n[4] == 'c' && n[5] == 'c' && n[6] == 'l';
}

#endif
