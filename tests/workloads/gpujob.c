// SPDX-License-Identifier: BSD-3-Clause
/*
 * gpujob.c - trainbpf test workload: a training loop on the CUDA and NCCL
 * stand-ins (fakecuda/), with exact ground truth for every probed call.
 *
 * Each step of the loop, on each loop thread:
 *   - spins on the CPU for --cpu-us;
 *   - makes --launches K launches, rotating through the runtime, driver
 *     and graph launch calls (return at once);
 *   - synchronises 9 ways, each blocking --sync-us inside the driver:
 *     cudaStreamSynchronize(_ptsz), cudaDeviceSynchronize,
 *     cudaEventSynchronize, cudaMemcpy (DtoH), cudaMemcpy_ptds (HtoD),
 *     cudaMemcpy2D(_ptds), and cuStreamSynchronize directly;
 *   - communicates 8 times, each blocking --nccl-us: ncclAllReduce (float32,
 *     a count that varies by step), ncclBroadcast (int64), ncclAllGather
 *     (bf16), ncclReduceScatter (float16), ncclReduce (the datatype cycles
 *     through all 12), ncclBcast (uint8; NCCL's calls ncclBroadcast),
 *     ncclAlltoAll (int32), and ncclSend + ncclRecv (float32) between
 *     ncclGroupStart and ncclGroupEnd (End blocks once for both).
 * The communicator comes from ncclCommInitAll (1 device), or with
 * --comm-init from ncclCommInitRank (--rank/--nranks, a unique id whose
 * first 16 bytes are de ad be ef 01 02 ... 0c), plus a second one from
 * ncclCommInitRankConfig (rank+1, id 0x5a 0x5b ...) and a third from
 * ncclCommSplit of the first; all are destroyed (the second by
 * ncclCommAbort) at the end.
 *
 * Usage: gpujob --truth OUT.json [--steps N] [--cpu-us U] [--sync-us U]
 *          [--nccl-us U] [--launches K] [--mode spin|sleep] [--threads N]
 *          [--comm-init [--rank R] [--nranks N]] [--wait-ms M]
 *          [--loop-delay-ms D] [--dlopen DIR [--cudart NAME] [--cuda NAME]
 *          [--nccl NAME]]
 *          [--wait-probes MS [--launch-probes]] [--loading] [--stall-at S]
 *          [--wait-file PATH]
 * --mode: how the stand-ins block (spin on the clock, or nanosleep).
 * --wait-ms: sleep first (a tracer attaches); --wait-file: then until PATH
 * exists (the tracer has attached, however long that took); --loop-delay-ms: sleep after
 * loading the libraries, before the loop.
 * --loading: from the start until the probes are seen, map the program's
 * own code anew every 10 ms, as a loader at work does (import torch maps
 * hundreds of files over seconds): the libraries are dlopened while the
 * process's code keeps growing.
 * --stall-at S (with --comm-init): the loop's step S never ends, as a rank
 * stuck in its subgroup's collective hangs a job: rank 0 blocks (for an
 * hour) in that step's first ncclAllReduce on the loop's communicator;
 * every other rank makes 3 ncclAllReduce on its own split communicator
 * (the split's color is then the rank: one member each) and blocks in a
 * 4th. So on the loop's communicator rank 0 entered one data call more
 * than the others (9 a step: ncclBcast's inner ncclBroadcast is not one),
 * while in all the others made 3 more.
 * --wait-probes: after loading, wait (at most MS) until every function
 * it calls that trainbpf probes (with --launch-probes, the launch calls
 * too) has a uprobe: an int3 (0xcc) in place of its first byte, which the
 * process sees in its own copy of the page; then 300 ms more, for the
 * probes attached last (trainbpf attaches a function's return probe, then
 * its entry probe). So counts can be exact whatever the tracer's
 * discovery latency, which is measured: probes_ms in the truth.
 *
 * Three builds of this file:
 *   gpujob         linked to the libraries in build/fakecuda (RUNPATH $ORIGIN/fakecuda);
 *   gpujob-dl      linked to none of them: needs --dlopen DIR, and dlopens
 *                  DIR/libcuda.so.1, DIR/libcudart.so.13, DIR/libnccl.so.2
 *                  (names changed by --cuda, --cudart, --nccl) after
 *                  --wait-ms, so they are mapped only then; libcuda goes
 *                  first, so the runtime's DT_NEEDED libcuda.so.1 is the
 *                  one already loaded (matched by SONAME) whatever its name;
 *   gpujob-static  the stand-ins' code linked into the executable: the
 *                  CUDA/NCCL functions are only in its .symtab.
 *
 * Ground truth (JSON): pid; tid, start_ns, end_ns of the main loop thread
 * (CLOCK_MONOTONIC, from before communicator creation to after its
 * destruction); gpu_wait_ns (time inside the sync and memcpy calls) and
 * comm_ns (inside every NCCL call but ncclGetVersion, which is made before
 * start_ns) of that thread; threads[] the same for every loop thread;
 * apis{NAME: {kind, calls (outermost calls made here), nested (calls the
 * stand-ins make inside another probed call: cudaStreamSynchronize ->
 * cuStreamSynchronize, ncclBcast -> ncclBroadcast...), bytes (NCCL data
 * calls: count x datatype size; memcpy: the bytes copied), ns (time
 * around the outermost calls), rq_ns (how much longer the thread's
 * schedstat run_delay got across those calls: an upper bound on the
 * preemptions between a clock read and the probe inside)}} summed over
 * the loop threads; threads[] also have gpu_wait_rq_ns and comm_rq_ns,
 * the same bound for gpu_wait_ns and comm_ns;
 * launches{NAME: calls}; comm{comm, rank, nranks, id (first 16 bytes,
 * hex), id_full (128 bytes)}; comms[] every communicator made; versions;
 * load_unix_ns (CLOCK_REALTIME just before the first dlopen, or at start);
 * probes_ms (with --wait-probes: from loading to every probe seen; -1 if
 * not seen in time).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>
#include "fakecuda/fakecuda.h"
#include "workload.h"

#define MAX_THREADS 8
#define MAX_COMMS 4
#define COPY_BYTES 4096

static void die(const char *what)
{
	fprintf(stderr, "gpujob: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void die_msg(const char *msg)
{
	fprintf(stderr, "gpujob: %s\n", msg);
	exit(1);
}

/* Every function called, and what trainbpf should make of it. */
#define RT_APIS(X) \
	X(cudaDeviceSynchronize, SYNC) X(cudaStreamSynchronize, SYNC) \
	X(cudaStreamSynchronize_ptsz, SYNC) X(cudaEventSynchronize, SYNC) \
	X(cudaMemcpy, MEMCPY) X(cudaMemcpy_ptds, MEMCPY) X(cudaMemcpy2D, MEMCPY) \
	X(cudaMemcpy2D_ptds, MEMCPY) X(cudaLaunchKernel, LAUNCH) \
	X(cudaLaunchKernel_ptsz, LAUNCH) X(cudaLaunchKernelExC, LAUNCH) \
	X(cudaLaunchKernelExC_ptsz, LAUNCH) X(cudaGraphLaunch, LAUNCH) \
	X(cudaGraphLaunch_ptsz, LAUNCH)
#define DRV_APIS(X) \
	X(cuCtxSynchronize, SYNC) X(cuStreamSynchronize, SYNC) \
	X(cuStreamSynchronize_ptsz, SYNC) X(cuEventSynchronize, SYNC) \
	X(cuMemcpy, MEMCPY) X(cuMemcpy_ptds, MEMCPY) X(cuMemcpyDtoH_v2, MEMCPY) \
	X(cuMemcpyDtoH_v2_ptds, MEMCPY) X(cuLaunchKernel, LAUNCH) \
	X(cuLaunchKernel_ptsz, LAUNCH) X(cuLaunchKernelEx, LAUNCH) \
	X(cuLaunchKernelEx_ptsz, LAUNCH) X(cuGraphLaunch, LAUNCH) \
	X(cuGraphLaunch_ptsz, LAUNCH)
#define NCCL_APIS(X) \
	X(ncclAllReduce, COLL) X(ncclBroadcast, COLL) X(ncclBcast, COLL) \
	X(ncclReduce, COLL) X(ncclAllGather, COLL) X(ncclReduceScatter, COLL) \
	X(ncclAlltoAll, COLL) X(ncclSend, P2P) X(ncclRecv, P2P) \
	X(ncclGroupStart, GROUP) X(ncclGroupEnd, GROUP) \
	X(ncclCommInitRank, COMM_INIT) X(ncclCommInitRankConfig, COMM_INIT) \
	X(ncclCommInitAll, COMM_INIT) X(ncclCommSplit, COMM_INIT) \
	X(ncclCommDestroy, COMM_DESTROY) X(ncclCommAbort, COMM_DESTROY)
#define ALL_APIS(X) RT_APIS(X) DRV_APIS(X) NCCL_APIS(X)

enum kind { SYNC, MEMCPY, COLL, P2P, GROUP, COMM_INIT, COMM_DESTROY, LAUNCH };
static const char *const kind_names[] = {
	"sync", "memcpy", "collective", "p2p", "group", "comm_init", "comm_destroy", "launch",
};

#define X_ENUM(name, kind) A_##name,
enum api { ALL_APIS(X_ENUM) N_APIS, A_NONE = -1 };
#define X_NAME(name, kind) #name,
static const char *const api_names[] = { ALL_APIS(X_NAME) };
#define X_KIND(name, kind) kind,
static const enum kind api_kinds[] = { ALL_APIS(X_KIND) };

/* The functions, linked or looked up. */
#define X_PTR(name, kind) __typeof(name) *name;
static struct {
	ALL_APIS(X_PTR)
	__typeof(ncclGetVersion) *ncclGetVersion;
	__typeof(fakecuda_set_block) *fakecuda_set_block;
	__typeof(fakenccl_set_block) *fakenccl_set_block;
	__typeof(fakecuda_blocked_ns) *fakecuda_blocked_ns;
	__typeof(fakenccl_blocked_ns) *fakenccl_blocked_ns;
} F;

struct api_stat {
	int64_t calls, nested, bytes, ns, rq_ns, inner_ns;
};

/* One call: its time, and the run-queue wait (schedstat) around it. */
struct timing {
	int64_t ns, rq_ns, inner_ns;
};

struct thr {
	pthread_t handle;
	int index;
	long tid;
	int64_t start_ns, end_ns, gpu_wait_ns, comm_ns, gpu_wait_rq_ns, comm_rq_ns;
	int64_t gpu_wait_inner_ns, comm_inner_ns;
	struct api_stat st[N_APIS];
	unsigned launch_seq;
};

struct comm_rec {
	ncclComm_t comm;
	enum api init;
	int rank, nranks;
	ncclUniqueId id;
};

static struct {
	int steps, threads, launches, sleep_mode, comm_init, rank, nranks;
	int launch_probes, loading, stall_at;
	long long cpu_ns, sync_ns, nccl_ns, wait_ms, loop_delay_ms, wait_probes_ms;
	const char *truth, *dir, *cudart, *cuda, *nccl, *wait_file;
} g_opt = { .steps = 10, .threads = 1, .cpu_ns = 1000000, .sync_ns = 2000000,
	    .nccl_ns = 2000000, .rank = 3, .nranks = 8, .cudart = "libcudart.so.13",
	    .cuda = "libcuda.so.1", .nccl = "libnccl.so.2", .stall_at = -1 };

static struct thr g_thr[MAX_THREADS];
static struct comm_rec g_comms[MAX_COMMS];
static int g_ncomms;
static ncclComm_t g_comm;		/* the loop's */
static int g_nccl_version;
static int64_t g_load_unix_ns;
static long long g_probes_ms = -1;

/* Dummy handles: the stand-ins only check they are not NULL. */
static char g_stream_obj, g_event_obj, g_graph_obj;
#define STREAM ((cudaStream_t)&g_stream_obj)
#define EVENT ((cudaEvent_t)&g_event_obj)
#define GRAPH ((cudaGraphExec_t)&g_graph_obj)
static void kernel(void) {}

static const size_t dtype_size[ncclNumTypes] = {
	[ncclInt8] = 1, [ncclUint8] = 1, [ncclInt32] = 4, [ncclUint32] = 4,
	[ncclInt64] = 8, [ncclUint64] = 8, [ncclFloat16] = 2, [ncclFloat32] = 4,
	[ncclFloat64] = 8, [ncclBfloat16] = 2, [ncclFloat8e4m3] = 1, [ncclFloat8e5m2] = 1,
};

/*
 * Makes one call, timing it; nested: the probed function the stand-in
 * calls inside it, if any. Every call must succeed.
 */
#define CALL(t, api, nested, bytes, ...) \
	account(t, A_##api, nested, bytes, \
		({ int64_t c0_, r0_, c1_, r1_, t0_, ns_, b0_ = blocked(); \
		   read_schedstat(gettid_(), &c0_, &r0_); \
		   t0_ = mono_ns(); \
		   int rc_ = F.api(__VA_ARGS__); \
		   ns_ = mono_ns() - t0_; \
		   read_schedstat(gettid_(), &c1_, &r1_); \
		   check(rc_, #api); \
		   (struct timing){ ns_, r1_ - r0_, blocked() - b0_ }; }))

/* The thread's time blocked inside the stand-ins: within the probes. */
static int64_t blocked(void)
{
	return F.fakecuda_blocked_ns() + F.fakenccl_blocked_ns();
}

static void check(int rc, const char *api)
{
	char msg[128];

	if (rc != 0) {
		snprintf(msg, sizeof(msg), "%s returned %d", api, rc);
		die_msg(msg);
	}
}

static void account(struct thr *t, enum api a, enum api nested, size_t bytes,
		    struct timing c)
{
	struct api_stat *s = &t->st[a];

	s->calls++;
	s->bytes += bytes;
	s->ns += c.ns;
	s->rq_ns += c.rq_ns;
	s->inner_ns += c.inner_ns;
	if (nested != A_NONE)
		t->st[nested].nested++;
	if (api_kinds[a] == SYNC || api_kinds[a] == MEMCPY) {
		t->gpu_wait_ns += c.ns;
		t->gpu_wait_rq_ns += c.rq_ns;
		t->gpu_wait_inner_ns += c.inner_ns;
	} else if (api_kinds[a] != LAUNCH) {
		t->comm_ns += c.ns;
		t->comm_rq_ns += c.rq_ns;
		t->comm_inner_ns += c.inner_ns;
	}
}

static void spin_ns(int64_t ns)
{
	int64_t end = mono_ns() + ns;

	while (mono_ns() < end)
		;
}

static void launch(struct thr *t)
{
	dim3 g = { 64, 1, 1 }, b = { 256, 1, 1 };
	cudaLaunchConfig_t rc = { g, b, 0, STREAM, NULL, 0 };
	CUlaunchConfig dc = { 64, 1, 1, 256, 1, 1, 0, STREAM, NULL, 0 };
	void *args[1] = { NULL };
	const void *k = (const void *)kernel;

	switch (t->launch_seq++ % 10) {
	case 0: CALL(t, cudaLaunchKernel, A_cuLaunchKernel, 0, k, g, b, args, 0, STREAM); break;
	case 1: CALL(t, cudaLaunchKernel_ptsz, A_cuLaunchKernel_ptsz, 0, k, g, b, args, 0, STREAM); break;
	case 2: CALL(t, cudaLaunchKernelExC, A_cuLaunchKernelEx, 0, &rc, k, args); break;
	case 3: CALL(t, cudaLaunchKernelExC_ptsz, A_cuLaunchKernelEx_ptsz, 0, &rc, k, args); break;
	case 4: CALL(t, cuLaunchKernel, A_NONE, 0, (CUfunction)k, 64, 1, 1, 256, 1, 1, 0,
		     STREAM, args, NULL); break;
	case 5: CALL(t, cuLaunchKernel_ptsz, A_NONE, 0, (CUfunction)k, 64, 1, 1, 256, 1, 1, 0,
		     STREAM, args, NULL); break;
	case 6: CALL(t, cuLaunchKernelEx, A_NONE, 0, &dc, (CUfunction)k, args, NULL); break;
	case 7: CALL(t, cudaGraphLaunch, A_cuGraphLaunch, 0, GRAPH, STREAM); break;
	case 8: CALL(t, cudaGraphLaunch_ptsz, A_cuGraphLaunch_ptsz, 0, GRAPH, STREAM); break;
	case 9: CALL(t, cuGraphLaunch, A_NONE, 0, (CUgraphExec)GRAPH, STREAM); break;
	}
}

static void synchronise(struct thr *t)
{
	static char dev[COPY_BYTES], dev2[COPY_BYTES];	/* "device" memory */
	char host[COPY_BYTES];

	memset(host, t->index, sizeof(host));
	CALL(t, cudaStreamSynchronize, A_cuStreamSynchronize, 0, STREAM);
	CALL(t, cudaStreamSynchronize_ptsz, A_cuStreamSynchronize_ptsz, 0, STREAM);
	CALL(t, cudaDeviceSynchronize, A_cuCtxSynchronize, 0);
	CALL(t, cudaEventSynchronize, A_cuEventSynchronize, 0, EVENT);
	CALL(t, cudaMemcpy, A_cuMemcpyDtoH_v2, COPY_BYTES, host, dev, COPY_BYTES,
	     cudaMemcpyDeviceToHost);
	CALL(t, cudaMemcpy_ptds, A_cuMemcpy_ptds, COPY_BYTES, dev2, host, COPY_BYTES,
	     cudaMemcpyHostToDevice);
	CALL(t, cudaMemcpy2D, A_cuMemcpy, COPY_BYTES, dev2, 64, dev, 64, 64, COPY_BYTES / 64,
	     cudaMemcpyDeviceToDevice);
	CALL(t, cudaMemcpy2D_ptds, A_cuMemcpy_ptds, COPY_BYTES, host, 64, dev, 64, 64,
	     COPY_BYTES / 64, cudaMemcpyDeviceToHost);
	CALL(t, cuStreamSynchronize, A_NONE, 0, (CUstream)STREAM);
}

static void communicate(struct thr *t, int step)
{
	static char buf[1 << 20];	/* stands for device buffers: never touched */
	size_t n;
	ncclDataType_t dt = (ncclDataType_t)(step % ncclNumTypes);

	n = 4096 + 1000 * (step % 5);
	CALL(t, ncclAllReduce, A_NONE, n * 4, buf, buf, n, ncclFloat32, ncclSum, g_comm, STREAM);
	n = 512 * (1 + step % 3);
	CALL(t, ncclBroadcast, A_NONE, n * 8, buf, buf, n, ncclInt64, 0, g_comm, STREAM);
	n = 2048 + step;
	CALL(t, ncclAllGather, A_NONE, n * 2, buf, buf, n, ncclBfloat16, g_comm, STREAM);
	n = 1024 * (1 + step % 2);
	CALL(t, ncclReduceScatter, A_NONE, n * 2, buf, buf, n, ncclFloat16, ncclMax, g_comm,
	     STREAM);
	n = 100 + step;
	CALL(t, ncclReduce, A_NONE, n * dtype_size[dt], buf, buf, n, dt, ncclSum, 0, g_comm,
	     STREAM);
	CALL(t, ncclBcast, A_ncclBroadcast, 333, buf, 333, ncclUint8, 0, g_comm, STREAM);
	n = 64 * (1 + step % 4);
	CALL(t, ncclAlltoAll, A_NONE, n * 4, buf, buf, n, ncclInt32, g_comm, STREAM);
	CALL(t, ncclGroupStart, A_NONE, 0);
	CALL(t, ncclSend, A_NONE, 1500 * 4, buf, 1500, ncclFloat32, 1, g_comm, STREAM);
	CALL(t, ncclRecv, A_NONE, 1500 * 4, buf, 1500, ncclFloat32, 1, g_comm, STREAM);
	CALL(t, ncclGroupEnd, A_NONE, 0);
}

/* --stall-at: this step never ends (see the top). */
static void stall_here(struct thr *t)
{
	static char buf[4096];
	ncclComm_t own = NULL;

	for (int i = 0; i < g_ncomms; i++)
		if (g_comms[i].init == A_ncclCommSplit)
			own = g_comms[i].comm;
	if (g_opt.rank > 0)
		for (int i = 0; i < 3; i++)
			CALL(t, ncclAllReduce, A_NONE, 1024 * 4, buf, buf, 1024, ncclFloat32, ncclSum,
			     own, STREAM);
	fprintf(stderr, "gpujob: rank %d stalls in step %d at %lld\n", g_opt.rank, g_opt.stall_at,
		(long long)mono_ns());
	F.fakenccl_set_block(FAKE_SLEEP, 3600LL * 1000000000LL);
	CALL(t, ncclAllReduce, A_NONE, 1024 * 4, buf, buf, 1024, ncclFloat32, ncclSum,
	     g_opt.rank > 0 ? own : g_comm, STREAM);
}

static void *loop(void *arg)
{
	struct thr *t = arg;
	char name[16];

	snprintf(name, sizeof(name), "gpujob_%d", t->index);
	prctl(PR_SET_NAME, name, 0, 0, 0);
	t->tid = gettid_();
	if (t->index > 0)
		t->start_ns = mono_ns();
	for (int step = 0; step < g_opt.steps; step++) {
		spin_ns(g_opt.cpu_ns);
		for (int i = 0; i < g_opt.launches; i++)
			launch(t);
		synchronise(t);
		if (step == g_opt.stall_at && t->index == 0)
			stall_here(t);
		communicate(t, step);
	}
	if (t->index > 0)
		t->end_ns = mono_ns();
	return NULL;
}

static void add_comm(ncclComm_t c, enum api init, int rank, int nranks,
		     const ncclUniqueId *id)
{
	struct comm_rec *r = &g_comms[g_ncomms++];

	r->comm = c;
	r->init = init;
	r->rank = rank;
	r->nranks = nranks;
	if (id)
		r->id = *id;
}

static void comms_create(struct thr *t)
{
	ncclUniqueId id = { { 0 } }, id2 = { { 0 } };
	ncclComm_t c;
	int dev = 0, r2 = (g_opt.rank + 1) % g_opt.nranks;

	if (!g_opt.comm_init) {
		CALL(t, ncclCommInitAll, A_NONE, 0, &g_comm, 1, &dev);
		add_comm(g_comm, A_ncclCommInitAll, 0, 1, NULL);
		return;
	}
	for (int i = 0; i < 16; i++) {
		id.internal[i] = (char)(i < 4 ? "\xde\xad\xbe\xef"[i] : i - 3);
		id2.internal[i] = (char)(0x5a + i);
	}
	CALL(t, ncclCommInitRank, A_NONE, 0, &g_comm, g_opt.nranks, id, g_opt.rank);
	add_comm(g_comm, A_ncclCommInitRank, g_opt.rank, g_opt.nranks, &id);
	CALL(t, ncclCommInitRankConfig, A_NONE, 0, &c, g_opt.nranks, id2, r2, NULL);
	add_comm(c, A_ncclCommInitRankConfig, r2, g_opt.nranks, &id2);
	CALL(t, ncclCommSplit, A_NONE, 0, g_comm, g_opt.stall_at >= 0 ? g_opt.rank : 0,
	     g_opt.rank, &c, NULL);
	add_comm(c, A_ncclCommSplit, g_opt.rank, g_opt.nranks, &id);
}

/* In reverse order of creation; the one from ncclCommInitRankConfig is aborted. */
static void comms_destroy(struct thr *t)
{
	for (int i = g_ncomms - 1; i >= 0; i--) {
		if (g_comms[i].init == A_ncclCommInitRankConfig)
			CALL(t, ncclCommAbort, A_NONE, 0, g_comms[i].comm);
		else
			CALL(t, ncclCommDestroy, A_NONE, 0, g_comms[i].comm);
	}
}

#ifdef GPUJOB_DLOPEN
static void *open_lib(const char *name)
{
	char path[4096];
	void *h;

	snprintf(path, sizeof(path), "%s/%s", g_opt.dir, name);
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "gpujob: %s\n", dlerror());
		exit(1);
	}
	return h;
}

static void *sym(void *h, const char *name)
{
	void *p = dlsym(h, name);

	if (!p) {
		fprintf(stderr, "gpujob: %s\n", dlerror());
		exit(1);
	}
	return p;
}

static void load(void)
{
	void *cuda, *rt, *nccl;

	if (!g_opt.dir)
		die_msg("gpujob-dl needs --dlopen DIR");
	cuda = open_lib(g_opt.cuda);
	rt = open_lib(g_opt.cudart);
	nccl = open_lib(g_opt.nccl);
#define X_RT(name, kind) F.name = sym(rt, #name);
#define X_DRV(name, kind) F.name = sym(cuda, #name);
#define X_NCCL(name, kind) F.name = sym(nccl, #name);
	RT_APIS(X_RT)
	DRV_APIS(X_DRV)
	NCCL_APIS(X_NCCL)
	F.ncclGetVersion = sym(nccl, "ncclGetVersion");
	F.fakecuda_set_block = sym(cuda, "fakecuda_set_block");
	F.fakenccl_set_block = sym(nccl, "fakenccl_set_block");
	F.fakecuda_blocked_ns = sym(cuda, "fakecuda_blocked_ns");
	F.fakenccl_blocked_ns = sym(nccl, "fakenccl_blocked_ns");
}
#else
static void load(void)
{
	if (g_opt.dir)
		die_msg("--dlopen: use gpujob-dl, which is linked to no CUDA library");
#define X_LINK(name, kind) F.name = name;
	ALL_APIS(X_LINK)
	F.ncclGetVersion = ncclGetVersion;
	F.fakecuda_set_block = fakecuda_set_block;
	F.fakenccl_set_block = fakenccl_set_block;
	F.fakecuda_blocked_ns = fakecuda_blocked_ns;
	F.fakenccl_blocked_ns = fakenccl_blocked_ns;
}
#endif

static const void *api_fn(enum api a)
{
	switch (a) {
#define X_FN(name, kind) case A_##name: return (const void *)F.name;
	ALL_APIS(X_FN)
	default: return NULL;
	}
}

static volatile int g_probes_seen;

/* --loading (see the top); at most a minute of it. */
static void *keep_loading(void *arg)
{
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);

	(void)arg;
	if (fd < 0)
		die("open /proc/self/exe");
	for (int i = 0; i < 6000 && !g_probes_seen; i++) {
		if (mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0) == MAP_FAILED)
			die("mmap");
		sleep_ns(10 * 1000000LL);
	}
	close(fd);
	return NULL;
}

/* Waits until the probed functions start with a breakpoint (see the top). */
static void wait_probes(void)
{
	int64_t t0 = mono_ns(), deadline = t0 + g_opt.wait_probes_ms * 1000000LL;

	for (;;) {
		int missing = 0;

		for (int a = 0; a < N_APIS; a++)
			if (api_kinds[a] != LAUNCH || g_opt.launch_probes)
				missing += *(const volatile unsigned char *)api_fn(a) != 0xcc;
		if (!missing) {
			g_probes_ms = (mono_ns() - t0) / 1000000;
			g_probes_seen = 1;
			sleep_ns(300 * 1000000LL);
			return;
		}
		if (mono_ns() > deadline) {
			fprintf(stderr, "gpujob: %d functions still without a probe\n", missing);
			return;
		}
		sleep_ns(5 * 1000000LL);
	}
}

static void json_hex(FILE *f, const char *key, const void *p, size_t n)
{
	fprintf(f, "\"%s\":\"", key);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%02x", ((const unsigned char *)p)[i]);
	fputc('"', f);
}

static void write_apis(FILE *f)
{
	struct api_stat sum[N_APIS] = { { 0 } };
	int first = 1;

	for (int i = 0; i < g_opt.threads; i++)
		for (int a = 0; a < N_APIS; a++) {
			sum[a].calls += g_thr[i].st[a].calls;
			sum[a].nested += g_thr[i].st[a].nested;
			sum[a].bytes += g_thr[i].st[a].bytes;
			sum[a].ns += g_thr[i].st[a].ns;
			sum[a].rq_ns += g_thr[i].st[a].rq_ns;
			sum[a].inner_ns += g_thr[i].st[a].inner_ns;
		}
	fputs(" \"apis\":{", f);
	for (int a = 0; a < N_APIS; a++) {
		if (!sum[a].calls && !sum[a].nested)
			continue;
		fprintf(f, "%s\n  \"%s\":{\"kind\":\"%s\",\"calls\":%lld,\"nested\":%lld,"
			"\"bytes\":%lld,\"ns\":%lld,\"rq_ns\":%lld,\"inner_ns\":%lld}",
			first ? "" : ",", api_names[a], kind_names[api_kinds[a]],
			(long long)sum[a].calls, (long long)sum[a].nested, (long long)sum[a].bytes,
			(long long)sum[a].ns, (long long)sum[a].rq_ns, (long long)sum[a].inner_ns);
		first = 0;
	}
	fputs("},\n \"launches\":{", f);
	first = 1;
	for (int a = 0; a < N_APIS; a++) {
		if (api_kinds[a] != LAUNCH || !sum[a].calls)
			continue;
		fprintf(f, "%s\"%s\":%lld", first ? "" : ",", api_names[a],
			(long long)sum[a].calls);
		first = 0;
	}
	fputs("},\n", f);
}

static void write_comm(FILE *f, const struct comm_rec *r)
{
	fprintf(f, "{\"comm\":\"%p\",\"init\":\"%s\",\"rank\":%d,\"nranks\":%d,", (void *)r->comm,
		api_names[r->init], r->rank, r->nranks);
	json_hex(f, "id", &r->id, 16);
	fputc(',', f);
	json_hex(f, "id_full", &r->id, sizeof(r->id));
	fputc('}', f);
}

static void write_truth(void)
{
	const struct thr *m = &g_thr[0];
	char tmp[4096];
	FILE *f = truth_open(g_opt.truth, tmp, sizeof(tmp));

	fprintf(f, "{\"pid\":%d,\"tid\":%ld,\"start_ns\":%lld,\"end_ns\":%lld,"
		"\"gpu_wait_ns\":%lld,\"comm_ns\":%lld,\"steps\":%d,\"mode\":\"%s\",\n"
		" \"load_unix_ns\":%lld,\"nccl_version\":%d,\"probes_ms\":%lld,\n"
		" \"threads\":[",
		(int)getpid(), m->tid, (long long)m->start_ns, (long long)m->end_ns,
		(long long)m->gpu_wait_ns, (long long)m->comm_ns, g_opt.steps,
		g_opt.sleep_mode ? "sleep" : "spin", (long long)g_load_unix_ns,
		g_nccl_version, g_probes_ms);
	for (int i = 0; i < g_opt.threads; i++) {
		const struct thr *t = &g_thr[i];

		fprintf(f, "%s{\"tid\":%ld,\"start_ns\":%lld,\"end_ns\":%lld,"
			"\"gpu_wait_ns\":%lld,\"comm_ns\":%lld,\"gpu_wait_rq_ns\":%lld,"
			"\"comm_rq_ns\":%lld,\"gpu_wait_inner_ns\":%lld,\"comm_inner_ns\":%lld}",
			i ? "," : "", t->tid, (long long)t->start_ns, (long long)t->end_ns,
			(long long)t->gpu_wait_ns, (long long)t->comm_ns,
			(long long)t->gpu_wait_rq_ns, (long long)t->comm_rq_ns,
			(long long)t->gpu_wait_inner_ns, (long long)t->comm_inner_ns);
	}
	fputs("],\n", f);
	write_apis(f);
	fputs(" \"comm\":", f);
	write_comm(f, &g_comms[0]);
	fputs(",\n \"comms\":[", f);
	for (int i = 0; i < g_ncomms; i++) {
		fputs(i ? "," : "", f);
		write_comm(f, &g_comms[i]);
	}
	fputs("]}\n", f);
	truth_commit(f, tmp, g_opt.truth);
}

static long long num(const char *s, const char *opt, long long lo, long long hi)
{
	char *end, msg[128];
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || end == s || v < lo || v > hi) {
		snprintf(msg, sizeof(msg), "--%s: a number from %lld to %lld", opt, lo, hi);
		die_msg(msg);
	}
	return v;
}

static void usage(void)
{
	fprintf(stderr, "usage: gpujob --truth OUT.json [--steps N] [--cpu-us U] "
		"[--sync-us U] [--nccl-us U]\n  [--launches K] [--mode spin|sleep] "
		"[--threads N] [--comm-init [--rank R] [--nranks N]]\n  [--wait-ms M] "
		"[--loop-delay-ms D] [--dlopen DIR [--cudart NAME] [--cuda NAME] "
		"[--nccl NAME]]\n  [--wait-probes MS [--launch-probes]] [--loading] [--stall-at S]\n");
	exit(1);
}

static void parse_args(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "steps", 1, 0, 's' }, { "cpu-us", 1, 0, 'c' }, { "sync-us", 1, 0, 'y' },
		{ "nccl-us", 1, 0, 'n' }, { "launches", 1, 0, 'l' }, { "mode", 1, 0, 'm' },
		{ "threads", 1, 0, 't' }, { "comm-init", 0, 0, 'I' }, { "rank", 1, 0, 'r' },
		{ "nranks", 1, 0, 'R' }, { "wait-ms", 1, 0, 'w' },
		{ "loop-delay-ms", 1, 0, 'W' }, { "truth", 1, 0, 'o' },
		{ "dlopen", 1, 0, 'D' }, { "cudart", 1, 0, 'A' }, { "cuda", 1, 0, 'C' },
		{ "nccl", 1, 0, 'N' }, { "wait-probes", 1, 0, 'P' },
		{ "launch-probes", 0, 0, 'L' }, { "loading", 0, 0, 'G' },
		{ "stall-at", 1, 0, 'S' }, { "wait-file", 1, 0, 'F' }, { 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's': g_opt.steps = num(optarg, "steps", 0, 1000000); break;
		case 'c': g_opt.cpu_ns = 1000 * num(optarg, "cpu-us", 0, 10000000); break;
		case 'y': g_opt.sync_ns = 1000 * num(optarg, "sync-us", 0, 10000000); break;
		case 'n': g_opt.nccl_ns = 1000 * num(optarg, "nccl-us", 0, 10000000); break;
		case 'l': g_opt.launches = num(optarg, "launches", 0, 1000000); break;
		case 't': g_opt.threads = num(optarg, "threads", 1, MAX_THREADS); break;
		case 'I': g_opt.comm_init = 1; break;
		case 'r': g_opt.rank = num(optarg, "rank", 0, 1 << 20); break;
		case 'R': g_opt.nranks = num(optarg, "nranks", 1, 1 << 20); break;
		case 'w': g_opt.wait_ms = num(optarg, "wait-ms", 0, 3600000); break;
		case 'W': g_opt.loop_delay_ms = num(optarg, "loop-delay-ms", 0, 3600000); break;
		case 'o': g_opt.truth = optarg; break;
		case 'F': g_opt.wait_file = optarg; break;
		case 'D': g_opt.dir = optarg; break;
		case 'A': g_opt.cudart = optarg; break;
		case 'C': g_opt.cuda = optarg; break;
		case 'N': g_opt.nccl = optarg; break;
		case 'P': g_opt.wait_probes_ms = num(optarg, "wait-probes", 0, 3600000); break;
		case 'L': g_opt.launch_probes = 1; break;
		case 'G': g_opt.loading = 1; break;
		case 'S': g_opt.stall_at = num(optarg, "stall-at", 0, 1000000); break;
		case 'm':
			if (strcmp(optarg, "spin") && strcmp(optarg, "sleep"))
				die_msg("--mode must be spin or sleep");
			g_opt.sleep_mode = !strcmp(optarg, "sleep");
			break;
		default: usage();
		}
	}
	if (!g_opt.truth || optind != argc)
		usage();
	if (g_opt.rank >= g_opt.nranks)
		die_msg("--rank must be below --nranks");
	if (g_opt.stall_at >= 0 && !g_opt.comm_init)
		die_msg("--stall-at needs --comm-init");
}

int main(int argc, char **argv)
{
	struct thr *m = &g_thr[0];
	pthread_t loader;
	int mode;

	parse_args(argc, argv);
	if (g_opt.loading) {
		if (!g_opt.wait_probes_ms)
			die_msg("--loading needs --wait-probes");
		errno = pthread_create(&loader, NULL, keep_loading, NULL);
		if (errno)
			die("pthread_create");
	}
	sleep_ns(g_opt.wait_ms * 1000000LL);
	for (int i = 0; g_opt.wait_file && access(g_opt.wait_file, F_OK); i++) {
		if (i == 60000)
			die_msg("--wait-file: not there after 60 s");
		sleep_ns(1000000LL);
	}
	g_load_unix_ns = clock_ns(CLOCK_REALTIME);
	load();
	check(F.ncclGetVersion(&g_nccl_version), "ncclGetVersion");
	mode = g_opt.sleep_mode ? FAKE_SLEEP : FAKE_SPIN;
	F.fakecuda_set_block(mode, g_opt.sync_ns);
	F.fakenccl_set_block(mode, g_opt.nccl_ns);
	if (g_opt.wait_probes_ms)
		wait_probes();
	if (g_opt.loading) {
		g_probes_seen = 1;	/* or not in time: stop anyway */
		pthread_join(loader, NULL);
	}
	sleep_ns(g_opt.loop_delay_ms * 1000000LL);

	m->start_ns = mono_ns();
	comms_create(m);
	for (int i = 1; i < g_opt.threads; i++) {
		g_thr[i].index = i;
		errno = pthread_create(&g_thr[i].handle, NULL, loop, &g_thr[i]);
		if (errno)
			die("pthread_create");
	}
	loop(m);
	for (int i = 1; i < g_opt.threads; i++)
		pthread_join(g_thr[i].handle, NULL);
	comms_destroy(m);
	m->end_ns = mono_ns();
	write_truth();
	return 0;
}
