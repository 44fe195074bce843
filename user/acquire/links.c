// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <pthread.h>
#include <stdbool.h>
#include <bpf/libbpf.h>
#include "links.h"

#define DETACH_THREADS 32

struct detach_job {
	struct bpf_link **links;
	int n, stride;
};

static void *detach_some(void *arg)
{
	struct detach_job *j = arg;

	for (int i = 0; i < j->n; i += j->stride)
		bpf_link__destroy(j->links[i]);
	return NULL;
}

/*
 * Removing a uprobe waits for an RCU grace period (~0.2 s here): one at a
 * time, a process's 66 probes took 13 s. So does closing a syscall
 * tracepoint's perf event (tracepoint_synchronize_unregister): the
 * tracer's 26 took 1.2 s at every exit. Threads let the waits overlap.
 */
void links_destroy(struct bpf_link **links, int n)
{
	pthread_t tid[DETACH_THREADS];
	struct detach_job jobs[DETACH_THREADS];
	bool started[DETACH_THREADS];
	int nt = n < DETACH_THREADS ? n : DETACH_THREADS;

	for (int t = 0; t < nt; t++) {
		jobs[t] = (struct detach_job){ links + t, n - t, nt };
		started[t] = !pthread_create(&tid[t], NULL, detach_some, &jobs[t]);
		if (!started[t])
			detach_some(&jobs[t]);	/* no thread: do it here */
	}
	for (int t = 0; t < nt; t++)
		if (started[t])
			pthread_join(tid[t], NULL);
}
