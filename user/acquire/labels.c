// SPDX-License-Identifier: BSD-3-Clause
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "labels.h"
#include "procfs.h"
#include "utf8.h"

#define LABEL_READS 4

/* The first of names set in env, as a number; -1 if none. */
static int env_int(const char *env, ssize_t len, const char *const *names)
{
	for (; *names; names++) {
		const char *v = procfs_env_get(env, len, *names);
		char *end;
		long n;

		if (!v)
			continue;
		n = strtol(v, &end, 10);
		if (end != v && !*end && n >= 0 && n < 1 << 24)
			return (int)n;
	}
	return -1;
}

int labels_pod_of(const char *cgroup, char *out, size_t len)
{
	const char *p = strstr(cgroup, "kubepods");
	size_t n = 0;

	/*
	 * cgroupfs: /kubepods/burstable/pod<uid>/<container>; systemd:
	 * /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid,
	 * '_' for '-'>.slice/... The uid follows "pod", never "pods".
	 */
	while (p && (p = strstr(p, "pod")) && !isxdigit((unsigned char)p[3]))
		p += 3;
	if (!p)
		return -1;
	p += 3;
	while (isxdigit((unsigned char)p[n]) || p[n] == '-' || p[n] == '_')
		n++;
	if (n < 8 || n + 5 > len)
		return -1;
	snprintf(out, len, "pod-%.*s", (int)n, p);
	for (char *c = out; *c; c++)
		if (*c == '_')
			*c = '-';
	return 0;
}

/*
 * A job id from the environment, else from the cgroup; "" if neither.
 * torchrun's run id is "none" unless --rdzv-id (or --standalone) gave
 * one: then the rendezvous address, the same on every node of the job.
 */
static void job_id_raw(const char *root, pid_t pid, const char *env, ssize_t len,
		       char *out, size_t olen)
{
	const char *run = procfs_env_get(env, len, "TORCHELASTIC_RUN_ID");
	const char *slurm = procfs_env_get(env, len, "SLURM_JOB_ID");
	const char *addr = procfs_env_get(env, len, "MASTER_ADDR");
	const char *port = procfs_env_get(env, len, "MASTER_PORT");
	char path[64], cg[4096];

	if (run && *run && strcmp(run, "none")) {
		snprintf(out, olen, "%s", run);
		return;
	}
	if (slurm && *slurm) {
		snprintf(out, olen, "slurm-%s", slurm);
		return;
	}
	if (addr && *addr && port && *port) {
		snprintf(out, olen, "%s:%s", addr, port);
		return;
	}
	out[0] = 0;
	snprintf(path, sizeof(path), "%s/%d/cgroup", root, pid);
	if (procfs_read_file(path, cg, sizeof(cg)) > 0)
		labels_pod_of(cg, out, olen);
}

/*
 * The job id as a label can carry it: valid UTF-8 whatever the bytes the
 * process set (a label that is not fails the node's whole scrape), cut on
 * a character's boundary, never mid-character.
 */
static void job_id(const char *root, pid_t pid, const char *env, ssize_t len,
		   char *out, size_t olen)
{
	char raw[4 * JOB_ID_LEN];

	job_id_raw(root, pid, env, len, raw, sizeof(raw));
	utf8_clean(out, olen, raw, sizeof(raw));
}

/* When the process started, in seconds since 1970, by /proc/stat's btime. */
static uint64_t start_unix(const char *root, pid_t pid)
{
	static unsigned long long btime;
	struct proc_stat st;
	char path[64], buf[8192], *b;

	if (!btime) {
		snprintf(path, sizeof(path), "%s/stat", root);
		if (procfs_read_file(path, buf, sizeof(buf)) > 0 && (b = strstr(buf, "\nbtime ")))
			btime = strtoull(b + 7, NULL, 10);
	}
	if (procfs_stat(pid, 0, &st) || !st.starttime)
		return 0;
	return btime + st.starttime / sysconf(_SC_CLK_TCK);
}

/*
 * Its effective uid, from its status (its /proc directory is root's when
 * it made itself undumpable: no way to pass for root); LABELS_NO_UID if
 * it is gone, which no one's series share.
 */
static unsigned int owner(const char *root, pid_t pid)
{
	char path[64], buf[4096], *u;
	unsigned int real, eff;

	snprintf(path, sizeof(path), "%s/%d/status", root, pid);
	if (procfs_read_file(path, buf, sizeof(buf)) < 0 || !(u = strstr(buf, "\nUid:")) ||
	    sscanf(u + 5, "%u %u", &real, &eff) != 2)
		return LABELS_NO_UID;
	return eff;
}

void labels_read(const char *root, pid_t pid, struct proc_labels *l)
{
	static const char *const rank[] = { "RANK", "SLURM_PROCID", NULL };
	static const char *const local[] = { "LOCAL_RANK", "SLURM_LOCALID", NULL };
	static const char *const world[] = { "WORLD_SIZE", "SLURM_NTASKS", NULL };
	char path[64], *env = malloc(65536);
	ssize_t n;

	l->reads++;
	if (!env)
		return;
	snprintf(path, sizeof(path), "%s/%d/environ", root, pid);
	n = procfs_read_file(path, env, 65536);
	if (n < 0)
		n = 0;
	l->uid = owner(root, pid);
	l->rank = env_int(env, n, rank);
	l->local_rank = env_int(env, n, local);
	l->world_size = env_int(env, n, world);
	job_id(root, pid, env, n, l->job, sizeof(l->job));
	if (!l->start_unix)
		l->start_unix = start_unix(root, pid);
	free(env);
}

void labels_refresh(struct job *job, const char *proc_root, bool trainers_only)
{
	for (int i = 0; i < job->nprocs; i++) {
		struct proc_rec *p = &job->procs[i];

		if (p->folded || !job_proc_alive(p) || p->labels.reads >= LABEL_READS ||
		    (trainers_only && p->role != TB_ROLE_TRAINER) ||
		    (p->labels.reads && p->labels.rank >= 0))
			continue;
		labels_read(proc_root, p->pid, &p->labels);
	}
}
