// SPDX-License-Identifier: BSD-3-Clause
/*
 * libFuzzer harness for the recording reader: any bytes, written to a file
 * and read as a recording, must end in a report or in one error line,
 * never in a crash, a leak or an out-of-bounds access (ASan).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "report.h"

static FILE *sink;

static void run(const char *path, const struct rec_filter *flt)
{
	struct recording r;
	struct run_counters c;
	char err[512];

	if (rec_open(&r, path, err, sizeof(err)) || rec_load(&r, flt, err, sizeof(err))) {
		rec_close(&r);
		return;
	}
	rec_counters(&r, &c);
	report_text(sink, &r.ses, &c, r.end_ns);
	report_json(sink, &r.ses, &c, r.end_ns);
	report_csv(sink, &r.ses);
	rec_close(&r);
	if (!rec_open(&r, path, err, sizeof(err)))
		trace_export(&r, sink, err, sizeof(err));
	rec_close(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct rec_filter all, one = { .epoch_set = true, .epoch = 1, .pid = 100 };
	char path[] = "/tmp/tbfuzzXXXXXX";
	int fd = mkstemp(path);

	if (!sink)
		sink = fopen("/dev/null", "w");
	if (fd < 0)
		return 0;
	if (write(fd, data, size) == (ssize_t)size) {
		close(fd);
		run(path, &all);
		run(path, &one);
	} else {
		close(fd);
	}
	unlink(path);
	return 0;
}
