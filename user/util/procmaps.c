// SPDX-License-Identifier: BSD-3-Clause
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <linux/fs.h>
#include "procmaps.h"

/* The uapi of Linux 6.11 (include/uapi/linux/fs.h), for older headers. */
#ifndef PROCMAP_QUERY
struct procmap_query {
	uint64_t size;
	uint64_t query_flags;
	uint64_t query_addr;
	uint64_t vma_start;
	uint64_t vma_end;
	uint64_t vma_flags;
	uint64_t vma_page_size;
	uint64_t vma_offset;
	uint64_t inode;
	uint32_t dev_major;
	uint32_t dev_minor;
	uint32_t vma_name_size;
	uint32_t build_id_size;
	uint64_t vma_name_addr;
	uint64_t build_id_addr;
};
#define PROCMAP_QUERY _IOWR('f', 17, struct procmap_query)
#define PROCMAP_QUERY_VMA_EXECUTABLE 0x04
#define PROCMAP_QUERY_COVERING_OR_NEXT_VMA 0x10
#define PROCMAP_QUERY_FILE_BACKED_VMA 0x20
#endif

#define EXEC_FILES (PROCMAP_QUERY_VMA_EXECUTABLE | PROCMAP_QUERY_FILE_BACKED_VMA)

bool procmaps_parse_line(const char *line, struct map_line *m)
{
	char perms[8];
	unsigned int major, minor;
	unsigned long long ino;
	const char *f = strchr(line, ' ');
	int pos = 0;

	/*
	 * Only executable file mappings matter, a quarter of a PyTorch
	 * process's thousands of lines: the rest are told by their permissions
	 * before sscanf (a daemon scanning restarting jobs spent an eighth of
	 * its CPU in it).
	 */
	while (f && *f == ' ')
		f++;
	if (!f || !f[0] || !f[1] || f[2] != 'x' || !strchr(f, '/'))
		return false;
	if (sscanf(line, "%lx-%lx %7s %*x %x:%x %llu %n", &m->lo, &m->hi, perms,
		   &major, &minor, &ino, &pos) < 6 || !pos)
		return false;
	if (perms[2] != 'x' || !ino || line[pos] != '/')
		return false;
	m->dev = makedev(major, minor);
	m->ino = ino;
	snprintf(m->path, sizeof(m->path), "%s", line + pos);
	m->path[strcspn(m->path, "\n")] = '\0';
	return true;
}

/* A fact of the running kernel: once refused, the text from then on. */
static bool no_query;

int procmaps_open(struct procmaps *pm, pid_t pid, bool text)
{
	char path[64];

	memset(pm, 0, sizeof(*pm));
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	pm->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (pm->fd < 0)
		return -1;
	pm->query = !text && !no_query;
	return 0;
}

static bool to_text(struct procmaps *pm)
{
	pm->query = false;
	pm->f = fdopen(pm->fd, "re");
	if (!pm->f)
		return false;
	pm->fd = -1;	/* the FILE owns it */
	return true;
}

static bool next_text(struct procmaps *pm, struct map_line *m)
{
	char line[1024];

	while (fgets(line, sizeof(line), pm->f))
		if (procmaps_parse_line(line, m))
			return true;
	return false;
}

bool procmaps_next(struct procmaps *pm, struct map_line *m)
{
	struct procmap_query q = {
		.size = sizeof(q),
		.query_flags = EXEC_FILES | PROCMAP_QUERY_COVERING_OR_NEXT_VMA,
		.query_addr = pm->addr,
	};

	if (pm->f)
		return next_text(pm, m);
	if (!pm->query)
		return to_text(pm) && next_text(pm, m);
	if (ioctl(pm->fd, PROCMAP_QUERY, &q)) {
		/* ENOENT: no mapping past addr. Refused: a kernel before 6.11. */
		if (errno != ENOTTY && errno != EINVAL)
			return false;
		no_query = true;
		return to_text(pm) && next_text(pm, m);
	}
	m->lo = q.vma_start;
	m->hi = q.vma_end;
	m->dev = makedev(q.dev_major, q.dev_minor);
	m->ino = q.inode;
	m->path[0] = '\0';
	pm->addr = q.vma_end;
	return true;
}

int procmaps_path(struct procmaps *pm, struct map_line *m)
{
	struct procmap_query q = {
		.size = sizeof(q),
		.query_flags = EXEC_FILES,
		.query_addr = m->lo,
		.vma_name_size = sizeof(m->path),
		.vma_name_addr = (uintptr_t)m->path,
	};

	if (!pm->query)
		return m->path[0] ? 0 : -1;
	/* Mapped again meanwhile (another file at the same place): not it. */
	if (ioctl(pm->fd, PROCMAP_QUERY, &q) || q.inode != m->ino ||
	    makedev(q.dev_major, q.dev_minor) != m->dev || m->path[0] != '/') {
		m->path[0] = '\0';
		return -1;
	}
	return 0;
}

void procmaps_close(struct procmaps *pm)
{
	if (pm->f)
		fclose(pm->f);
	else if (pm->fd >= 0)
		close(pm->fd);
	pm->f = NULL;
	pm->fd = -1;
}

/*
 * Opens the mapped file as the process sees it: through its root (another
 * mount namespace, a container), or else through map_files (deleted or
 * replaced files). Only the file the process maps (its device and inode),
 * never one a link or a rename put at its path since.
 */
int procmaps_open_file(pid_t pid, const struct map_line *m, struct stat *st)
{
	char path[600];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/root%s", pid, m->path);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0 && !fstat(fd, st) && st->st_ino == m->ino && st->st_dev == m->dev)
		return fd;
	if (fd >= 0)
		close(fd);
	snprintf(path, sizeof(path), "/proc/%d/map_files/%lx-%lx", pid, m->lo, m->hi);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && !fstat(fd, st) && st->st_ino == m->ino && st->st_dev == m->dev)
		return fd;
	if (fd >= 0)
		close(fd);
	return -1;
}
