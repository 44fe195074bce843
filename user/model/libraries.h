/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The user-space libraries trainbpf probes, one row per family: how each
 * is named on disk, whether BPF wakes user space when a traced process
 * maps its code (bpf/lib_names.bpf.h: tests/unit/test_libraries.c holds
 * its list to this one), and whether mapping it makes a process a training
 * job for `serve` (acquire/discover.c). The probes themselves, per family:
 * probe_table.c (the functions), acquire/lib_probes.c (attaching them).
 */
#ifndef TB_LIBRARIES_H
#define TB_LIBRARIES_H

#include <stdbool.h>
#include "probe_table.h"

struct tb_library {
	/* Its file's name starts with one (also hashed: libcudart-1a2b.so.13). */
	const char *prefix[2];
	bool mmap_wakes;	/* its code mapped: BPF says so at once (TB_EV_LIBRARY) */
	bool marks_job;		/* serve: a process that maps it trains */
};

extern const struct tb_library tb_libraries[LIB_NFAMILIES];

/* Whether path's file is named as family f's libraries are. */
bool library_named(const char *path, enum probe_family f);

#endif
