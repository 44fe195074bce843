/*
 * slowfs.c - a FUSE filesystem with one file, /data, whose every read
 * takes DELAY milliseconds in this daemon. A reader then blocks in read()
 * on a regular file while the block layer sees nothing and in_iowait is
 * never set: the case that shows trainbpf's io covers any filesystem
 * (FUSE, NFS), not only block I/O.
 *
 * Usage: slowfs [-d DELAY_MS] [-s SIZE_MIB] MOUNTPOINT   (stays in the
 * foreground, single-threaded; unmount with fusermount3 -u MOUNTPOINT)
 */
#define FUSE_USE_VERSION 31
#include <errno.h>
#include <fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long g_delay_ms = 10;
static off_t g_size = 4L << 20;

static int fs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	memset(st, 0, sizeof(*st));
	if (!strcmp(path, "/")) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		return 0;
	}
	if (!strcmp(path, "/data")) {
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = g_size;
		return 0;
	}
	return -ENOENT;
}

static int fs_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
		      struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	if (strcmp(path, "/"))
		return -ENOENT;
	fill(buf, ".", NULL, 0, 0);
	fill(buf, "..", NULL, 0, 0);
	fill(buf, "data", NULL, 0, 0);
	return 0;
}

static int fs_open(const char *path, struct fuse_file_info *fi)
{
	if (strcmp(path, "/data"))
		return -ENOENT;
	fi->direct_io = 1;	/* every read reaches the daemon: no page cache */
	return 0;
}

static int fs_read(const char *path, char *buf, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	struct timespec ts = { g_delay_ms / 1000, (g_delay_ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
	if (off >= g_size)
		return 0;
	if (off + (off_t)size > g_size)
		size = g_size - off;
	memset(buf, 'x', size);
	return size;
}

static const struct fuse_operations ops = {
	.getattr = fs_getattr,
	.readdir = fs_readdir,
	.open = fs_open,
	.read = fs_read,
};

int main(int argc, char **argv)
{
	int opt;

	while ((opt = getopt(argc, argv, "d:s:")) != -1) {
		if (opt == 'd')
			g_delay_ms = atol(optarg);
		else if (opt == 's')
			g_size = atol(optarg) << 20;
		else
			goto usage;
	}
	if (optind != argc - 1 || g_delay_ms < 0 || g_size <= 0)
		goto usage;
	{
		char *fargs[] = { argv[0], "-f", "-s", argv[optind], NULL };

		return fuse_main(4, fargs, &ops, NULL);
	}
usage:
	fprintf(stderr, "usage: slowfs [-d DELAY_MS] [-s SIZE_MIB] MOUNTPOINT\n");
	return 2;
}
