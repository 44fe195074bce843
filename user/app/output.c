// SPDX-License-Identifier: BSD-3-Clause
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "output.h"
#include "safe_open.h"

/*
 * The files out_open made that no output has begun in yet: a run that
 * fails before its report (a command that does not start) removes them,
 * as if never run. At most a run's few outputs at once.
 */
#define OUT_MADE 4
static FILE *made[OUT_MADE];

static void made_add(FILE *f)
{
	for (int i = 0; i < OUT_MADE; i++)
		if (!made[i]) {
			made[i] = f;
			return;
		}
}

/* Whether f was made here and not begun; forgets it. */
static bool made_take(FILE *f)
{
	for (int i = 0; i < OUT_MADE; i++)
		if (made[i] == f) {
			made[i] = NULL;
			return true;
		}
	return false;
}

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
		if (created)
			safe_unlink(path, why, sizeof(why));
		return NULL;
	}
	if (created)
		made_add(f);
	return f;
}

/*
 * Not at the open: a report named like the traced script, or a run that
 * fails before its report, must not have cost the file what it held.
 */
int out_begin(FILE *f, const char *path)
{
	struct stat st;

	made_take(f);
	if (f == stdout || fstat(fileno(f), &st) || !S_ISREG(st.st_mode))
		return 0;
	if (ftruncate(fileno(f), 0)) {
		fprintf(stderr, "trainbpf: cannot write %s: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* A file made here that nothing was written to, still at path: removed. */
static void unmake(FILE *f, const char *path)
{
	char why[SAFE_WHY_LEN];
	struct stat st;

	if (made_take(f) && !fstat(fileno(f), &st) && !st.st_size &&
	    safe_same_file(fileno(f), path))
		safe_unlink(path, why, sizeof(why));
}

int out_close(FILE *f, const char *path)
{
	bool bad = ferror(f);
	int err = 0;

	if (f != stdout)
		unmake(f, path);
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
