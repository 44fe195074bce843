// SPDX-License-Identifier: BSD-3-Clause
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>
#include "trainbpf.h"
#include "trainbpf.skel.h"
#include "categories.h"
#include "states.h"
#include "tracer.h"

int states_flush(struct states *st)
{
	int err;

	if (!st->n)
		return 0;
	err = st->fn(st->ctx, st->batch, st->n);
	st->delivered += st->n;
	st->n = 0;
	if (err && !st->err)
		st->err = err;
	return err;
}

/* Batched, so that the writer can insert many records per statement. */
int states_push(struct states *st, const struct tb_state_rec *r)
{
	st->batch[st->n++] = *r;
	if (st->n == TB_STATES_BATCH)
		return states_flush(st);
	return 0;
}

static int on_record(void *ctx, void *data, size_t len)
{
	if (len < sizeof(struct tb_state_rec))
		return 0;
	return states_push(ctx, data);
}

int states_init(struct states *st, states_fn fn, void *ctx)
{
	memset(st, 0, sizeof(*st));
	st->fn = fn;
	st->ctx = ctx;
	st->batch = calloc(TB_STATES_BATCH, sizeof(*st->batch));
	return st->batch ? 0 : -ENOMEM;
}

int states_open(struct states *st, struct tracer *tr, states_fn fn, void *ctx)
{
	if (states_init(st, fn, ctx)) {
		fprintf(stderr, "trainbpf: out of memory for the state stream\n");
		return -1;
	}
	if (!tr->skel->rodata->tb_stream_states) {
		fprintf(stderr, "trainbpf: the state stream was not switched on at load\n");
		return -1;
	}
	st->rb = ring_buffer__new(bpf_map__fd(tr->skel->maps.states), on_record, st, NULL);
	if (!st->rb) {
		fprintf(stderr, "trainbpf: cannot open the states ring buffer: %s\n",
			strerror(errno));
		return -1;
	}
	return 0;
}

int states_drain(struct states *st)
{
	uint64_t before = st->delivered + st->n;
	int err;

	if (!st->rb)
		return 0;
	err = ring_buffer__consume(st->rb);
	if (err >= 0)
		err = states_flush(st);
	if (err < 0)
		return err;
	return (int)(st->delivered - before);
}

void states_close(struct states *st)
{
	ring_buffer__free(st->rb);
	free(st->batch);
	memset(st, 0, sizeof(*st));
}

uint64_t states_lost(const struct tracer *tr)
{
	struct tb_counters c;

	tracer_counters(tr, &c);
	return c.states_lost;
}

void states_tsv_header(FILE *f)
{
	fprintf(f, "tid\tpid\tstart_ns\tend_ns\tcat\tcp_cat\n");
}

int states_write_tsv(void *ctx, const struct tb_state_rec *recs, size_t n)
{
	FILE *f = ctx;

	for (size_t i = 0; i < n; i++) {
		const struct tb_state_rec *r = &recs[i];

		/* The text form is intervals only: a sample is no interval. */
		if (r->cat >= TB_NCAT || r->cp_cat >= TB_NCAT || r->flags & TB_SR_PY_SAMPLE)
			continue;
		fprintf(f, "%u\t%u\t%llu\t%llu\t%s\t%s\n", r->tid, r->pid,
			(unsigned long long)r->start_ns, (unsigned long long)r->end_ns,
			tb_cat_names[r->cat], tb_cat_names[r->cp_cat]);
	}
	return ferror(f) ? -EIO : 0;
}
