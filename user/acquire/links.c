// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <pthread.h>
#include <stdbool.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "links.h"

#define DETACH_THREADS 32

struct detach_job {
	struct bpf_link **links;	/* or NULL: fds */
	int *fds;
	int n, stride;
};

static void *detach_some(void *arg)
{
	struct detach_job *j = arg;

	for (int i = 0; i < j->n; i += j->stride)
		if (j->links)
			bpf_link__destroy(j->links[i]);
		else
			close(j->fds[i]);
	return NULL;
}

/*
 * Removing a uprobe waits for an RCU grace period (~0.2 s here): one at a
 * time, a process's 66 probes took 13 s. So does closing a syscall
 * tracepoint's perf event (tracepoint_synchronize_unregister): the
 * tracer's 26 took 1.2 s at every exit; and closing a uprobe_multi
 * link's fd (25-60 ms each here). Threads let the waits overlap.
 */
static void detach_all(struct bpf_link **links, int *fds, int n)
{
	pthread_t tid[DETACH_THREADS];
	struct detach_job jobs[DETACH_THREADS];
	bool started[DETACH_THREADS];
	int nt = n < DETACH_THREADS ? n : DETACH_THREADS;

	for (int t = 0; t < nt; t++) {
		jobs[t] = (struct detach_job){ links ? links + t : NULL, fds ? fds + t : NULL,
					       n - t, nt };
		started[t] = !pthread_create(&tid[t], NULL, detach_some, &jobs[t]);
		if (!started[t])
			detach_some(&jobs[t]);	/* no thread: do it here */
	}
	for (int t = 0; t < nt; t++)
		if (started[t])
			pthread_join(tid[t], NULL);
}

void links_destroy(struct bpf_link **links, int n)
{
	detach_all(links, NULL, n);
}

void links_close_fds(int *fds, int n)
{
	detach_all(NULL, fds, n);
}
