// SPDX-License-Identifier: BSD-3-Clause
/*
 * The CUDA/NCCL discovery pieces that need no BPF: the probe table and its
 * cookies, finding functions and strings in an ELF file, /proc parsing.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include "elf_syms.h"
#include "gpu.h"
#include "lib_probes.h"
#include "procfs.h"
#include "procmaps.h"

/* Functions named like NCCL's, so that the test binary defines them. */
__attribute__((noinline, used)) int ncclAllReduce(const void *s, void *r, unsigned long n,
						  int dt, int op, void *comm, void *stream)
{
	return (int)n + dt + op + (s == r) + (comm == stream);
}

__attribute__((noinline, used)) int cudaStreamSynchronize(void *stream)
{
	return stream != NULL;
}

const char nccl_banner[] = "NCCL version 9.8.7+cuda1.0";

START_TEST(cookie_round_trip)
{
	for (int i = 0; i < probe_nfns; i++) {
		const struct probe_fn *a = &probe_fns[i];
		uint64_t c = probe_fn_cookie(i);

		ck_assert_int_eq(TB_COOKIE_API(c), i);
		ck_assert_int_eq(TB_COOKIE_KIND(c), a->kind);
		ck_assert_int_eq(TB_COOKIE_CNT(c), a->cnt);
		ck_assert_int_eq(TB_COOKIE_DT(c), a->dt);
		ck_assert_int_eq(TB_COOKIE_IL(c), a->il);
		/* names are unique: probe_fn_find gives back the same index */
		ck_assert_int_eq(probe_fn_find(a->name), i);
	}
	ck_assert_int_eq(probe_fn_find("cudaNoSuchThing"), -1);
}
END_TEST

START_TEST(nccl_argument_positions)
{
	/* (sendbuff, recvbuff, count, datatype, ...), send/recv (buff, count, datatype, ...) */
	const struct probe_fn *ar = &probe_fns[probe_fn_find("ncclAllReduce")];
	const struct probe_fn *sd = &probe_fns[probe_fn_find("ncclSend")];
	const struct probe_fn *bc = &probe_fns[probe_fn_find("ncclBcast")];

	ck_assert_int_eq(ar->cnt, 3);
	ck_assert_int_eq(ar->dt, 4);
	ck_assert_int_eq(sd->cnt, 2);
	ck_assert_int_eq(sd->dt, 3);
	ck_assert_int_eq(bc->cnt, 2);
	ck_assert_int_eq(bc->dt, 3);
	ck_assert(probe_kind_is_sync(probe_fns[probe_fn_find("cudaMemcpy")].kind));
	ck_assert(!probe_kind_is_sync(probe_fns[probe_fn_find("cudaLaunchKernel")].kind));
	ck_assert(probe_kind_is_op(sd->kind));
	ck_assert(!probe_kind_is_op(probe_fns[probe_fn_find("ncclGroupEnd")].kind));
}
END_TEST

/* The file offset elf_find_functions gives holds the function's code. */
START_TEST(finds_functions_by_symbol)
{
	const char *names[] = { "ncclAllReduce", "cudaStreamSynchronize", "cuNotHere" };
	unsigned char file[16], mem[16];
	uint64_t offs[3];
	struct elf_info info;
	int fd = open("/proc/self/exe", O_RDONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(elf_find_functions(fd, names, 3, offs, &info), 2);
	ck_assert(info.has_symbols);
	ck_assert_uint_ne(offs[0], 0);
	ck_assert_uint_ne(offs[1], 0);
	ck_assert_uint_eq(offs[2], 0);
	ck_assert_int_eq(pread(fd, file, sizeof(file), offs[0]), sizeof(file));
	memcpy(mem, (const void *)ncclAllReduce, sizeof(mem));
	ck_assert_mem_eq(file, mem, sizeof(mem));
	close(fd);
}
END_TEST

/* C functions under C++ mangled names: what a libtorch build exports. */
__attribute__((noinline, used)) int rf_ctor(int scope)
	__asm__("_ZN2at14RecordFunctionC1ENS_11RecordScopeEb");
int rf_ctor(int scope)
{
	return scope + 1;
}

__attribute__((noinline, used)) int writer_ctor(const void *f)
	__asm__("_ZN6caffe29serialize19PyTorchStreamWriterC1ESt8functionIFmPKvmEEb");
int writer_ctor(const void *f)
{
	return f != NULL;
}

/* A pattern names a function whatever its parameters' mangling. */
START_TEST(finds_functions_by_pattern)
{
	const char *names[] = {
		"_ZN2at14RecordFunctionC1ENS_11RecordScopeE*",
		"_ZN6caffe29serialize19PyTorchStreamWriterC1E*basic_string*",
		"_ZN6caffe29serialize19PyTorchStreamWriterC1E*function*",
		"_ZN2at14RecordFunctionC1ENS_11RecordScopeEb",	/* exact too */
	};
	uint64_t offs[4];
	struct elf_info info;
	int fd = open("/proc/self/exe", O_RDONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(elf_find_functions(fd, names, 4, offs, &info), 3);
	ck_assert_uint_ne(offs[0], 0);
	ck_assert_uint_eq(offs[1], 0);	/* no std::string overload here */
	ck_assert_uint_ne(offs[2], 0);
	ck_assert_uint_eq(offs[3], offs[0]);
	ck_assert_uint_ne(offs[0], offs[2]);
	close(fd);
}
END_TEST

/* The interpreter's lock wait, as python3.x exports it (its C API). */
__attribute__((noinline, used)) int PyThread_acquire_lock_timed(void *lock, long long us, int intr)
{
	return lock != NULL && us && intr;
}

__attribute__((noinline, used)) int _PySemaphore_Wait(void *sema, long long timeout, int detach)
{
	return sema != NULL && timeout && detach;
}

/*
 * A wait for a producer thread (bpf/torch.bpf.h, py_lock): both of
 * CPython's lock waits are found by their exported names, are phase
 * probes (entry and return), and say whether the GIL comes back after
 * the return (il). An object that has only them is no sign of a GPU or
 * torch job, and is not listed with the libraries.
 */
START_TEST(finds_python_lock_wait)
{
	const char *names[] = { "PyThread_acquire_lock_timed", "_PySemaphore_Wait" };
	int timed = probe_fn_find(names[0]), sema = probe_fn_find(names[1]);
	uint64_t offs[2];
	struct elf_info info;
	struct gpu g = { 0 };
	int fd = open("/proc/self/exe", O_RDONLY), i;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(elf_find_functions(fd, names, 2, offs, &info), 2);
	close(fd);
	ck_assert_int_ge(timed, 0);
	ck_assert_int_ge(sema, 0);
	ck_assert_int_eq(probe_fns[timed].family, LIB_PYTHON);
	ck_assert_int_eq(probe_fns[timed].kind, TB_AK_PYLOCK);
	ck_assert_int_eq(TB_COOKIE_IL(probe_fn_cookie(timed)), 1);
	ck_assert_int_eq(TB_COOKIE_IL(probe_fn_cookie(sema)), 0);
	ck_assert(probe_kind_is_torch(TB_AK_PYLOCK));	/* probed with the phases only */
	i = gpu_object_add(&g);
	ck_assert_int_ge(i, 0);
	g.objs[i].families = 1u << LIB_PYTHON;
	ck_assert(!gpu_any_library(&g));
	ck_assert(!gpu_has_torch(&g));
	gpu_free(&g);
}
END_TEST

START_TEST(finds_version_string)
{
	char v[32];
	int fd = open("/proc/self/exe", O_RDONLY);

	ck_assert(nccl_banner[0]);
	ck_assert(elf_find_string(fd, "NCCL version ", v, sizeof(v)));
	ck_assert_str_eq(v, "9.8.7");
	ck_assert(!elf_find_string(fd, "No such banner at all ", v, sizeof(v)));
	close(fd);
}
END_TEST

START_TEST(not_elf)
{
	const char *names[] = { "ncclAllReduce" };
	uint64_t offs[1];
	struct elf_info info;
	int fd = open("/proc/self/status", O_RDONLY);

	ck_assert_int_eq(elf_find_functions(fd, names, 1, offs, &info), -1);
	close(fd);
}
END_TEST

START_TEST(maps_lines)
{
	struct map_line m;

	ck_assert(procmaps_parse_line("7f0a1c000000-7f0a1c0a0000 r-xp 00002000 fd:01 1234567                    /usr/lib/x86_64-linux-gnu/libcudart.so.13\n", &m));
	ck_assert_uint_eq(m.lo, 0x7f0a1c000000ull);
	ck_assert_uint_eq(m.hi, 0x7f0a1c0a0000ull);
	ck_assert_uint_eq(m.dev, makedev(0xfd, 1));
	ck_assert_uint_eq(m.ino, 1234567);
	ck_assert_str_eq(m.path, "/usr/lib/x86_64-linux-gnu/libcudart.so.13");
	/* spaces in a path are kept; not executable, anonymous, [vdso]: skipped */
	ck_assert(procmaps_parse_line("1000-2000 r-xp 00000000 08:01 42 /opt/my env/libnccl.so.2\n", &m));
	ck_assert_str_eq(m.path, "/opt/my env/libnccl.so.2");
	ck_assert(!procmaps_parse_line("1000-2000 r--p 00000000 08:01 42 /opt/libnccl.so.2\n", &m));
	ck_assert(!procmaps_parse_line("1000-2000 r-xp 00000000 00:00 0 \n", &m));
	ck_assert(!procmaps_parse_line("7ffd-7ffe r-xp 00000000 00:00 0                  [vdso]\n", &m));
	ck_assert(!procmaps_parse_line("garbage\n", &m));
	ck_assert(!procmaps_parse_line("1000-2000 rw\n", &m));
	ck_assert(!procmaps_parse_line("1000-2000 rw-p 00000000 08:01 42 /opt/libnccl.so.2\n", &m));
	/* execute-only, as some loaders map text: its x is the third letter too */
	ck_assert(procmaps_parse_line("1000-2000 --xp 00000000 08:01 42 /opt/libnccl.so.2\n", &m));
	ck_assert_str_eq(m.path, "/opt/libnccl.so.2");
}
END_TEST

/* Every mapping of one process, by query or by text (query falls back). */
static int list_maps(bool text, struct map_line *out, int max)
{
	struct procmaps pm;
	int n = 0;

	ck_assert_int_eq(procmaps_open(&pm, getpid(), text), 0);
	while (n < max && procmaps_next(&pm, &out[n])) {
		ck_assert_int_eq(procmaps_path(&pm, &out[n]), 0);
		n++;
	}
	procmaps_close(&pm);
	return n;
}

START_TEST(maps_queried_as_read)
{
	static struct map_line q[256], t[256];
	int nq = list_maps(false, q, 256), nt = list_maps(true, t, 256);
	bool libc = false;
	struct stat st;

	ck_assert_int_gt(nt, 1);
	ck_assert_int_eq(nq, nt);
	for (int i = 0; i < nt; i++) {
		ck_assert_uint_eq(q[i].lo, t[i].lo);
		ck_assert_uint_eq(q[i].hi, t[i].hi);
		ck_assert_uint_eq(q[i].dev, t[i].dev);
		ck_assert_uint_eq(q[i].ino, t[i].ino);
		ck_assert_str_eq(q[i].path, t[i].path);
		if (strstr(t[i].path, "/libc.so")) {
			libc = true;
			ck_assert_int_eq(stat(t[i].path, &st), 0);
			ck_assert_uint_eq(st.st_ino, t[i].ino);
			ck_assert_uint_eq(st.st_dev, t[i].dev);
		}
	}
	ck_assert(libc);
	ck_assert_int_eq(procmaps_open(&(struct procmaps){ 0 }, 999999999, false), -1);
}
END_TEST

START_TEST(so_versions)
{
	char v[32];

	lib_so_version("/usr/lib/libcuda.so.580.95.05", v, sizeof(v));
	ck_assert_str_eq(v, "580.95.05");
	lib_so_version("/x/site-packages/nvidia/cu13/lib/libcudart.so.13", v, sizeof(v));
	ck_assert_str_eq(v, "13");
	lib_so_version("/x/libcudart-1a2b3c4d.so.11.0", v, sizeof(v));
	ck_assert_str_eq(v, "11.0");
	lib_so_version("/usr/bin/train", v, sizeof(v));
	ck_assert_str_eq(v, "");
}
END_TEST

START_TEST(code_size)
{
	ck_assert_uint_gt(procfs_code_kb(getpid()), 0);
	ck_assert_uint_eq(procfs_code_kb(0x7ffffff0), 0);
}
END_TEST

/* Exited processes: the silent forgotten, the oldest of the rest summed, totals exact. */
START_TEST(exited_processes_fold)
{
	struct gpu g = { 0 };
	struct tb_api_stat before[TB_MAX_APIS], after[TB_MAX_APIS];
	int n = GPU_MAX_GONE + 40, map[GPU_MAX_GONE + 100];
	int obj = gpu_object_add(&g);

	for (int i = 0; i < n + 50; i++) {
		struct gpu_proc *p = gpu_proc_get(&g, 1000 + i);

		p->exited = i < n + 40;	/* 10 live ones at the end */
		if (i % (n + 50) >= n && i < n + 40)
			continue;	/* 40 exited that said nothing */
		p->stat[0].calls = i + 1;
		p->stat[0].ns = 10 * (i + 1);
		gpu_mapping_add(p, obj);
	}
	gpu_totals(&g, before);
	ck_assert(gpu_fold_exited(&g, map));
	gpu_totals(&g, after);
	ck_assert_uint_eq(after[0].calls, before[0].calls);
	ck_assert_uint_eq(after[0].ns, before[0].ns);
	/* The summed one, the last GPU_MAX_GONE that said something, the live. */
	ck_assert_int_eq(g.nprocs, 1 + GPU_MAX_GONE + 10);
	ck_assert_int_eq(g.procs[0].pid, 0);
	ck_assert_uint_eq(g.procs[0].stat[0].calls, 40 * 41 / 2);
	ck_assert_int_eq(g.procs[0].nmaps, 1);
	ck_assert_int_eq(map[0], 0);
	ck_assert_int_eq(map[39], 0);
	ck_assert_int_eq(map[40], 1);
	ck_assert_int_eq(map[n], -1);
	ck_assert_int_eq(map[n + 49], g.nprocs - 1);
	ck_assert_int_eq(g.procs[g.nprocs - 1].pid, 1000 + n + 49);
	/* Again: nothing new to fold. */
	ck_assert(!gpu_fold_exited(&g, map));
	gpu_free(&g);
}
END_TEST

/* A process that makes and destroys communicators in a loop keeps GPU_MAX_COMMS. */
START_TEST(communicators_are_bounded)
{
	struct gpu g = { 0 };
	struct tb_comm_event e = { .type = TB_EV_NCCL_COMM, .pid = 7, .rank = 0, .nranks = 2 };
	const struct gpu_proc *p;

	/* Made and destroyed, one at a time: the newest GPU_MAX_COMMS are kept. */
	for (int i = 0; i < 3 * GPU_MAX_COMMS; i++) {
		e.type = TB_EV_NCCL_COMM;
		e.comm = 0x1000 + i;
		e.id[0] = (uint8_t)i;
		gpu_on_comm(&g, &e);
		e.type = TB_EV_NCCL_DESTROY;
		gpu_on_comm(&g, &e);
	}
	p = gpu_proc_find(&g, 7);
	ck_assert_int_eq(p->ncomms, GPU_MAX_COMMS);
	ck_assert_uint_eq(g.comms_dropped, 2 * GPU_MAX_COMMS);
	ck_assert_uint_eq(p->comms[0].comm, 0x1000 + 2 * GPU_MAX_COMMS);
	ck_assert_uint_eq(p->comms[GPU_MAX_COMMS - 1].comm, 0x1000 + 3 * GPU_MAX_COMMS - 1);
	/* All alive: a new one takes the oldest destroyed one's place, then none is left. */
	for (int i = 0; i < GPU_MAX_COMMS + 5; i++) {
		e.type = TB_EV_NCCL_COMM;
		e.comm = 0x9000 + i;
		gpu_on_comm(&g, &e);
	}
	ck_assert_int_eq(p->ncomms, GPU_MAX_COMMS);
	ck_assert_uint_eq(g.comms_dropped, 2 * GPU_MAX_COMMS + GPU_MAX_COMMS + 5);
	for (int i = 0; i < p->ncomms; i++)
		ck_assert(!p->comms[i].destroyed);
	ck_assert_uint_eq(p->comms[GPU_MAX_COMMS - 1].comm, 0x9000 + GPU_MAX_COMMS - 1);
	gpu_free(&g);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("gpu");
	TCase *tc = tcase_create("discovery");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, cookie_round_trip);
	tcase_add_test(tc, nccl_argument_positions);
	tcase_add_test(tc, finds_functions_by_symbol);
	tcase_add_test(tc, finds_functions_by_pattern);
	tcase_add_test(tc, finds_python_lock_wait);
	tcase_add_test(tc, finds_version_string);
	tcase_add_test(tc, not_elf);
	tcase_add_test(tc, maps_lines);
	tcase_add_test(tc, maps_queried_as_read);
	tcase_add_test(tc, so_versions);
	tcase_add_test(tc, code_size);
	tcase_add_test(tc, exited_processes_fold);
	tcase_add_test(tc, communicators_are_bounded);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
