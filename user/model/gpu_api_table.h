/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CUDA runtime, CUDA driver, NCCL and PyTorch functions trainbpf
 * probes, and what each one is. The index in the table is the api id BPF
 * counts by. PyTorch's are named by pattern (elf_syms.h): their mangling
 * differs between builds.
 */
#ifndef TB_GPU_API_TABLE_H
#define TB_GPU_API_TABLE_H

#include <stdbool.h>
#include <stdint.h>
#include "gpu_api.h"

enum gpu_family {
	GF_CUDART = 0,	/* the CUDA runtime, libcudart.so.* or linked statically */
	GF_CUDA,	/* the CUDA driver API, libcuda.so.* */
	GF_NCCL,
	GF_TORCH,	/* libtorch_cpu: training phases (bpf/torch.bpf.h), not calls */
	/*
	 * The Python interpreter (python3.x, libpython3.x.so): its blocking lock
	 * wait, for the phases only. Not listed with the libraries, and no sign
	 * of a torch job: every Python process has it.
	 */
	GF_PYTHON,
	GF_NFAMILIES,
};

struct gpu_api {
	const char *name;
	enum gpu_family family;
	enum tb_api_kind kind;
	unsigned char cnt, dt;	/* 1-based argument of count, datatype; 0 none */
	unsigned char il;	/* comm init: enum tb_init_layout; launch: 1 = driver */
	bool core;		/* every build has it: warn when it is missing */
	unsigned char cm;	/* 1-based argument of an NCCL data call's comm (7: stack); 0 none */
};

extern const struct gpu_api gpu_apis[];
extern const int gpu_napis;
extern const char *const gpu_family_names[GF_NFAMILIES];
extern const char *const gpu_kind_names[TB_AK_NKINDS];

/* Index of name in gpu_apis, or -1. */
int gpu_api_find(const char *name);
uint64_t gpu_api_cookie(int api);
/* The phase probes (PyTorch's, and Python's lock wait): counted nowhere. */
bool gpu_kind_is_torch(enum tb_api_kind k);
/* Kinds counted as "syncs" and as "NCCL ops" in the reports. */
bool gpu_kind_is_sync(enum tb_api_kind k);
bool gpu_kind_is_op(enum tb_api_kind k);

#endif
