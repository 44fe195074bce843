/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The executable file mappings of a process. Where the kernel answers
 * PROCMAP_QUERY (Linux 6.11), it is asked for them alone, and for a
 * mapping's path only when the caller wants it: /proc/PID/maps formats
 * every mapping with its path (thousands for a PyTorch process), and
 * reading it was half of a node daemon's CPU. Elsewhere, the text is read.
 */
#ifndef TB_PROCMAPS_H
#define TB_PROCMAPS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct map_line {
	uint64_t lo, hi, dev, ino;
	char path[512];		/* "" from a query until procmaps_path */
};

struct procmaps {
	int fd;			/* /proc/PID/maps */
	FILE *f;		/* the text, if not queried */
	bool query;
	uint64_t addr;		/* where the next query starts */
};

/*
 * 0, or -1 if the process is gone or not ours to read. text: read the
 * maps text even where the kernel answers queries (the tests compare).
 */
int procmaps_open(struct procmaps *pm, pid_t pid, bool text);
/* The next executable mapping of a file, in address order; false at the end. */
bool procmaps_next(struct procmaps *pm, struct map_line *m);
/* Fills m->path; -1 if the mapping went meanwhile. */
int procmaps_path(struct procmaps *pm, struct map_line *m);
void procmaps_close(struct procmaps *pm);

/* An executable mapping of a file, from one line of /proc/PID/maps. */
bool procmaps_parse_line(const char *line, struct map_line *m);

/*
 * Opens the file mapping m maps, as the process sees it (its root, else
 * map_files): only that file (device and inode), never one a link or a
 * rename put at its path since. st gets its stat; -1 if it cannot.
 */
struct stat;
int procmaps_open_file(pid_t pid, const struct map_line *m, struct stat *st);

#endif
