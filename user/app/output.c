// SPDX-License-Identifier: BSD-3-Clause
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "output.h"
#include "safe_open.h"

FILE *out_open(const char *path)
{
	char why[SAFE_WHY_LEN];
	bool created;
	FILE *f;
	int fd;

	if (!path)
		return stdout;
	fd = safe_open(path, O_WRONLY, 0, &created, why, sizeof(why));
	if (fd < 0) {
		fprintf(stderr, "trainbpf: cannot write %s: %s\n", path, why);
		return NULL;
	}
	f = fdopen(fd, "w");
	if (!f) {
		fprintf(stderr, "trainbpf: cannot write %s: %s\n", path, strerror(errno));
		close(fd);
	}
	return f;
}

/*
 * Not at the open: a report named like the traced script, or a run that
 * fails before its report, must not have cost the file what it held.
 */
int out_begin(FILE *f, const char *path)
{
	struct stat st;

	if (f == stdout || fstat(fileno(f), &st) || !S_ISREG(st.st_mode))
		return 0;
	if (ftruncate(fileno(f), 0)) {
		fprintf(stderr, "trainbpf: cannot write %s: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

int out_close(FILE *f, const char *path)
{
	bool bad = ferror(f);
	int err = 0;

	/* A failed write leaves its bytes in the buffer: the flush says why. */
	if (fflush(f))
		err = errno;
	if (f != stdout && fclose(f) && !err)
		err = errno;
	if (!bad && !err)
		return 0;
	fprintf(stderr, "trainbpf: cannot write %s: %s\n", path ? path : "stdout",
		err ? strerror(err) : "write error");
	return -1;
}
