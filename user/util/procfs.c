// SPDX-License-Identifier: BSD-3-Clause
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "procfs.h"
#include "trainbpf.h"

#define PF_KTHREAD 0x00200000

static int task_path(char *buf, size_t len, pid_t pid, pid_t tid,
		     const char *file)
{
	int n = tid ? snprintf(buf, len, "/proc/%d/task/%d/%s", pid, tid, file)
		    : snprintf(buf, len, "/proc/%d/%s", pid, file);

	return n < 0 || (size_t)n >= len ? -1 : 0;
}

ssize_t procfs_read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = 0;
	return n;
}

int procfs_stat(pid_t pid, pid_t tid, struct proc_stat *st)
{
	char path[64], buf[1024], *open_paren, *close_paren;
	size_t n;

	if (task_path(path, sizeof(path), pid, tid, "stat") ||
	    procfs_read_file(path, buf, sizeof(buf)) < 0)
		return -1;
	/* comm may hold spaces and parentheses: it ends at the last ')'. */
	open_paren = strchr(buf, '(');
	close_paren = strrchr(buf, ')');
	if (!open_paren || !close_paren || close_paren < open_paren)
		return -1;
	n = close_paren - open_paren - 1;
	if (n >= sizeof(st->comm))
		n = sizeof(st->comm) - 1;
	memcpy(st->comm, open_paren + 1, n);
	st->comm[n] = 0;
	st->starttime = 0;
	/* state ppid pgrp session tty tpgid flags, 10 more, starttime (22) */
	if (sscanf(close_paren + 2, "%c %d %*d %*d %*d %*d %u %*u %*u %*u %*u %*u %*u "
		   "%*d %*d %*d %*d %*d %*d %llu", &st->state, &st->ppid, &st->flags,
		   &st->starttime) < 3)
		return -1;
	return 0;
}

long procfs_stat_field(pid_t pid, pid_t tid, int field)
{
	char path[64], buf[1024], *at;
	int n = 2;

	if (field < 3 || task_path(path, sizeof(path), pid, tid, "stat") ||
	    procfs_read_file(path, buf, sizeof(buf)) < 0 || !(at = strrchr(buf, ')')))
		return -1;
	while (n < field && (at = strchr(at + 1, ' ')))
		n++;
	return at ? atol(at + 1) : -1;
}

/* Field 52 of /proc/PID/stat (Linux 3.5+), the exit status; -1 if unread. */
static int stat_exit_code(pid_t pid)
{
	return (int)procfs_stat_field(pid, 0, 52);
}

bool procfs_same_cmdline(pid_t a, pid_t b)
{
	char x[4096], y[4096];
	int nx = procfs_cmdline(a, x, sizeof(x)), ny = procfs_cmdline(b, y, sizeof(y));

	return nx > 0 && nx == ny && !memcmp(x, y, nx);
}

bool procfs_mp_spawned(pid_t pid)
{
	static const char mark[] = "--multiprocessing-fork";
	char a[4096];
	int n = procfs_cmdline(pid, a, sizeof(a) - 1);

	a[n > 0 ? n : 0] = '\0';
	for (int i = 0; i < n; i += strlen(a + i) + 1)
		if (!strcmp(a + i, mark))
			return true;
	return false;
}

bool procfs_exited(pid_t pid, int *code)
{
	struct proc_stat st;
	pid_t tids[2];

	*code = -1;
	errno = 0;
	if (procfs_stat(pid, 0, &st))
		return errno == ENOENT || errno == ESRCH;
	if (st.state != 'Z' && st.state != 'X')
		return false;
	if (procfs_tasks(pid, tids, 2) > 1)
		return false;
	*code = stat_exit_code(pid);
	return true;
}

bool procfs_is_kthread(const struct proc_stat *st)
{
	return st->flags & PF_KTHREAD;
}

pid_t procfs_tgid(pid_t tid)
{
	char path[64], buf[4096], *at;

	snprintf(path, sizeof(path), "/proc/%d/status", tid);
	if (procfs_read_file(path, buf, sizeof(buf)) < 0)
		return -1;
	at = strstr(buf, "\nTgid:");
	return at ? (pid_t)atoi(at + 6) : -1;
}

int procfs_schedstat(pid_t pid, pid_t tid, uint64_t *cpu_ns, uint64_t *rq_ns)
{
	char path[64], buf[128];
	unsigned long long cpu, rq;

	if (task_path(path, sizeof(path), pid, tid, "schedstat") ||
	    procfs_read_file(path, buf, sizeof(buf)) < 0 ||
	    sscanf(buf, "%llu %llu", &cpu, &rq) != 2)
		return -1;
	*cpu_ns = cpu;
	*rq_ns = rq;
	return 0;
}

int procfs_io(pid_t pid, pid_t tid, uint64_t *rbytes, uint64_t *wbytes)
{
	char path[64], buf[512], *p;

	if (task_path(path, sizeof(path), pid, tid, "io") ||
	    procfs_read_file(path, buf, sizeof(buf)) < 0)
		return -1;
	p = strstr(buf, "\nread_bytes:");
	*rbytes = p ? strtoull(p + 12, NULL, 10) : 0;
	p = strstr(buf, "\nwrite_bytes:");
	*wbytes = p ? strtoull(p + 13, NULL, 10) : 0;
	return 0;
}

long procfs_syscall(pid_t pid, pid_t tid, long *arg0)
{
	char path[64], buf[256];
	long nr;
	unsigned long a0 = 0;

	if (task_path(path, sizeof(path), pid, tid, "syscall") ||
	    procfs_read_file(path, buf, sizeof(buf)) < 0 || !isdigit(buf[0]))
		return -1;	/* "running", or "-1 ..." outside a syscall */
	if (sscanf(buf, "%ld %lx", &nr, &a0) < 1)
		return -1;
	*arg0 = (long)a0;
	return nr;
}

/* Is inode a unix socket in pid's network namespace? (local IPC) */
static bool unix_socket(pid_t pid, unsigned long inode)
{
	char path[64], line[512];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/net/unix", pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned long ino;

		/* Num RefCount Protocol Flags Type St Inode Path */
		found = sscanf(line, "%*s %*s %*s %*s %*s %*s %lu", &ino) == 1 &&
			ino == inode;
	}
	fclose(f);
	return found;
}

int procfs_fd_target(pid_t pid, long fd, char *out, size_t len)
{
	char path[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/fd/%ld", pid, fd);
	n = readlink(path, out, len - 1);	/* the link itself, never followed */
	out[n > 0 ? n : 0] = 0;
	return n > 0 ? 0 : -1;
}

unsigned int procfs_fd_wait(pid_t pid, long fd)
{
	char target[256];

	if (procfs_fd_target(pid, fd, target, sizeof(target)))
		return TB_W_OTHER;
	if (target[0] == '/')
		return TB_W_FILE;
	if (!strncmp(target, "socket:[", 8))
		return unix_socket(pid, strtoul(target + 8, NULL, 10)) ?
			TB_W_PIPE : TB_W_SOCKET;
	return TB_W_PIPE;
}

int procfs_tasks(pid_t pid, pid_t *tids, int max)
{
	char path[64];
	struct dirent *de;
	DIR *dir;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	dir = opendir(path);
	if (!dir)
		return -1;
	while ((de = readdir(dir)) && n < max)
		if (isdigit(de->d_name[0]))
			tids[n++] = atoi(de->d_name);
	closedir(dir);
	return n;
}

int procfs_cmdline(pid_t pid, char *buf, size_t len)
{
	char path[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
	n = procfs_read_file(path, buf, len);
	return n < 0 ? -1 : (int)n;
}

const char *procfs_env_get(const char *env, ssize_t len, const char *name)
{
	size_t n = strlen(name);

	for (ssize_t i = 0; i < len; i += strnlen(env + i, len - i) + 1)
		if (!strncmp(env + i, name, n) && env[i + n] == '=')
			return env + i + n + 1;
	return NULL;
}

int procfs_all(pid_t *pids, pid_t *ppids, int max)
{
	struct dirent *de;
	struct proc_stat st;
	DIR *dir = opendir("/proc");
	int n = 0;

	if (!dir)
		return -1;
	while ((de = readdir(dir)) && n < max) {
		if (!isdigit(de->d_name[0]))
			continue;
		pids[n] = atoi(de->d_name);
		if (procfs_stat(pids[n], 0, &st))
			continue;	/* exited meanwhile */
		ppids[n++] = st.ppid;
	}
	closedir(dir);
	return n;
}


uint64_t procfs_code_kb(pid_t pid)
{
	char path[64], line[128];
	unsigned long long kb;
	uint64_t sum = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmExe: %llu", &kb) == 1 ||
		    sscanf(line, "VmLib: %llu", &kb) == 1)
			sum += kb;
	fclose(f);
	return sum;
}

int procfs_parse_meminfo(const char *text, uint64_t *total_kb, uint64_t *avail_kb)
{
	const char *t = strstr(text, "MemTotal:"), *a = strstr(text, "MemAvailable:");

	if (!t || !a)
		return -1;
	*total_kb = strtoull(t + 9, NULL, 10);
	*avail_kb = strtoull(a + 13, NULL, 10);
	return *total_kb ? 0 : -1;
}

int procfs_nspid(pid_t pid, pid_t *out, int max)
{
	char path[64], line[256];
	int n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *p = line + 6, *end;

		if (strncmp(line, "NSpid:", 6))
			continue;
		for (long v = strtol(p, &end, 10); end != p && n < max; v = strtol(p, &end, 10)) {
			out[n++] = (pid_t)v;
			p = end;
		}
		break;
	}
	fclose(f);
	return n;
}
