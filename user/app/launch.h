/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Starting the traced command: fork it, hold it at a gate until the tracer
 * has registered it, then let it exec, so tracing covers its first
 * instruction.
 */
#ifndef TB_LAUNCH_H
#define TB_LAUNCH_H

#include <signal.h>
#include <sys/types.h>

struct launch {
	pid_t pid;
	int gate_fd;	/* write end: closing it releases the child */
	int err_fd;	/* read end: errno of a failed exec, EOF on success */
	int status;	/* wait status once reaped */
	int reaped;
};

/*
 * Forks the child, held at the gate. It gets the signal dispositions the
 * command would have had without trainbpf: ignored the signals in
 * ignored (those ignored when trainbpf started: nohup's SIGHUP), default
 * the others, none blocked.
 */
int launch_fork(struct launch *l, char **argv, const sigset_t *ignored);
/* Lets the child exec. Returns -1 if the exec failed (message printed). */
int launch_release(struct launch *l);
/* Before launch_release: the child exits (127) without running the command. */
void launch_abort(struct launch *l);
/* Reaps the child if it has exited; non-blocking. */
void launch_reap(struct launch *l);
/* Waits up to timeout_ms for the child to exit, then reaps it. */
void launch_wait(struct launch *l, int timeout_ms);
int launch_exit_code(const struct launch *l);

#endif
