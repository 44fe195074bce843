/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Opening the files trainbpf writes. It runs as root, often in /tmp, where
 * any user may plant a link or a file under the name it is about to write:
 * whatever the fs.protected_* sysctls say, these rules hold (README,
 * "Output files"):
 * - a symbolic link, anywhere on the path, is followed only where
 *   fs.protected_symlinks would follow it: not in a sticky world-writable
 *   directory, unless the link is ours or the directory owner's;
 * - in such a directory an existing regular file is opened only if it is
 *   ours or the directory owner's (fs.protected_regular) and has no other
 *   hard link (a link to a file elsewhere, planted where hard links are
 *   not protected);
 * - a file is created 0600, as perf creates perf.data, and never
 *   truncated here: the caller decides when what it held may go.
 * Each function returns -1 with errno set and why filled with one
 * readable reason.
 */
#ifndef TB_SAFE_OPEN_H
#define TB_SAFE_OPEN_H

#include <stdbool.h>
#include <stddef.h>

#define SAFE_WHY_LEN 256

enum {
	SAFE_EXCL = 1,		/* create it, or fail with EEXIST */
	SAFE_REGULAR = 2,	/* an existing file must be a regular file */
};

/*
 * Opens path with flags (O_WRONLY or O_RDWR), creating it if absent
 * (*created tells). Without SAFE_REGULAR an existing character device or
 * FIFO is accepted too (/dev/null, a pipe); anything else is refused.
 */
int safe_open(const char *path, int flags, unsigned int opts, bool *created,
	      char *why, size_t len);
/* Removes path (a file or a link, not what it points to), by the same rules. */
int safe_unlink(const char *path, char *why, size_t len);
/* Whether fd is the file at path (same device and inode). */
bool safe_same_file(int fd, const char *path);

#endif
