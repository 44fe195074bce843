// SPDX-License-Identifier: BSD-3-Clause
/*
 * `trainbpf dump`: the processes named and their descendants read from
 * /proc into a snapshot (model/snapshot.h). Nothing is attached, written
 * or signalled; no process outside that tree is read but for its parent
 * link (procfs_all) and our own scheduler clock.
 *
 * How long a sleeping thread has slept: the kernel stamps se.exec_start
 * (/proc/PID/task/TID/sched) with its runqueue's task clock when the
 * thread last ran. The same clock now is our own exec_start just after a
 * sched_yield, read on that thread's last CPU (the task clock is per CPU:
 * it leaves out a CPU's interrupt and steal time where the kernel counts
 * them, so two CPUs' may differ).
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "clock.h"
#include "labels.h"
#include "procfs.h"
#include "snapshot.h"
#include "snapshot_read.h"
#include "syscall_class.h"

#define SNAP_MAX_SCAN 65536
#define SNAP_MAX_CPUS 1024

struct reader {
	struct snapshot *s;
	pid_t *pids, *ppids;	/* every process on the machine, for the tree */
	int n;
	double now_ms[SNAP_MAX_CPUS];	/* our task clock on each CPU; 0: not read yet */
	bool pinned_failed;
};

/* "se.exec_start : 123.456789" of a sched file, in ms; -1 if absent. */
static double exec_start_ms(const char *path)
{
	char buf[8192], *at;

	if (procfs_read_file(path, buf, sizeof(buf)) < 0 || !(at = strstr(buf, "se.exec_start")) ||
	    !(at = strchr(at, ':')))
		return -1;
	return strtod(at + 1, NULL);
}

/* Our task clock on cpu now, pinned there for the read; any CPU's if we cannot be. */
static double now_on(struct reader *rd, int cpu)
{
	cpu_set_t one, old;

	if (cpu < 0 || cpu >= SNAP_MAX_CPUS)
		cpu = 0;
	if (rd->now_ms[cpu] > 0)
		return rd->now_ms[cpu];
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	if (sched_getaffinity(0, sizeof(old), &old) ||
	    sched_setaffinity(0, sizeof(one), &one))
		rd->pinned_failed = true;
	sched_yield();	/* a switch updates our exec_start: now, on this CPU */
	rd->now_ms[cpu] = exec_start_ms("/proc/self/sched");
	sched_setaffinity(0, sizeof(old), &old);
	return rd->now_ms[cpu];
}

static void read_thread(struct reader *rd, pid_t pid, struct snap_thread *t)
{
	struct proc_stat st;
	char path[96];
	uint64_t rq;
	double then;

	if (!procfs_stat(pid, t->tid, &st)) {
		memcpy(t->comm, st.comm, sizeof(t->comm));
		t->state = st.state;
	}
	procfs_schedstat(pid, t->tid, &t->cpu_ns, &rq);
	t->syscall = t->state == 'R' ? -1 : procfs_syscall(pid, t->tid, &t->arg0);
	t->wait = t->syscall >= 0 ? tb_syscall_wait(t->syscall) : TB_W_OTHER;
	if (t->wait == TB_W_FD) {
		t->wait = procfs_fd_wait(pid, t->arg0);
		procfs_fd_target(pid, t->arg0, t->target, sizeof(t->target));
	}
	snprintf(path, sizeof(path), "/proc/%d/task/%d/wchan", pid, t->tid);
	if (t->state != 'R' && procfs_read_file(path, t->wchan, sizeof(t->wchan)) < 0)
		t->wchan[0] = '\0';
	if (!strcmp(t->wchan, "0"))
		t->wchan[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/task/%d/sched", pid, t->tid);
	then = t->state == 'R' ? -1 : exec_start_ms(path);
	if (then >= 0) {
		double now = now_on(rd, (int)procfs_stat_field(pid, t->tid, 39));

		t->waited_ns = now > then ? (uint64_t)((now - then) * 1e6) : 0;
	}
}

static int add_proc(struct reader *rd, pid_t pid, pid_t ppid, bool root)
{
	static pid_t tids[SNAP_MAX_THREADS];
	struct proc_labels labels = { 0 };
	struct snapshot *s = rd->s;
	struct proc_stat st;
	struct snap_proc *p;
	int n;

	if (s->nprocs >= SNAP_MAX_PROCS) {
		s->procs_over++;
		return 0;
	}
	if (procfs_stat(pid, 0, &st) || (n = procfs_tasks(pid, tids, SNAP_MAX_THREADS)) < 0)
		return 0;	/* gone meanwhile */
	p = &s->procs[s->nprocs++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->ppid = ppid;
	memcpy(p->comm, st.comm, sizeof(p->comm));
	labels_read("/proc", pid, &labels);
	p->rank = labels.rank;
	p->role = root ? SNAP_ROOT : procfs_mp_spawned(pid) ? SNAP_SPAWNED :
		  procfs_same_cmdline(pid, ppid) ? SNAP_FORKED : SNAP_CHILD;
	p->threads = calloc(n ? n : 1, sizeof(*p->threads));
	if (!p->threads)
		return -ENOMEM;
	p->threads_over = n == SNAP_MAX_THREADS;
	for (int i = 0; i < n; i++) {
		p->threads[i].tid = tids[i];
		read_thread(rd, pid, &p->threads[i]);
	}
	p->nthreads = n;
	return 0;
}

/* pid's descendants, depth first, after it. */
static int add_tree(struct reader *rd, pid_t pid, pid_t ppid, bool root, int depth)
{
	int err = add_proc(rd, pid, ppid, root);

	for (int i = 0; !err && depth < 64 && i < rd->n; i++)
		if (rd->ppids[i] == pid && rd->pids[i] != pid)
			err = add_tree(rd, rd->pids[i], pid, false, depth + 1);
	return err;
}

static bool listed(const struct snapshot *s, pid_t pid)
{
	for (int i = 0; i < s->nprocs; i++)
		if (s->procs[i].pid == pid)
			return true;
	return false;
}

int snapshot_take(struct snapshot *s, const pid_t *roots, int nroots, char *err, size_t errlen)
{
	struct reader rd = { .s = s };
	uint64_t t0 = now_ns();
	struct timespec rt;
	int rc = 0;

	memset(s, 0, sizeof(*s));
	clock_gettime(CLOCK_REALTIME, &rt);
	s->taken_unix_s = rt.tv_sec + rt.tv_nsec / 1e9;
	rd.pids = malloc(sizeof(pid_t) * SNAP_MAX_SCAN);
	rd.ppids = malloc(sizeof(pid_t) * SNAP_MAX_SCAN);
	s->procs = calloc(SNAP_MAX_PROCS, sizeof(*s->procs));
	if (!rd.pids || !rd.ppids || !s->procs) {
		snprintf(err, errlen, "out of memory");
		rc = -1;
		goto cleanup;
	}
	rd.n = procfs_all(rd.pids, rd.ppids, SNAP_MAX_SCAN);
	for (int i = 0; !rc && i < nroots; i++) {
		struct proc_stat st;

		if (listed(s, roots[i]))
			continue;	/* named twice, or a descendant of one named */
		if (procfs_stat(roots[i], 0, &st)) {
			snprintf(err, errlen, "no process %d", roots[i]);
			rc = -1;
		} else if (add_tree(&rd, roots[i], st.ppid, true, 0)) {
			snprintf(err, errlen, "out of memory");
			rc = -1;
		}
	}
	s->read_ns = now_ns() - t0;
cleanup:
	free(rd.pids);
	free(rd.ppids);
	if (rc)
		snapshot_free(s);
	return rc;
}
