// SPDX-License-Identifier: BSD-3-Clause
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "safe_open.h"

static int fail(char *why, size_t len, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	errno = err;
	return -1;
}

static int fail_errno(char *why, size_t len)
{
	return fail(why, len, errno, "%s", strerror(errno));
}

/* Sticky and world-writable: /tmp, /var/tmp, /dev/shm. */
static bool shared_dir(const struct stat *dir)
{
	return (dir->st_mode & (S_ISVTX | S_IWOTH)) == (S_ISVTX | S_IWOTH);
}

/* fs.protected_symlinks' rule (may_follow_link in the kernel's fs/namei.c). */
static bool may_follow(const struct stat *dir, const struct stat *link)
{
	return !shared_dir(dir) || link->st_uid == geteuid() || link->st_uid == dir->st_uid;
}

/* fs.protected_regular's rule for an existing file, and one name only. */
static bool may_open(const struct stat *dir, const struct stat *st)
{
	if (!shared_dir(dir) || !S_ISREG(st->st_mode))
		return true;
	return (st->st_uid == geteuid() || st->st_uid == dir->st_uid) && st->st_nlink == 1;
}

/* One directory down from dir, through a link only where may_follow. */
static int step(int dir, const char *path, size_t upto, const char *name,
		char *why, size_t len)
{
	struct stat ds, ls;
	int fd = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &ls) || fstat(dir, &ds)) {
		fail_errno(why, len);
		goto err;
	}
	if (S_ISLNK(ls.st_mode)) {
		if (!may_follow(&ds, &ls)) {
			fail(why, len, EPERM, "%.*s is a link another user owns in a sticky "
			     "world-writable directory: not followed", (int)upto, path);
			goto err;
		}
		close(fd);
		fd = openat(dir, name, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			return fail_errno(why, len);
	} else if (!S_ISDIR(ls.st_mode)) {
		fail(why, len, ENOTDIR, "%s", strerror(ENOTDIR));
		goto err;
	}
	return fd;
err:
	if (fd >= 0)
		close(fd);
	return -1;
}

/*
 * The directory holding path's last component, component by component:
 * an O_PATH descriptor; *base is the last component.
 */
static int safe_parent(const char *path, const char **base, char *why, size_t len)
{
	const char *slash = strrchr(path, '/'), *p = path;
	int dir;

	*base = slash ? slash + 1 : path;
	if (!**base || !strcmp(*base, ".") || !strcmp(*base, ".."))
		return fail(why, len, EISDIR, "%s", strerror(EISDIR));
	dir = open(path[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	while (dir >= 0 && slash && p < slash) {
		size_t n = strcspn(p, "/");
		char name[256];

		if (n >= sizeof(name)) {
			close(dir);
			return fail(why, len, ENAMETOOLONG, "%s", strerror(ENAMETOOLONG));
		}
		if (n) {
			int next;

			memcpy(name, p, n);
			name[n] = '\0';
			next = step(dir, path, p + n - path, name, why, len);
			close(dir);
			dir = next;
		}
		p += n + 1;
	}
	if (dir < 0 && !why[0])
		fail_errno(why, len);
	return dir;
}

/* What an existing file may be: anything to read back, or to write to. */
static int check_type(const struct stat *st, unsigned int opts, char *why, size_t len)
{
	if (S_ISREG(st->st_mode) ||
	    (!(opts & SAFE_REGULAR) && (S_ISCHR(st->st_mode) || S_ISFIFO(st->st_mode))))
		return 0;
	return fail(why, len, EINVAL, "not a regular file%s",
		    opts & SAFE_REGULAR ? "" : ", a character device or a pipe");
}

static int open_existing(int dir, const char *base, int flags, unsigned int opts,
			 char *why, size_t len)
{
	struct stat ds, ls, st;
	bool link;
	int fd;

	if (fstat(dir, &ds) || fstatat(dir, base, &ls, AT_SYMLINK_NOFOLLOW))
		return fail_errno(why, len);
	link = S_ISLNK(ls.st_mode);
	if (link && !may_follow(&ds, &ls))
		return fail(why, len, EPERM, "a link another user owns in a sticky "
			    "world-writable directory: not followed");
	/* Refused before the open: opening a FIFO would wait for a reader. */
	if (!link && check_type(&ls, opts, why, len))
		return -1;
	/*
	 * An allowed link (/dev/stdout) is the kernel's to resolve, to a file
	 * that exists: nothing is created through a link.
	 */
	fd = openat(dir, base, flags | O_CLOEXEC | (link ? 0 : O_NOFOLLOW));
	if (fd < 0 && link && errno == ENOENT)
		return fail(why, len, ENOENT, "a link to a missing file: not created through it");
	if (fd < 0 || fstat(fd, &st)) {
		fail_errno(why, len);
		goto err;
	}
	if (check_type(&st, opts, why, len))
		goto err;
	if (!link && !may_open(&ds, &st)) {
		fail(why, len, EPERM, st.st_nlink > 1 ?
		     "a file with other hard links in a sticky world-writable directory: not written" :
		     "another user's file in a sticky world-writable directory: not written");
		goto err;
	}
	return fd;
err:
	if (fd >= 0)
		close(fd);
	return -1;
}

int safe_open(const char *path, int flags, unsigned int opts, bool *created,
	      char *why, size_t len)
{
	const char *base;
	int dir, fd;

	why[0] = '\0';
	*created = false;
	dir = safe_parent(path, &base, why, len);
	if (dir < 0)
		return -1;
	fd = openat(dir, base, flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0)
		*created = true;
	else if (errno == EEXIST && !(opts & SAFE_EXCL))
		fd = open_existing(dir, base, flags, opts, why, len);
	else
		fail_errno(why, len);
	close(dir);
	return fd;
}

int safe_unlink(const char *path, char *why, size_t len)
{
	struct stat ds, st;
	const char *base;
	int dir, rc = -1;

	why[0] = '\0';
	dir = safe_parent(path, &base, why, len);
	if (dir < 0)
		return -1;
	if (fstat(dir, &ds) || fstatat(dir, base, &st, AT_SYMLINK_NOFOLLOW))
		fail_errno(why, len);
	else if (S_ISDIR(st.st_mode))
		fail(why, len, EISDIR, "%s", strerror(EISDIR));
	else if (!S_ISLNK(st.st_mode) && !may_open(&ds, &st))
		fail(why, len, EPERM, "another user's file in a sticky world-writable directory: "
		     "not removed");
	else if (unlinkat(dir, base, 0))
		fail_errno(why, len);
	else
		rc = 0;
	close(dir);
	return rc;
}

bool safe_same_file(int fd, const char *path)
{
	struct stat a, b;

	return !fstat(fd, &a) && !stat(path, &b) && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}
