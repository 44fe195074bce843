// SPDX-License-Identifier: BSD-3-Clause
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>
#include "launch.h"

/*
 * Two pipes: the gate (child blocks reading it until the parent closes it)
 * and an exec-error channel (CLOEXEC: it closes silently on a good exec,
 * carries errno on a failed one).
 */
/*
 * trainbpf ignores SIGPIPE and catches SIGINT, SIGTERM, SIGHUP: exec keeps
 * an ignored signal ignored (`yes | head -1` said "Broken pipe" under
 * trainbpf only), so each is set back before it.
 */
static void reset_signals(const sigset_t *ignored)
{
	struct sigaction sa = { 0 };
	sigset_t none;

	for (int sig = 1; sig < NSIG; sig++) {
		sa.sa_handler = sigismember(ignored, sig) == 1 ? SIG_IGN : SIG_DFL;
		sigaction(sig, &sa, NULL);	/* SIGKILL, SIGSTOP, libc's own: refused */
	}
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

static void child(int gate, int err_fd, char **argv, const sigset_t *ignored)
{
	char c;
	int e;

	reset_signals(ignored);
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	/* No byte: trainbpf gave up (launch_abort) or died; the command never runs. */
	if (read(gate, &c, 1) != 1)
		_exit(127);
	close(gate);
	execvp(argv[0], argv);
	e = errno;
	if (write(err_fd, &e, sizeof(e)) < 0)
		_exit(127);
	_exit(127);
}

int launch_fork(struct launch *l, char **argv, const sigset_t *ignored)
{
	int gate[2], errp[2];

	memset(l, 0, sizeof(*l));
	if (pipe2(gate, O_CLOEXEC) || pipe2(errp, O_CLOEXEC)) {
		fprintf(stderr, "trainbpf: cannot start the command: pipe: %s\n", strerror(errno));
		return -1;
	}
	fflush(NULL);
	l->pid = fork();
	if (l->pid < 0) {
		fprintf(stderr, "trainbpf: cannot start the command: fork: %s\n", strerror(errno));
		return -1;
	}
	if (l->pid == 0) {
		close(gate[1]);
		close(errp[0]);
		child(gate[0], errp[1], argv, ignored);
	}
	close(gate[0]);
	close(errp[1]);
	l->gate_fd = gate[1];
	l->err_fd = errp[0];
	return 0;
}

int launch_release(struct launch *l)
{
	int e = 0;
	ssize_t n;

	if (write(l->gate_fd, "", 1) != 1) {
		fprintf(stderr, "trainbpf: cannot start the command: %s\n", strerror(errno));
		return -1;
	}
	close(l->gate_fd);
	l->gate_fd = -1;
	n = read(l->err_fd, &e, sizeof(e));
	close(l->err_fd);
	l->err_fd = -1;
	if (n == sizeof(e)) {
		fprintf(stderr, "trainbpf: cannot run command: %s\n", strerror(e));
		return -1;
	}
	return 0;
}

void launch_abort(struct launch *l)
{
	close(l->gate_fd);
	close(l->err_fd);
	l->gate_fd = l->err_fd = -1;
	if (waitpid(l->pid, &l->status, 0) == l->pid)
		l->reaped = 1;
}

void launch_reap(struct launch *l)
{
	if (l->pid > 0 && !l->reaped && waitpid(l->pid, &l->status, WNOHANG) == l->pid)
		l->reaped = 1;
}

void launch_wait(struct launch *l, int timeout_ms)
{
	for (int waited = 0; l->pid > 0 && !l->reaped && waited < timeout_ms; waited += 10) {
		launch_reap(l);
		if (!l->reaped)
			usleep(10000);
	}
}

int launch_exit_code(const struct launch *l)
{
	if (!l->reaped)
		return 0;
	if (WIFEXITED(l->status))
		return WEXITSTATUS(l->status);
	return 128 + WTERMSIG(l->status);
}
