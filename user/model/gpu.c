// SPDX-License-Identifier: BSD-3-Clause
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gpu.h"
#include "grow.h"

void gpu_free(struct gpu *g)
{
	for (int i = 0; i < g->nprocs; i++) {
		free(g->procs[i].maps);
		free(g->procs[i].comms);
	}
	free(g->procs);
	free(g->objs);
	memset(g, 0, sizeof(*g));
}

struct gpu_proc *gpu_proc_add(struct gpu *g, pid_t pid)
{
	struct gpu_proc *p = tb_append(&g->procs, &g->nprocs, sizeof(*p));

	if (p)
		p->pid = pid;
	return p;
}

struct gpu_proc *gpu_proc_get(struct gpu *g, pid_t pid)
{
	for (int i = g->nprocs - 1; i >= 0; i--)
		if (g->procs[i].pid == pid && !g->procs[i].exited)
			return &g->procs[i];
	return gpu_proc_add(g, pid);
}

const struct gpu_proc *gpu_proc_find(const struct gpu *g, pid_t pid)
{
	for (int i = g->nprocs - 1; i >= 0; i--)
		if (g->procs[i].pid == pid)
			return &g->procs[i];
	return NULL;
}

int gpu_object_add(struct gpu *g)
{
	return tb_append(&g->objs, &g->nobjs, sizeof(*g->objs)) ? g->nobjs - 1 : -1;
}

struct gpu_mapping *gpu_mapping_add(struct gpu_proc *p, int obj)
{
	for (int i = 0; i < p->nmaps; i++)
		if (p->maps[i].obj == obj)
			return &p->maps[i];
	return gpu_mapping_append(p, obj);
}

struct gpu_mapping *gpu_mapping_append(struct gpu_proc *p, int obj)
{
	struct gpu_mapping *m = tb_append(&p->maps, &p->nmaps, sizeof(*m));

	if (m)
		m->obj = obj;
	return m;
}

void gpu_proc_forget_maps(struct gpu_proc *p)
{
	free(p->maps);
	p->maps = NULL;
	p->nmaps = 0;
}

struct gpu_comm *gpu_comm_add(struct gpu_proc *p)
{
	return tb_append(&p->comms, &p->ncomms, sizeof(struct gpu_comm));
}

uint64_t gpu_comm_key(const struct gpu_comm *c)
{
	uint64_t k = 0;

	for (int b = 0; b < 8; b++)
		k = k << 8 | c->id[b];
	return k;
}

/*
 * A split's id (gpu.h): FNV-1a over the parent's id, the split's number
 * among the parent's splits so far and the color. Members of one child
 * agree on all three; members of another color differ in the last.
 */
static void split_id(struct gpu_proc *p, struct gpu_comm *c)
{
	uint64_t h = 14695981039346656037ull;
	unsigned char in[24];
	int par = -1, nth = 0;

	for (int i = p->ncomms - 2; i >= 0 && par < 0; i--)
		if (p->comms[i].comm == c->parent && !p->comms[i].destroyed)
			par = i;
	if (par < 0 || !gpu_comm_key(&p->comms[par]))
		return;	/* its parent unknown: so is it */
	/* Splits of the parent before this one, NCCL_SPLIT_NOCOLOR's (no comm) too. */
	for (int i = par + 1; i < p->ncomms - 1; i++)
		nth += p->comms[i].parent == c->parent;
	memcpy(in, p->comms[par].id, 16);
	memcpy(in + 16, &nth, 4);
	memcpy(in + 20, &c->color, 4);
	for (size_t b = 0; b < sizeof(in); b++)
		h = (h ^ in[b]) * 1099511628211ull;
	for (int b = 0; b < 8; b++)
		c->id[b] = h >> (56 - 8 * b);
}

bool gpu_comm_count(struct gpu_proc *p, uint64_t comm, uint64_t calls, uint64_t bytes)
{
	struct gpu_comm *c = NULL;

	for (int i = p->ncomms - 1; i >= 0 && !c; i--)
		if (p->comms[i].comm == comm)
			c = &p->comms[i];
	if (!c) {
		if (p->ncomms >= GPU_MAX_COMMS || !(c = gpu_comm_add(p)))
			return false;
		c->comm = comm;
		c->rank = c->nranks = -1;
		c->api = -1;
	}
	c->calls = calls;
	c->bytes = bytes;
	return true;
}

/*
 * A full process's oldest destroyed communicator goes (a job that makes
 * and destroys them in a loop), its place for a new one. Whether one did.
 */
static bool drop_destroyed(struct gpu_proc *p)
{
	for (int i = 0; i < p->ncomms; i++) {
		if (!p->comms[i].destroyed)
			continue;
		memmove(&p->comms[i], &p->comms[i + 1], (p->ncomms - i - 1) * sizeof(*p->comms));
		p->ncomms--;
		return true;
	}
	return false;
}

void gpu_on_comm(struct gpu *g, const struct tb_comm_event *e)
{
	struct gpu_proc *p = gpu_proc_get(g, e->pid);
	struct gpu_comm *c;

	if (!p)
		return;
	if (e->type == TB_EV_NCCL_DESTROY) {
		for (int i = p->ncomms - 1; i >= 0; i--) {
			if (p->comms[i].comm == e->comm) {
				p->comms[i].destroyed = true;
				break;
			}
		}
		return;
	}
	if (p->ncomms >= GPU_MAX_COMMS) {
		g->comms_dropped++;	/* the oldest destroyed one, else this one */
		if (!drop_destroyed(p))
			return;
	}
	c = gpu_comm_add(p);
	if (!c)
		return;
	c->comm = e->comm;
	c->parent = e->parent;
	c->rank = e->rank;
	c->nranks = e->nranks;
	c->api = e->api;
	c->color = e->color;
	memcpy(c->id, e->id, sizeof(c->id));
	if (e->parent && e->rank < 0 && !gpu_comm_key(c))
		split_id(p, c);
}

void gpu_totals(const struct gpu *g, struct tb_api_stat out[TB_MAX_APIS])
{
	memset(out, 0, sizeof(*out) * TB_MAX_APIS);
	for (int i = 0; i < g->nprocs; i++) {
		for (int a = 0; a < probe_nfns; a++) {
			const struct tb_api_stat *s = &g->procs[i].stat[a];

			out[a].calls += s->calls;
			out[a].nested += s->nested;
			out[a].bytes += s->bytes;
			out[a].ns += s->ns;
		}
	}
}

void gpu_sum_kinds(const struct tb_api_stat st[TB_MAX_APIS], struct gpu_sums *s)
{
	memset(s, 0, sizeof(*s));
	for (int a = 0; a < probe_nfns; a++) {
		enum tb_api_kind k = probe_fns[a].kind;

		if (probe_kind_is_sync(k))
			s->syncs += st[a].calls;
		if (probe_kind_is_op(k)) {
			s->ops += st[a].calls;
			s->bytes += st[a].bytes;
		}
		if (k == TB_AK_LAUNCH)
			s->launches += st[a].calls;
	}
}

bool gpu_lacks(const struct gpu_object *o, int api, enum probe_family f)
{
	return probe_fns[api].family == f && probe_fns[api].core && !o->offs[api] &&
	       !o->alias[api];
}

int gpu_missing(const struct gpu_object *obj, enum probe_family f, char *out, size_t len)
{
	int n = 0;
	size_t used = 0;

	if (len)
		out[0] = '\0';
	for (int i = 0; i < probe_nfns; i++) {
		if (!gpu_lacks(obj, i, f))
			continue;
		if (used < len)
			used += snprintf(out + used, len - used, "%s%s", n ? ", " : "",
					 probe_fns[i].name);
		n++;
	}
	return n;
}

bool gpu_any_library(const struct gpu *g)
{
	for (int i = 0; i < g->nobjs; i++)
		if (g->objs[i].families & ~(1u << LIB_TORCH | 1u << LIB_PYTHON))
			return true;
	return false;
}

bool gpu_torch_closes(const struct gpu *g)
{
	for (int i = 0; i < g->nobjs; i++)
		if (g->objs[i].torch_legacy)
			return true;
	for (int i = 0; i < g->nobjs; i++)
		for (int a = 0; a < probe_nfns; a++)
			if (probe_fns[a].kind == TB_AK_TORCH_CLOSE && g->objs[i].offs[a])
				return true;
	return false;
}

bool gpu_has_torch(const struct gpu *g)
{
	for (int i = 0; i < g->nobjs; i++)
		if (g->objs[i].families & (1u << LIB_TORCH))
			return true;
	return false;
}

static bool says_something(const struct gpu_proc *p)
{
	if (p->nmaps || p->ncomms)
		return true;
	for (int a = 0; a < probe_nfns; a++)
		if (p->stat[a].calls || p->stat[a].nested)
			return true;
	return false;
}

/* p's counts into a; the communicators a had no room for. */
static int sum_into(struct gpu_proc *a, struct gpu_proc *p)
{
	int dropped = 0;

	for (int x = 0; x < probe_nfns; x++) {
		a->stat[x].calls += p->stat[x].calls;
		a->stat[x].nested += p->stat[x].nested;
		a->stat[x].bytes += p->stat[x].bytes;
		a->stat[x].ns += p->stat[x].ns;
	}
	for (int m = 0; m < p->nmaps; m++)
		gpu_mapping_add(a, p->maps[m].obj);
	for (int c = 0; c < p->ncomms; c++) {
		struct gpu_comm *k = NULL;

		if (a->ncomms < GPU_MAX_COMMS)
			k = tb_append(&a->comms, &a->ncomms, sizeof(*k));
		if (k)
			*k = p->comms[c];
		else
			dropped++;
	}
	free(p->maps);
	free(p->comms);
	return dropped;
}

bool gpu_fold_exited(struct gpu *g, int *map)
{
	int kept = 0, agg = -1, k = 0;
	bool moved = false;

	for (int i = g->nprocs - 1; i >= 0; i--) {
		struct gpu_proc *p = &g->procs[i];

		map[i] = i;
		if (!p->exited || !p->pid)
			continue;
		if (!says_something(p))
			map[i] = -1;
		else if (++kept > GPU_MAX_GONE)
			map[i] = -2;	/* summed */
	}
	for (int i = 0; i < g->nprocs; i++)
		if (!g->procs[i].pid && g->procs[i].exited)
			agg = i;
	for (int i = 0; i < g->nprocs && agg < 0; i++)
		if (map[i] == -2) {	/* the first summed one becomes the sum */
			g->procs[i].pid = 0;
			map[i] = i;
			agg = i;
		}
	for (int i = 0; i < g->nprocs; i++) {
		if (map[i] == -1) {
			free(g->procs[i].maps);
			free(g->procs[i].comms);
		} else if (map[i] == -2) {
			g->comms_dropped += sum_into(&g->procs[agg], &g->procs[i]);
			map[i] = -3;
		}
	}
	for (int i = 0; i < g->nprocs; i++) {
		if (map[i] < 0)
			continue;
		moved |= k != i;
		g->procs[k] = g->procs[i];
		map[i] = k++;
	}
	for (int i = 0; i < g->nprocs; i++)
		if (map[i] == -3)
			map[i] = map[agg];
	moved |= k != g->nprocs;
	g->nprocs = k;
	return moved;
}
