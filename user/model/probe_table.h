/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CUDA runtime, CUDA driver, NCCL and PyTorch functions trainbpf
 * probes, and what each one is. The index in the table is the api id BPF
 * counts by. PyTorch's are named by pattern (elf_syms.h): their mangling
 * differs between builds.
 */
#ifndef TB_PROBE_TABLE_H
#define TB_PROBE_TABLE_H

#include <stdbool.h>
#include <stdint.h>
#include "probes.h"

enum probe_family {
	LIB_CUDART = 0,	/* the CUDA runtime, libcudart.so.* or linked statically */
	LIB_CUDA,	/* the CUDA driver API, libcuda.so.* */
	LIB_NCCL,
	LIB_TORCH,	/* libtorch_cpu: training phases (bpf/torch.bpf.h), not calls */
	/*
	 * The Python interpreter (python3.x, libpython3.x.so): its blocking lock
	 * wait, for the phases only. Not listed with the libraries, and no sign
	 * of a torch job: every Python process has it.
	 */
	LIB_PYTHON,
	LIB_NFAMILIES,
};

struct probe_fn {
	const char *name;
	enum probe_family family;
	enum tb_api_kind kind;
	unsigned char cnt, dt;	/* 1-based argument of count, datatype; 0 none */
	unsigned char il;	/* comm init: enum tb_init_layout; launch: 1 = driver */
	bool core;		/* every build has it: warn when it is missing */
	unsigned char cm;	/* 1-based argument of an NCCL data call's comm (7: stack); 0 none */
};

extern const struct probe_fn probe_fns[];
extern const int probe_nfns;
extern const char *const probe_family_names[LIB_NFAMILIES];
extern const char *const probe_kind_names[TB_AK_NKINDS];

/* Index of name in probe_fns, or -1. */
int probe_fn_find(const char *name);
uint64_t probe_fn_cookie(int api);
/* The phase probes (PyTorch's, and Python's lock wait): counted nowhere. */
bool probe_kind_is_torch(enum tb_api_kind k);
/* Kinds counted as "syncs" and as "NCCL ops" in the reports. */
bool probe_kind_is_sync(enum tb_api_kind k);
bool probe_kind_is_op(enum tb_api_kind k);

#endif
