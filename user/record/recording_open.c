// SPDX-License-Identifier: BSD-3-Clause
/*
 * Opening a recording to read it without leaving a file beside it. SQLite
 * makes a -wal and a -shm beside a WAL database that any connection opens,
 * a read-only one included; report, trace and diff only read, so:
 *
 * - no -wal: a finished recording (it leaves WAL mode at the end, and
 *   recordings of schema 1 were checkpointed): the file is all there is,
 *   read as immutable (no lock, nothing made);
 * - a -wal and its -shm (a recording being written, or cut by kill -9):
 *   read as SQLite reads any WAL database, through the files that are
 *   there, the WAL's commits included;
 * - a -wal without its -shm (copied without it, or removed): SQLite would
 *   make a -shm (and fail in a read-only directory), so the file and its
 *   WAL are read from a private copy in a directory of our own, removed
 *   on close. Rare, and the WAL is a few MB (checkpoints every 1000 pages).
 */
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "recording_read.h"

#define ERR(...) (snprintf(err, errlen, __VA_ARGS__), -1)
#define COPY_NAME "recording.db"

static bool side_exists(const char *path, const char *suffix)
{
	char side[4200];
	struct stat sb;

	snprintf(side, sizeof(side), "%s%s", path, suffix);
	return !lstat(side, &sb);
}

/* "file:" URI of path: what SQLite would take for a query is escaped. */
static void uri_of(const char *path, char *out, size_t len, const char *query)
{
	size_t off = snprintf(out, len, "file:%s", path[0] == '/' ? "//" : "");

	for (const unsigned char *p = (const unsigned char *)path; *p && off + 4 < len; p++)
		off += snprintf(out + off, len - off, *p == '%' || *p == '?' || *p == '#' ||
				*p < 0x20 || *p >= 0x7f ? "%%%02x" : "%c", *p);
	snprintf(out + off, len - off, "?%s", query);
}

static int copy_fd(int in, int out)
{
	char buf[65536];
	ssize_t n;

	while ((n = read(in, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		for (ssize_t done = 0, w; done < n; done += w) {
			w = write(out, buf + done, n - done);
			if (w < 0 && errno == EINTR)
				w = 0;
			else if (w < 0)
				return -1;
		}
	}
	return 0;
}

/* src into dir/name, a file made here (O_EXCL: never one that was there). */
static int copy_into(const char *src, const char *dir, const char *name)
{
	char dst[4200];
	int in, out, rc, saved;

	snprintf(dst, sizeof(dst), "%s/%s", dir, name);
	in = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return -1;
	out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0) {
		saved = errno;
		close(in);
		errno = saved;
		return -1;
	}
	rc = copy_fd(in, out);
	saved = errno;
	close(in);
	if (close(out))
		rc = -1;
	errno = saved;
	return rc;
}

static void remove_copy(struct recording *r)
{
	char f[4200];

	if (!r->tmpdir)
		return;
	for (const char *const *s = (const char *const[]){ "", "-wal", "-shm", "-journal", NULL };
	     *s; s++) {
		snprintf(f, sizeof(f), "%s/" COPY_NAME "%s", r->tmpdir, *s);
		unlink(f);
	}
	rmdir(r->tmpdir);
	free(r->tmpdir);
	r->tmpdir = NULL;
}

/* path and its -wal into a new directory; the copy's path into copy. */
static int private_copy(struct recording *r, const char *path, char *copy, size_t len,
			char *err, size_t errlen)
{
	const char *tmp = getenv("TMPDIR");
	char dir[4096], wal[4200];

	snprintf(dir, sizeof(dir), "%s/trainbpf-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		return ERR("cannot read %s: no directory for a copy of it and its -wal: %s",
			   path, strerror(errno));
	r->tmpdir = strdup(dir);
	if (!r->tmpdir)
		abort();	/* as job.c: out of memory, nothing left to say */
	snprintf(wal, sizeof(wal), "%s-wal", path);
	if (copy_into(path, dir, COPY_NAME) || copy_into(wal, dir, COPY_NAME "-wal")) {
		snprintf(err, errlen, "cannot read %s: copying it and its -wal to %s: %s",
			 path, dir, strerror(errno));
		remove_copy(r);
		return -1;
	}
	snprintf(copy, len, "%s/" COPY_NAME, dir);
	return 0;
}

int rec_open_file(struct recording *r, const char *path, char *err, size_t errlen)
{
	char uri[3 * 4096 + 64], copy[4200];
	int rc;

	if (!side_exists(path, "-wal")) {
		uri_of(path, uri, sizeof(uri), "immutable=1");
		rc = sqlite3_open_v2(uri, &r->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
	} else if (side_exists(path, "-shm")) {
		uri_of(path, uri, sizeof(uri), "readonly_shm=1");
		rc = sqlite3_open_v2(uri, &r->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
	} else {
		if (private_copy(r, path, copy, sizeof(copy), err, errlen))
			return -1;
		rc = sqlite3_open_v2(copy, &r->db, SQLITE_OPEN_READONLY, NULL);
	}
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "cannot open %s: %s", path,
			 r->db ? sqlite3_errmsg(r->db) : "out of memory");
		rec_close_file(r);
		return -1;
	}
	/* A reader never checkpoints: the WAL stays as the writer left it. */
	sqlite3_db_config(r->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
	return 0;
}

void rec_close_file(struct recording *r)
{
	sqlite3_close(r->db);
	r->db = NULL;
	remove_copy(r);
}
