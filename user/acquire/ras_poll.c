// SPDX-License-Identifier: BSD-3-Clause
/*
 * The RAS poller (ras_client.h): one thread that asks a round of jobs in
 * turn, at most RAS_MAX_JOBS x RAS_BUDGET_MS long. The lock is held only
 * to copy requests in and reports out, never across a query.
 */
#include <stdio.h>
#include <string.h>
#include "ras_client.h"

/* A job's result said on stderr when it changes (one line, not every round). */
static void say(const struct ras_report *old, int nold, const struct ras_report *r,
		const char *why)
{
	for (int i = 0; i < nold; i++)
		if (!strcmp(old[i].job, r->job) && old[i].result == r->result)
			return;
	if (r->result == RAS_OK)
		fprintf(stderr, "trainbpf: job %s: NCCL RAS read (%d communicators)\n", r->job,
			r->v.comms);
	else
		fprintf(stderr, "trainbpf: job %s: NCCL RAS not read (%s): %s\n", r->job,
			ras_result_names[r->result], why);
}

static void round_of(struct ras_poller *p, const struct ras_job *jobs, int n)
{
	static struct ras_report out[RAS_MAX_JOBS];
	char why[256];

	for (int i = 0; i < n; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		memcpy(out[i].job, jobs[i].job, sizeof(out[i].job));
		out[i].job[sizeof(out[i].job) - 1] = 0;
		why[0] = 0;
		out[i].result = ras_query(&jobs[i], &out[i].v, why, sizeof(why));
		say(p->done, p->ndone, &out[i], why);	/* p->done is only written here */
	}
	pthread_mutex_lock(&p->mu);
	memcpy(p->done, out, n * sizeof(out[0]));
	p->ndone = n;
	p->busy = false;
	pthread_mutex_unlock(&p->mu);
}

static void *run(void *arg)
{
	static struct ras_job jobs[RAS_MAX_JOBS];
	struct ras_poller *p = arg;
	int n;

	for (;;) {
		pthread_mutex_lock(&p->mu);
		while (!p->stop && !p->nreq)
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->stop) {
			pthread_mutex_unlock(&p->mu);
			return NULL;
		}
		n = p->nreq;
		memcpy(jobs, p->req, n * sizeof(jobs[0]));
		p->nreq = 0;
		pthread_mutex_unlock(&p->mu);
		round_of(p, jobs, n);
	}
}

int ras_poller_start(struct ras_poller *p)
{
	memset(p, 0, sizeof(*p));
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	if (pthread_create(&p->th, NULL, run, p)) {
		fprintf(stderr, "trainbpf: warning: no thread for NCCL RAS queries: not read\n");
		return -1;
	}
	p->started = true;
	return 0;
}

bool ras_poller_submit(struct ras_poller *p, const struct ras_job *jobs, int n)
{
	bool taken = false;

	if (!p->started)
		return false;
	pthread_mutex_lock(&p->mu);
	if (!p->busy) {
		n = n < RAS_MAX_JOBS ? n : RAS_MAX_JOBS;
		memcpy(p->req, jobs, n * sizeof(jobs[0]));
		p->nreq = n;
		p->busy = taken = true;
		if (!n) {	/* no job: an empty round, the last reports go */
			p->ndone = 0;
			p->busy = false;
		}
		pthread_cond_signal(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
	return taken;
}

int ras_poller_results(struct ras_poller *p, struct ras_report *out)
{
	int n;

	if (!p->started)
		return 0;
	pthread_mutex_lock(&p->mu);
	n = p->ndone;
	memcpy(out, p->done, n * sizeof(out[0]));
	pthread_mutex_unlock(&p->mu);
	return n;
}

/* Waits for the round under way: RAS_MAX_JOBS x RAS_BUDGET_MS at most. */
void ras_poller_stop(struct ras_poller *p)
{
	if (!p->started)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->th, NULL);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	p->started = false;
}
