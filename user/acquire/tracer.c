// SPDX-License-Identifier: BSD-3-Clause
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "trainbpf.h"
#include "trainbpf.skel.h"
#include "clock.h"
#include "procfs.h"
#include "links.h"
#include "tracer.h"
#include "uprobe_multi.h"

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif
#define MAX_TIDS 8192
#define MAX_PROCS 65536

_Static_assert(sizeof(struct tb_slot) % 8 == 0, "array values are 8-aligned");
_Static_assert(TB_NCAT == 8, "BPF masks category indexes with TB_NCAT - 1");

static int libbpf_print(enum libbpf_print_level level, const char *fmt,
			va_list args)
{
	return vfprintf(stderr, fmt, args);
}

static int libbpf_quiet(enum libbpf_print_level level, const char *fmt,
			va_list args)
{
	return 0;
}

static bool has_caps(void)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2] = {};
	uint64_t eff;

	if (syscall(SYS_capget, &hdr, data))
		return false;
	eff = data[0].effective | (uint64_t)data[1].effective << 32;
	if (eff & (1ull << CAP_SYS_ADMIN))
		return true;
	return (eff & (1ull << CAP_BPF)) && (eff & (1ull << CAP_PERFMON));
}

static bool valid_btf(const char *path)
{
	struct btf *btf = btf__parse(path, NULL);

	if (!btf)
		return false;
	btf__free(btf);
	return true;
}

static int check_env(const struct tracer_opts *env)
{
	if (!has_caps()) {
		fprintf(stderr, "trainbpf: needs root (CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN): try sudo\n");
		return -1;
	}
	if (env->btf_path && access(env->btf_path, R_OK)) {
		fprintf(stderr, "trainbpf: cannot read BTF file %s: %s\n",
			env->btf_path, strerror(errno));
		return -1;
	}
	/* libbpf would only say "Unknown error 4001" at load time. */
	if (env->btf_path && !valid_btf(env->btf_path)) {
		fprintf(stderr, "trainbpf: %s is not a valid BTF file (raw BTF, or an ELF "
			"file with a .BTF section)\n", env->btf_path);
		return -1;
	}
	if (!env->btf_path && access("/sys/kernel/btf/vmlinux", R_OK)) {
		fprintf(stderr, "trainbpf: kernel has no BTF (/sys/kernel/btf/vmlinux missing; needs CONFIG_DEBUG_INFO_BTF): pass --btf FILE\n");
		return -1;
	}
	return 0;
}

static int fill_free_slots(struct tracer *tr)
{
	int fd = bpf_map__fd(tr->skel->maps.free_slots);

	/* A stack: pushing high indexes first hands out 0, 1, 2... */
	for (int i = (int)tr->nslots - 1; i >= 0; i--) {
		__u32 idx = i;

		if (bpf_map_update_elem(fd, NULL, &idx, 0))
			return -errno;
	}
	return 0;
}

static int handle_event(void *ctx, void *data, size_t len);
static int handle_exec(void *ctx, void *data, size_t len);

static int map_slots(struct tracer *tr)
{
	long page = sysconf(_SC_PAGESIZE);
	int fd = bpf_map__fd(tr->skel->maps.slots);

	tr->map_len = (sizeof(struct tb_slot) * tr->nslots + page - 1) / page * page;
	tr->slots = mmap(NULL, tr->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (tr->slots == MAP_FAILED) {
		tr->slots = NULL;
		return -errno;
	}
	tr->owner = calloc(tr->nslots, sizeof(*tr->owner));
	if (!tr->owner)
		return -ENOMEM;
	for (unsigned int i = 0; i < tr->nslots; i++)
		tr->owner[i].proc = -1;
	return 0;
}

/* CUDA/NCCL probes: one uprobe_multi link per file where the kernel has them. */
static void select_uprobe_programs(struct tracer *tr, const struct tracer_opts *env)
{
	struct bpf_program *multi[] = { tr->skel->progs.gpu_enter_multi,
		tr->skel->progs.gpu_exit_multi, tr->skel->progs.gpu_launch_multi,
		tr->skel->progs.torch_entry_multi, tr->skel->progs.torch_return_multi };

	tr->uprobe_multi = uprobe_multi_supported(env->btf_path);
	for (size_t i = 0; i < sizeof(multi) / sizeof(multi[0]); i++) {
		if (tr->uprobe_multi)
			bpf_program__set_expected_attach_type(multi[i], TB_BPF_TRACE_UPROBE_MULTI);
		else
			bpf_program__set_autoload(multi[i], false);
	}
}

/*
 * The write, mmap and checkpoint-file probes are syscall tracepoints: libbpf
 * finds their ids in tracefs, which this VM does not mount at boot. Without
 * it, no epoch markers or lines, libraries are probed at user space's next
 * look of the maps, and a checkpoint is torch.save alone (no fsync, close or
 * rename after it); the rest works.
 */
static bool tracefs_ready(void)
{
	static const char *const ids[] = {
		"/sys/kernel/tracing/events/syscalls/sys_enter_write/id",
		"/sys/kernel/debug/tracing/events/syscalls/sys_enter_write/id",
	};

	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
		if (!access(ids[i], R_OK))
			return true;
	if (mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL))
		return false;
	return !access(ids[0], R_OK);
}

/* In select_syscall_probes' list, the checkpoint files' programs come from here on. */
#define CKPT_PROGS 3

static void select_syscall_probes(struct tracer *tr, const struct tracer_opts *env)
{
	struct trainbpf_bpf *skel = tr->skel;
	struct bpf_program *progs[] = { skel->progs.on_write, skel->progs.on_mmap,
		skel->progs.on_mmap_done, skel->progs.on_fd_op, skel->progs.on_rename_op,
		skel->progs.on_open_op, skel->progs.on_ckpt_done };

	if (env->text)
		skel->rodata->tb_text_fds = 1u << 1 | 1u << 2;
	if (env->no_syscalls)
		goto none;
	/* --no-phases: no torch.save is seen, so no file to follow after it. */
	for (size_t i = CKPT_PROGS; env->no_phases && i < sizeof(progs) / sizeof(progs[0]); i++)
		bpf_program__set_autoload(progs[i], false);
	if (tracefs_ready())
		return;
	fprintf(stderr, "trainbpf: warning: no tracefs (mount -t tracefs nodev /sys/kernel/tracing): epoch markers and lines not seen, libraries probed at the next look only, a checkpoint's fsync not seen\n");
none:
	for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++)
		bpf_program__set_autoload(progs[i], false);
}

/*
 * --functions: the stack reader's branches and sampler (pystack.bpf.h).
 * Off, its maps shrink to one entry each: py_stacks alone is 8 MB.
 */
static void select_python_stacks(struct trainbpf_bpf *skel, uint64_t period_ns)
{
	skel->rodata->tb_py_stacks = period_ns != 0;
	skel->rodata->tb_py_period_ns = period_ns;
	bpf_program__set_autoload(skel->progs.py_sample, period_ns != 0);
	if (period_ns)
		return;
	bpf_map__set_max_entries(skel->maps.py_layouts, 1);
	bpf_map__set_max_entries(skel->maps.py_threads, 1);
	bpf_map__set_max_entries(skel->maps.py_stacks, 1);
	bpf_map__set_max_entries(skel->maps.py_time, 1);
}

/*
 * The checkpoint programs' other syscalls (bpf/ckpt_files.bpf.h: one
 * program a kind of call, its SEC's tracepoint the skeleton's attach, with
 * cookie 0), each with the cookie that tells the program which call it is
 * in. Not loaded (no tracefs, --no-syscalls, --no-phases): none. 0, or -1
 * with errno.
 */
static int ckpt_attach_more(struct tracer *tr)
{
	struct trainbpf_bpf *skel = tr->skel;
	struct bpf_program *fd_op = skel->progs.on_fd_op, *done = skel->progs.on_ckpt_done;
	const struct {
		struct bpf_program *prog;
		const char *tp;
		__u64 cookie;
	} more[TRACER_CKPT_MORE] = {
		{ fd_op, "sys_enter_pwrite64", 0 },
		{ fd_op, "sys_enter_fsync", TB_CK_SYNC },
		{ fd_op, "sys_enter_fdatasync", TB_CK_SYNC },
		{ fd_op, "sys_enter_sync_file_range", TB_CK_SYNC },
		{ fd_op, "sys_enter_close", TB_CK_CLOSE },
		{ skel->progs.on_rename_op, "sys_enter_renameat2", 0 },
		{ skel->progs.on_rename_op, "sys_enter_rename", TB_CKC_CWD },
		{ skel->progs.on_open_op, "sys_enter_open", TB_CKC_CWD },
		{ done, "sys_exit_writev", 0 }, { done, "sys_exit_pwrite64", 0 },
		{ done, "sys_exit_fsync", 0 }, { done, "sys_exit_fdatasync", 0 },
		{ done, "sys_exit_sync_file_range", 0 }, { done, "sys_exit_close", 0 },
		{ done, "sys_exit_rename", 0 }, { done, "sys_exit_renameat", 0 },
		{ done, "sys_exit_renameat2", 0 }, { done, "sys_exit_openat", 0 },
		{ done, "sys_exit_open", 0 },
	};

	for (int i = 0; i < TRACER_CKPT_MORE; i++) {
		LIBBPF_OPTS(bpf_tracepoint_opts, opts, .bpf_cookie = more[i].cookie);

		if (tr->ckpt_more[i] || bpf_program__fd(more[i].prog) < 0)
			continue;
		tr->ckpt_more[i] = bpf_program__attach_tracepoint_opts(more[i].prog, "syscalls",
								       more[i].tp, &opts);
		if (!tr->ckpt_more[i])
			return -1;
	}
	return 0;
}

static int load(struct tracer *tr, const struct tracer_opts *env)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .btf_custom_path = env->btf_path);
	struct trainbpf_bpf *skel;
	int err;

	skel = trainbpf_bpf__open_opts(&opts);
	if (!skel) {
		fprintf(stderr, "trainbpf: cannot open BPF object: %s\n", strerror(errno));
		return -1;
	}
	tr->skel = skel;
	tr->nslots = env->max_threads;
	bpf_map__set_max_entries(skel->maps.slots, tr->nslots);
	bpf_map__set_max_entries(skel->maps.free_slots, tr->nslots);
	bpf_map__set_max_entries(skel->maps.events, env->ringbuf_kb * 1024);
	tr->thread_quota = env->thread_quota;
	skel->rodata->tb_thread_quota = env->thread_quota;
	if (env->states) {
		skel->rodata->tb_stream_states = 1;
		skel->rodata->tb_scope_events = 1;
		bpf_map__set_max_entries(skel->maps.states, env->states_ring_kb * 1024);
	}
	select_uprobe_programs(tr, env);
	select_syscall_probes(tr, env);
	bpf_program__set_autoload(skel->progs.on_exec_watch, env->watch_execs);
	select_python_stacks(skel, env->py_period_ns);
	err = trainbpf_bpf__load(skel);
	if (err) {
		fprintf(stderr, "trainbpf: cannot load BPF programs: %s%s\n", strerror(-err),
			env->verbose ? "" : " (run with -v for the verifier log)");
		return -1;
	}
	err = map_slots(tr);
	if (!err)
		err = fill_free_slots(tr);
	if (err) {
		fprintf(stderr, "trainbpf: cannot set up the slot map: %s\n", strerror(-err));
		return -1;
	}
	return 0;
}

int tracer_open(struct tracer *tr, const struct tracer_opts *env, struct job *job)
{
	memset(tr, 0, sizeof(*tr));
	tr->job = job;
	tr->on_event = env->on_event;
	tr->ctx = env->ctx;
	libbpf_set_print(env->verbose ? libbpf_print : libbpf_quiet);
	if (check_env(env) || load(tr, env))
		return -1;
	tr->rb = ring_buffer__new(bpf_map__fd(tr->skel->maps.events),
				  handle_event, tr, NULL);
	if (!tr->rb || (env->watch_execs &&
			ring_buffer__add(tr->rb, bpf_map__fd(tr->skel->maps.execs), handle_exec, tr))) {
		fprintf(stderr, "trainbpf: cannot open the event ring buffer: %s\n", strerror(errno));
		return -1;
	}
	if (trainbpf_bpf__attach(tr->skel) || ckpt_attach_more(tr)) {
		fprintf(stderr, "trainbpf: cannot attach to the scheduler tracepoints: %s\n",
			strerror(errno));
		return -1;
	}
	return 0;
}

void tracer_close(struct tracer *tr)
{
	ring_buffer__free(tr->rb);
	if (tr->slots)
		munmap(tr->slots, tr->map_len);
	/*
	 * The skeleton's links first, all at once (links.c: one after another,
	 * the syscall tracepoints' detaches alone took 1.2 s at every exit);
	 * destroying the skeleton then has none left to detach.
	 */
	if (tr->skel) {
		struct bpf_link *all[sizeof(tr->skel->links) / sizeof(struct bpf_link *) +
				     TRACER_CKPT_MORE];
		size_t nskel = sizeof(tr->skel->links) / sizeof(struct bpf_link *);

		memcpy(all, &tr->skel->links, sizeof(tr->skel->links));
		memcpy(all + nskel, tr->ckpt_more, sizeof(tr->ckpt_more));
		links_destroy(all, nskel + TRACER_CKPT_MORE);
		memset(&tr->skel->links, 0, sizeof(tr->skel->links));
		memset(tr->ckpt_more, 0, sizeof(tr->ckpt_more));
	}
	trainbpf_bpf__destroy(tr->skel);
	free(tr->paused);
	free(tr->owner);
	free(tr->open);
	memset(tr, 0, sizeof(*tr));
}

static int pop_slot(struct tracer *tr, __u32 *idx)
{
	return bpf_map_lookup_and_delete_elem(bpf_map__fd(tr->skel->maps.free_slots),
					      NULL, idx);
}

/*
 * The threads of pid that user space gave a slot, still holding it: BPF
 * reads it at each fork (over_quota), only user space writes it.
 */
static __u32 found_threads(const struct tracer *tr, __u32 pid)
{
	__u32 n = 0;

	bpf_map_lookup_elem(bpf_map__fd(tr->skel->maps.proc_found), &pid, &n);
	return n;
}

static void set_found_threads(struct tracer *tr, __u32 pid, __u32 n)
{
	int fd = bpf_map__fd(tr->skel->maps.proc_found);

	if (n)
		bpf_map_update_elem(fd, &pid, &n, BPF_ANY);
	else
		bpf_map_delete_elem(fd, &pid);
}

/* Whether pid holds its share of the slots (tb_thread_quota: serve). */
static bool at_quota(const struct tracer *tr, __u32 pid)
{
	__s64 forked = 0;

	if (!tr->thread_quota)
		return false;
	bpf_map_lookup_elem(bpf_map__fd(tr->skel->maps.proc_forked), &pid, &forked);
	return forked + found_threads(tr, pid) >= tr->thread_quota;
}

void tracer_free_slot(struct tracer *tr, unsigned int idx)
{
	__u32 i = idx, pid = tr->slots[idx].tgid, n;

	if (tr->owner[idx].found && (n = found_threads(tr, pid)))
		set_found_threads(tr, pid, n - 1);
	memset(&tr->slots[idx], 0, sizeof(tr->slots[idx]));
	tr->owner[idx].proc = -1;
	tr->owner[idx].exited_at = 0;
	tr->owner[idx].found = false;
	bpf_map_update_elem(bpf_map__fd(tr->skel->maps.free_slots), NULL, &i, 0);
}

/* Hands a running thread a slot, then task storage pointing at it. */
static int add_thread(struct tracer *tr, struct proc_rec *p, pid_t tid)
{
	struct tb_task val = {};
	struct proc_stat st;
	struct thread_rec *t;
	struct tb_slot *s;
	uint64_t now = now_ns();
	__u32 idx;
	int pidfd, err;

	if (procfs_stat(p->pid, tid, &st))
		return -ESRCH;
	if (at_quota(tr, p->pid)) {
		tr->slots_exhausted++;	/* as BPF counts a fork past the share */
		return -EDQUOT;
	}
	if (pop_slot(tr, &idx)) {
		tr->slots_exhausted++;	/* as BPF counts a fork that finds none */
		return -ENOSPC;
	}
	s = &tr->slots[idx];
	s->tid = tid;
	s->tgid = p->pid;
	s->state = TB_ST_UNKNOWN;
	s->start_ns = s->since = s->last_in = now;
	for (int i = 0; i < TB_NCKPT; i++)
		s->ckpt[i].ts = now;	/* counters at zero when tracing began */
	{
		uint64_t rb = 0, wb = 0;

		procfs_io(p->pid, tid, &rb, &wb);
		s->io_rbase = rb;
		s->io_wbase = wb;
	}
	memcpy(s->comm, st.comm, sizeof(s->comm));
	val.slot = idx;
	pidfd = syscall(SYS_pidfd_open, tid, tid == p->pid ? 0 : PIDFD_THREAD);
	err = pidfd < 0 ? -errno : 0;
	if (!err && bpf_map_update_elem(bpf_map__fd(tr->skel->maps.tasks), &pidfd,
					&val, BPF_NOEXIST))
		err = -errno;	/* EEXIST: BPF saw it being born */
	if (pidfd >= 0)
		close(pidfd);
	if (err) {
		tracer_free_slot(tr, idx);
		return err;
	}
	t = job_add_thread(p, tid, st.comm, now);
	t->slot = idx;
	t->found = true;
	procfs_schedstat(p->pid, tid, &t->base_cpu, &t->base_rq);
	tr->owner[idx].proc = p - tr->job->procs;
	tr->owner[idx].thread = t - p->threads;
	if (tr->thread_quota) {
		tr->owner[idx].found = true;
		set_found_threads(tr, p->pid, found_threads(tr, p->pid) + 1);
	}
	if (idx >= tr->scan_end)
		tr->scan_end = idx + 1;
	return 0;
}

static bool thread_known(const struct proc_rec *p, pid_t tid)
{
	for (int i = 0; i < p->nthreads; i++)
		if (p->threads[i].tid == tid && !p->threads[i].end_ns)
			return true;
	return false;
}

void tracer_on_exec(struct tracer *tr, pid_t pid)
{
	struct proc_rec *p = job_proc(tr->job, pid);

	if (p && !p->root && procfs_mp_spawned(pid))
		p->flags |= JOB_PF_MP_SPAWNED;
}

/* Out of descriptors or memory: to be said, not taken for an exit. */
static bool out_of(int err)
{
	return err == EMFILE || err == ENFILE || err == ENOMEM;
}

int tracer_add_process(struct tracer *tr, pid_t pid, bool root)
{
	static pid_t tids[MAX_TIDS];
	struct tb_proc bp = { .role = TB_ROLE_OTHER };
	struct proc_stat st;
	struct proc_rec *p;
	bool added = true;
	int pi, err, code;

	if (tracer_hooks_resume(tr))
		return -EAGAIN;
	errno = 0;
	if (procfs_stat(pid, 0, &st))
		return out_of(errno) ? -errno : -ESRCH;
	/* A target that is a zombie ended before its probes; a child is the job's */
	if (root && procfs_exited(pid, &code))
		return -ESRCH;
	p = job_proc(tr->job, pid);
	if (!p) {
		p = job_add_proc(tr->job, pid, st.ppid, st.comm, now_ns());
		p->root = root;
		if (!root && procfs_same_cmdline(pid, st.ppid)) {
			bp.role = TB_ROLE_WORKER;
			bp.flags = TB_PF_FORKED;
		}
		p->flags = bp.flags;
		if (!root && !bp.flags && procfs_mp_spawned(pid))
			p->flags |= JOB_PF_MP_SPAWNED;
		bpf_map_update_elem(bpf_map__fd(tr->skel->maps.procs), &pid, &bp, BPF_NOEXIST);
	}
	pi = p - tr->job->procs;
	/* Threads born from a thread not yet traced are missed: scan again. */
	while (added) {
		int n = procfs_tasks(pid, tids, MAX_TIDS);

		if (n < 0 && out_of(errno))
			return -errno;
		added = false;
		for (int i = 0; i < n; i++) {
			p = &tr->job->procs[pi];
			if (thread_known(p, tids[i]))
				continue;
			err = add_thread(tr, p, tids[i]);
			if (!err)
				added = true;
			else if (out_of(-err))
				return err;
		}
	}
	return 0;
}

static bool traced_pid(const struct job *job, pid_t pid)
{
	const struct proc_rec *p = job_proc_const(job, pid);

	return p && job_proc_alive(p);
}

void tracer_add_descendants(struct tracer *tr)
{
	pid_t *pids = malloc(sizeof(pid_t) * MAX_PROCS);
	pid_t *ppids = malloc(sizeof(pid_t) * MAX_PROCS);
	bool added = true;

	if (!pids || !ppids)
		abort();
	while (added) {
		int n = procfs_all(pids, ppids, MAX_PROCS);

		added = false;
		for (int i = 0; i < n; i++) {
			if (traced_pid(tr->job, pids[i]) ||
			    !traced_pid(tr->job, ppids[i]))
				continue;
			if (!tracer_add_process(tr, pids[i], false))
				added = true;
		}
	}
	free(pids);
	free(ppids);
}

static int handle_event(void *ctx, void *data, size_t len)
{
	struct tracer *tr = ctx;
	const struct tb_event *e = data;
	struct tracer_event ev;
	__u32 type;

	if (len < sizeof(type))
		return 0;
	type = *(const __u32 *)data;
	if (type == TB_EV_CALL && len >= sizeof(struct tb_call_event))
		ev = (struct tracer_event){ .kind = TR_EV_CALL, .call = data };
	else if ((type == TB_EV_NCCL_COMM || type == TB_EV_NCCL_DESTROY) &&
		 len >= sizeof(struct tb_comm_event))
		ev = (struct tracer_event){ .kind = TR_EV_COMM, .comm = data };
	else if (type == TB_EV_PHASE && len >= sizeof(struct tb_phase_event))
		ev = (struct tracer_event){ .kind = TR_EV_PHASE, .phase = data };
	else if (type == TB_EV_SCOPE && len >= sizeof(struct tb_scope_event))
		ev = (struct tracer_event){ .kind = TR_EV_SCOPE, .scope = data };
	else if ((type == TB_EV_MARK || type == TB_EV_TEXT) &&
		 len >= sizeof(struct tb_text_event))
		ev = (struct tracer_event){ .kind = TR_EV_TEXT, .text = data };
	else if (type >= TB_EV_FORK && type <= TB_EV_EXIT && len >= sizeof(*e))
		ev = (struct tracer_event){ .kind = TR_EV_LIFECYCLE, .life = e };
	else if (type == TB_EV_LIBRARY && len >= sizeof(*e))
		ev = (struct tracer_event){ .kind = TR_EV_LIBRARY, .life = e };
	else
		return 0;
	tr->on_event(tr->ctx, &ev);
	return 0;
}

static int handle_exec(void *ctx, void *data, size_t len)
{
	struct tracer *tr = ctx;
	struct tracer_event ev = { .kind = TR_EV_EXEC_SEEN };

	if (len < sizeof(__u32))
		return 0;
	ev.pid = *(const __u32 *)data;
	tr->on_event(tr->ctx, &ev);
	return 0;
}

int tracer_hooks_pause(struct tracer *tr)
{
	const struct bpf_object_skeleton *sk = tr->skel->skeleton;
	struct bpf_link **links;
	int n = 0;

	if (tr->paused)
		return 0;
	tr->paused = calloc(sk->prog_cnt, sizeof(*tr->paused));
	links = calloc(sk->prog_cnt + TRACER_CKPT_MORE, sizeof(*links));
	if (!tr->paused || !links) {
		free(tr->paused);
		tr->paused = NULL;
		free(links);
		fprintf(stderr, "trainbpf: cannot pause the hooks: out of memory\n");
		return -1;
	}
	for (int i = 0; i < sk->prog_cnt; i++) {
		struct bpf_link **link = sk->progs[i].link;

		if (!*link || *sk->progs[i].prog == tr->skel->progs.on_exec_watch)
			continue;
		links[n++] = *link;
		*link = NULL;
		tr->paused[i] = true;
	}
	for (int i = 0; i < TRACER_CKPT_MORE; i++) {
		if (tr->ckpt_more[i])
			links[n++] = tr->ckpt_more[i];
		tr->ckpt_more[i] = NULL;
	}
	links_destroy(links, n);
	free(links);
	return 0;
}

/* In the skeleton's order, as the first attach: a timer's exit mark before its entry's. */
int tracer_hooks_resume(struct tracer *tr)
{
	const struct bpf_object_skeleton *sk = tr->skel->skeleton;

	if (!tr->paused)
		return 0;
	for (int i = 0; i < sk->prog_cnt; i++) {
		struct bpf_link *link;

		if (!tr->paused[i])
			continue;
		link = bpf_program__attach(*sk->progs[i].prog);
		if (!link) {
			fprintf(stderr, "trainbpf: cannot attach %s again: %s\n",
				sk->progs[i].name, strerror(errno));
			return -1;	/* the ones attached stay; the next add tries the rest */
		}
		*sk->progs[i].link = link;
		tr->paused[i] = false;
	}
	if (ckpt_attach_more(tr)) {
		fprintf(stderr, "trainbpf: cannot attach the checkpoint syscalls again: %s\n",
			strerror(errno));
		return -1;	/* as above: the next add tries the rest */
	}
	free(tr->paused);
	tr->paused = NULL;
	return 0;
}

void tracer_wait(struct tracer *tr, int ms)
{
	/* Drains what is there too; EINTR on a signal is what we want. */
	ring_buffer__poll(tr->rb, ms);
}

int tracer_drain_events(struct tracer *tr)
{
	return ring_buffer__consume(tr->rb);
}

static bool read_once(volatile struct tb_slot *s, struct tb_slot *out, bool *ok)
{
	__u32 seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);

	if (seq & 1)
		return false;
	memcpy(out, (const void *)s, sizeof(*out));
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) != seq)
		return false;
	*ok = out->state != TB_ST_FREE;
	return true;
}

/*
 * A slot BPF is writing through all the tries keeps its thread's totals of
 * the last refresh (thread_rec.read_ns says so; its row waits a flush).
 * Waiting longer (yielding up to 1 ms) coincided with two CI failures of
 * test_even_ranks_are_silent: the ranks' slots are written at every switch.
 */
bool tracer_read_slot(const struct tracer *tr, unsigned int idx,
		      struct tb_slot *out)
{
	volatile struct tb_slot *s = &tr->slots[idx];
	bool ok;

	for (int tries = 0; tries < 100; tries++)
		if (read_once(s, out, &ok))
			return ok;
	return false;
}

void tracer_set_role(struct tracer *tr, pid_t pid, enum tb_role role)
{
	int fd = bpf_map__fd(tr->skel->maps.procs);
	struct tb_proc bp;

	if (bpf_map_lookup_elem(fd, &pid, &bp))
		bp.flags = 0;
	bp.role = role;
	bpf_map_update_elem(fd, &pid, &bp, BPF_ANY);
}

void tracer_on_fold(struct tracer *tr, const struct job_fold *f)
{
	for (unsigned int i = 0; i < tr->scan_end; i++) {
		struct slot_owner *o = &tr->owner[i];

		if (o->proc < 0 || o->proc >= f->nold)
			continue;
		o->thread = f->thr_to[f->thr_off[o->proc] + o->thread];
		o->proc = f->to[o->proc];
	}
}

void tracer_forget_process(struct tracer *tr, pid_t pid)
{
	bpf_map_delete_elem(bpf_map__fd(tr->skel->maps.procs), &pid);
	bpf_map_delete_elem(bpf_map__fd(tr->skel->maps.proc_forked), &pid);
	bpf_map_delete_elem(bpf_map__fd(tr->skel->maps.proc_found), &pid);
}

unsigned int tracer_proc_flags(const struct tracer *tr, pid_t pid)
{
	struct tb_proc bp;

	if (bpf_map_lookup_elem(bpf_map__fd(tr->skel->maps.procs), &pid, &bp))
		return 0;
	return bp.flags;
}

void tracer_counters(const struct tracer *tr, struct tb_counters *out)
{
	memcpy(out, (const void *)&tr->skel->bss->counters, sizeof(*out));
	/* Threads found running (at an attach, a discovery) that found no slot. */
	out->slots_exhausted += tr->slots_exhausted;
}
