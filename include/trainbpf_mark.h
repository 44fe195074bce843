/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * trainbpf_mark.h - mark epochs and steps for trainbpf from C or C++, with
 * no library: one write(2) of a short line to /dev/null, which trainbpf
 * reads in the kernel as it is made. A step marker costs the write
 * (~0.2 us) plus ~0.5 us while trainbpf runs; an epoch marker ~9 us, as it
 * wakes trainbpf to read the totals it splits (bench/write_cost.sh).
 *
 *     #include "trainbpf_mark.h"
 *     trainbpf_mark_epoch(3);   // epoch 3 starts now
 *     trainbpf_mark_step(17);   // step 17 starts now
 *
 * The same from Python, two lines:
 *     _tb = os.open(os.devnull, os.O_WRONLY)
 *     def trainbpf_mark(what, n): os.write(_tb, b"TRAINBPF %s %d\n" % (what.encode(), n))
 *
 * The protocol: a write whose data starts "TRAINBPF epoch N" or
 * "TRAINBPF step N" (N decimal), by any thread of a traced process, to
 * any file descriptor.
 */
#ifndef TRAINBPF_MARK_H
#define TRAINBPF_MARK_H

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

static inline void trainbpf_mark(const char *what, long n)
{
	static int fd = -1;
	char line[64];
	int len;

	if (fd < 0)
		fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	len = snprintf(line, sizeof(line), "TRAINBPF %s %ld\n", what, n);
	if (fd >= 0 && len > 0)
		(void)!write(fd, line, (size_t)len);
}

static inline void trainbpf_mark_epoch(long n)
{
	trainbpf_mark("epoch", n);
}

static inline void trainbpf_mark_step(long n)
{
	trainbpf_mark("step", n);
}

#endif
