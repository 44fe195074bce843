// SPDX-License-Identifier: BSD-3-Clause
/*
 * hook_floor: attaches hook_floor.bpf.c's empty programs and holds them
 * until SIGINT or SIGTERM. bench/sched_pipe.sh, scenario E.
 */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
#include "hook_floor.skel.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

int main(void)
{
	struct hook_floor_bpf *skel;
	int err = 1;

	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	skel = hook_floor_bpf__open_and_load();
	if (!skel) {
		fprintf(stderr, "hook_floor: cannot load the BPF object\n");
		return 1;
	}
	if (hook_floor_bpf__attach(skel)) {
		fprintf(stderr, "hook_floor: cannot attach\n");
		goto cleanup;
	}
	while (!stop)
		pause();
	err = 0;
cleanup:
	hook_floor_bpf__destroy(skel);
	return err;
}
