// SPDX-License-Identifier: BSD-3-Clause
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "elf_syms.h"
#include "gpu.h"
#include "procfs.h"
#include "tracer.h"
#include "trainbpf.skel.h"
#include "uprobe_multi.h"

#define SCAN_FAST_NS 200000000ull	/* while the loader maps libraries */
#define SCAN_FAST_FOR_NS 3000000000ull
#define SCAN_SLOW_NS 1000000000ull	/* then: dlopen is picked up within 1 s */

/* How a library of each family is named on disk (also hashed: libcudart-1a2b.so.13). */
static const char *const family_prefix[GF_NFAMILIES][2] = {
	[GF_CUDART] = { "libcudart.", "libcudart-" },
	[GF_CUDA] = { "libcuda.", "libcuda-" },
	[GF_NCCL] = { "libnccl.", "libnccl-" },
};

void gpu_init(struct gpu *g, struct tracer *tr, bool launches, bool verbose)
{
	memset(g, 0, sizeof(*g));
	g->tr = tr;
	g->launches = launches;
	g->verbose = verbose;
	g->t0 = now_ns();
}

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
 * time, a process's 66 probes took 13 s. Threads let the waits overlap.
 */
static void destroy_links(struct bpf_link **links, int n)
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

/* Removes a process's probes; forget: its mappings too (exec replaced them). */
static void detach(struct gpu_proc *p, bool forget)
{
	struct bpf_link **all = NULL;
	int n = 0;

	for (int i = 0; i < p->nmaps; i++) {
		struct bpf_link **grown;

		for (int k = 0; k < 3; k++) {
			if (p->maps[i].multi_fds[k] >= 0)
				close(p->maps[i].multi_fds[k]);
			p->maps[i].multi_fds[k] = -1;
		}
		if (!p->maps[i].nlinks)
			continue;
		grown = realloc(all, (n + p->maps[i].nlinks) * sizeof(*all));
		if (grown) {
			all = grown;
			memcpy(all + n, p->maps[i].links, p->maps[i].nlinks * sizeof(*all));
			n += p->maps[i].nlinks;
		} else {
			destroy_links(p->maps[i].links, p->maps[i].nlinks);
		}
		free(p->maps[i].links);
		p->maps[i].links = NULL;
		p->maps[i].nlinks = 0;
	}
	destroy_links(all, n);
	free(all);
	if (!forget)
		return;
	free(p->maps);
	p->maps = NULL;
	p->nmaps = 0;
}

void gpu_free(struct gpu *g)
{
	for (int i = 0; i < g->nprocs; i++) {
		detach(&g->procs[i], true);
		free(g->procs[i].comms);
	}
	free(g->procs);
	free(g->objs);
	memset(g, 0, sizeof(*g));
}

static struct gpu_proc *proc_get(struct gpu *g, pid_t pid, uint64_t now)
{
	struct gpu_proc *p;

	for (int i = g->nprocs - 1; i >= 0; i--)
		if (g->procs[i].pid == pid && !g->procs[i].detached)
			return &g->procs[i];
	p = realloc(g->procs, (g->nprocs + 1) * sizeof(*p));
	if (!p)
		return NULL;
	g->procs = p;
	p = &g->procs[g->nprocs++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->first_ns = now;
	return p;
}

const struct gpu_proc *gpu_proc_find(const struct gpu *g, pid_t pid)
{
	for (int i = g->nprocs - 1; i >= 0; i--)
		if (g->procs[i].pid == pid)
			return &g->procs[i];
	return NULL;
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

static bool named_like(const char *path, enum gpu_family f)
{
	const char *b = base_name(path);

	return !strncmp(b, family_prefix[f][0], strlen(family_prefix[f][0])) ||
	       !strncmp(b, family_prefix[f][1], strlen(family_prefix[f][1]));
}

void gpu_so_version(const char *name, char *out, size_t len)
{
	const char *v = strstr(base_name(name), ".so.");

	snprintf(out, len, "%s", v ? v + 4 : "");
}

bool gpu_lacks(const struct gpu_object *o, int api, enum gpu_family f)
{
	return gpu_apis[api].family == f && gpu_apis[api].core && !o->offs[api] &&
	       !o->alias[api];
}

int gpu_missing(const struct gpu_object *obj, enum gpu_family f, char *out, size_t len)
{
	int n = 0;
	size_t used = 0;

	if (len)
		out[0] = '\0';
	for (int i = 0; i < gpu_napis; i++) {
		if (!gpu_lacks(obj, i, f))
			continue;
		if (used < len)
			used += snprintf(out + used, len - used, "%s%s", n ? ", " : "",
					 gpu_apis[i].name);
		n++;
	}
	return n;
}

static void warn_object(const struct gpu_object *o, const struct elf_info *info,
			int found, pid_t pid)
{
	char missing[512];

	for (int f = 0; f < GF_NFAMILIES; f++) {
		if (!(o->families & (1u << f))) {
			if (!named_like(o->path, f))
				continue;
			fprintf(stderr, "trainbpf: warning: %s (pid %d) is named like %s but %s: its calls are not seen\n",
				o->path, pid, gpu_family_names[f],
				info->has_symbols ? "defines none of its functions" :
				"has no symbol table (stripped)");
			continue;
		}
		if (gpu_missing(o, f, missing, sizeof(missing)))
			fprintf(stderr, "trainbpf: warning: %s (pid %d) lacks %s: not probed\n",
				o->path, pid, missing);
	}
	(void)found;
}

/* Reads which probed functions an object defines: once per file. */
static int object_get(struct gpu *g, uint64_t dev, uint64_t ino, int fd,
		      const char *path, pid_t pid)
{
	const char *names[TB_MAX_APIS];
	struct gpu_object *o;
	struct elf_info info;
	int found;

	for (int i = 0; i < g->nobjs; i++)
		if (g->objs[i].dev == dev && g->objs[i].ino == ino)
			return i;
	o = realloc(g->objs, (g->nobjs + 1) * sizeof(*o));
	if (!o)
		return -1;
	g->objs = o;
	o = &g->objs[g->nobjs];
	memset(o, 0, sizeof(*o));
	o->dev = dev;
	o->ino = ino;
	snprintf(o->path, sizeof(o->path), "%s", path);
	for (int i = 0; i < gpu_napis; i++)
		names[i] = gpu_apis[i].name;
	found = elf_find_functions(fd, names, gpu_napis, o->offs, &info);
	for (int i = 0; i < gpu_napis && found > 0; i++) {
		if (!o->offs[i])
			continue;
		o->families |= 1u << gpu_apis[i].family;
		for (int j = 0; j < i; j++)
			if (o->offs[j] == o->offs[i])
				o->alias[i] = true;
	}
	for (int f = 0; f < GF_NFAMILIES; f++) {
		if (!(o->families & (1u << f)))
			continue;
		o->is_static[f] = !named_like(path, f);
		if (f == GF_NCCL &&
		    elf_find_string(fd, "NCCL version ", o->version[f], sizeof(o->version[f])))
			continue;
		if (o->is_static[f])
			continue;	/* the file's version is its host's, not ours */
		gpu_so_version(path, o->version[f], sizeof(o->version[f]));
		if (!o->version[f][0] && info.soname[0])
			gpu_so_version(info.soname, o->version[f], sizeof(o->version[f]));
	}
	warn_object(o, &info, found, pid);
	return g->nobjs++;
}

bool gpu_parse_map_line(const char *line, struct map_line *m)
{
	char perms[8];
	unsigned int major, minor;
	unsigned long long ino;
	int pos = 0;

	if (sscanf(line, "%lx-%lx %7s %*x %x:%x %llu %n", &m->lo, &m->hi, perms,
		   &major, &minor, &ino, &pos) < 6 || !pos)
		return false;
	if (perms[2] != 'x' || !ino || line[pos] != '/')
		return false;
	m->dev = makedev(major, minor);
	m->ino = ino;
	snprintf(m->path, sizeof(m->path), "%s", line + pos);
	m->path[strcspn(m->path, "\n")] = '\0';
	return true;
}

/*
 * Opens the mapped file as the process sees it: through its root (another
 * mount namespace, a container), or else through map_files (deleted or
 * replaced files). *attach gets a path naming the same inode.
 */
static int open_mapped(pid_t pid, const struct map_line *m, char *attach, size_t len)
{
	struct stat st;
	int fd;

	snprintf(attach, len, "/proc/%d/root%s", pid, m->path);
	fd = open(attach, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && !fstat(fd, &st) && st.st_ino == m->ino)
		return fd;
	if (fd >= 0)
		close(fd);
	snprintf(attach, len, "/proc/%d/map_files/%lx-%lx", pid, m->lo, m->hi);
	return open(attach, O_RDONLY | O_CLOEXEC);
}

static struct gpu_mapping *mapping_find(struct gpu_proc *p, const struct gpu *g,
					const struct map_line *m)
{
	for (int i = 0; i < p->nmaps; i++) {
		const struct gpu_object *o = &g->objs[p->maps[i].obj];

		if (o->dev == m->dev && o->ino == m->ino)
			return &p->maps[i];
	}
	return NULL;
}

static int add_link(struct gpu_mapping *gm, struct bpf_link *l)
{
	struct bpf_link **n = realloc(gm->links, (gm->nlinks + 1) * sizeof(*n));

	if (!n) {
		bpf_link__destroy(l);
		return -1;
	}
	gm->links = n;
	gm->links[gm->nlinks++] = l;
	return 0;
}

static struct bpf_link *attach_one(struct bpf_program *prog, pid_t pid,
				   const char *path, uint64_t off, int api, bool ret)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = ret,
		    .bpf_cookie = gpu_api_cookie(api));

	return bpf_program__attach_uprobe_opts(prog, pid, path, off, &opts);
}

/* Is api probed in o: defined there, not an alias, and asked for? */
static bool probed(const struct gpu *g, const struct gpu_object *o, int api)
{
	return o->offs[api] && !o->alias[api] &&
	       (gpu_apis[api].kind != TB_AK_LAUNCH || g->launches);
}

/* The functions of o to probe with one kind of program. */
static int select_apis(const struct gpu *g, const struct gpu_object *o, bool launch,
		       uint64_t *offs, uint64_t *cookies, int *probes)
{
	int n = 0;

	for (int i = 0; i < gpu_napis; i++) {
		const struct gpu_api *a = &gpu_apis[i];

		if (!probed(g, o, i) || (a->kind == TB_AK_LAUNCH) != launch)
			continue;
		offs[n] = o->offs[i];
		cookies[n++] = gpu_api_cookie(i);
		probes[a->family]++;
	}
	return n;
}

/*
 * One uprobe_multi link per program: returns, then entries (see below),
 * then launches. Returns -errno when the kernel refuses: the caller falls
 * back to one perf-event uprobe per function.
 */
static int attach_multi(struct gpu *g, struct gpu_proc *p, struct gpu_mapping *gm,
			const char *path)
{
	const struct gpu_object *o = &g->objs[gm->obj];
	struct trainbpf_bpf *skel = g->tr->skel;
	struct bpf_program *progs[3] = { skel->progs.gpu_exit_multi,
		skel->progs.gpu_enter_multi, skel->progs.gpu_launch_multi };
	uint64_t offs[TB_MAX_APIS], cookies[TB_MAX_APIS];
	int probes[GF_NFAMILIES] = {};

	for (int k = 0; k < 3; k++) {
		int junk[GF_NFAMILIES] = {}, n;

		/* entry and return probe the same functions: count them once */
		n = select_apis(g, o, k == 2, offs, cookies, k == 0 ? junk : probes);
		if (!n)
			continue;
		gm->multi_fds[k] = uprobe_multi_attach(bpf_program__fd(progs[k]), p->pid,
						       path, offs, cookies, n, k == 0);
		if (gm->multi_fds[k] < 0) {
			int err = gm->multi_fds[k];

			for (int j = 0; j < k; j++)
				if (gm->multi_fds[j] >= 0)
					close(gm->multi_fds[j]);
			gm->multi_fds[0] = gm->multi_fds[1] = gm->multi_fds[2] = -1;
			return err;
		}
	}
	memcpy(gm->probes, probes, sizeof(probes));
	return 0;
}

/*
 * A return probe goes in before its entry probe: a return with no entry
 * seen is ignored, an entry with no return would leave the thread inside
 * the call for good.
 */
static void attach_object(struct gpu *g, struct gpu_proc *p, struct gpu_mapping *gm,
			  const char *path)
{
	const struct gpu_object *o = &g->objs[gm->obj];
	struct trainbpf_bpf *skel = g->tr->skel;
	int failed = 0, err = 0;

	if (g->tr->uprobe_multi) {
		err = attach_multi(g, p, gm, path);
		if (!err)
			goto done;
		if (g->verbose)
			fprintf(stderr, "trainbpf: uprobe_multi on %s: %s; one probe per function\n",
				o->path, strerror(-err));
		err = 0;
	}

	for (int i = 0; i < gpu_napis; i++) {
		const struct gpu_api *a = &gpu_apis[i];
		struct bpf_link *ret, *ent;

		if (!probed(g, o, i))
			continue;
		if (a->kind == TB_AK_LAUNCH) {
			ent = attach_one(skel->progs.gpu_launch, p->pid, path, o->offs[i], i, false);
			if (!ent || add_link(gm, ent)) {
				failed++, err = errno;
				continue;
			}
			gm->probes[a->family]++;
			continue;
		}
		ret = attach_one(skel->progs.gpu_exit, p->pid, path, o->offs[i], i, true);
		if (!ret || add_link(gm, ret)) {
			failed++, err = errno;
			continue;
		}
		ent = attach_one(skel->progs.gpu_enter, p->pid, path, o->offs[i], i, false);
		if (!ent || add_link(gm, ent)) {
			failed++, err = errno;
			continue;
		}
		gm->probes[a->family]++;
	}
	if (failed)
		fprintf(stderr, "trainbpf: warning: %d probes on %s (pid %d) failed: %s\n",
			failed, o->path, p->pid, strerror(err));
done:
	if (g->verbose)
		fprintf(stderr, "trainbpf: %.3f s: %d functions probed in %s (pid %d)%s\n",
			(now_ns() - g->t0) / 1e9,
			gm->probes[GF_CUDART] + gm->probes[GF_CUDA] + gm->probes[GF_NCCL],
			o->path, p->pid, gm->nlinks ? "" : " (uprobe_multi)");
}

/* Tells BPF where this process's CUDA runtime code is (see tb_rt_ranges). */
static void update_rt_ranges(struct gpu *g, struct gpu_proc *p)
{
	struct tb_rt_ranges r = {};
	int n = 0;

	for (int i = 0; i < p->nmaps && n < TB_MAX_RT_RANGES; i++) {
		if (!(g->objs[p->maps[i].obj].families & (1u << GF_CUDART)))
			continue;
		r.lo[n] = p->maps[i].lo;
		r.hi[n++] = p->maps[i].hi;
	}
	if (n)
		bpf_map_update_elem(bpf_map__fd(g->tr->skel->maps.rt_ranges), &p->pid, &r, BPF_ANY);
}

static void new_mapping(struct gpu *g, struct gpu_proc *p, const struct map_line *m)
{
	char path[600];
	struct gpu_mapping *gm;
	int fd, obj;

	fd = open_mapped(p->pid, m, path, sizeof(path));
	if (fd < 0)
		return;		/* unmapped meanwhile, or not ours to read */
	obj = object_get(g, m->dev, m->ino, fd, m->path, p->pid);
	close(fd);
	if (obj < 0)
		return;
	gm = realloc(p->maps, (p->nmaps + 1) * sizeof(*gm));
	if (!gm)
		return;
	p->maps = gm;
	gm = &p->maps[p->nmaps++];
	memset(gm, 0, sizeof(*gm));
	gm->obj = obj;
	gm->multi_fds[0] = gm->multi_fds[1] = gm->multi_fds[2] = -1;
	gm->lo = m->lo;
	gm->hi = m->hi;
	if (g->objs[obj].families)
		attach_object(g, p, gm, path);
}

static void scan_process(struct gpu *g, struct gpu_proc *p)
{
	char path[64], line[1024];
	struct map_line m;
	bool runtime_new = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", p->pid);
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		struct gpu_mapping *gm;

		if (!gpu_parse_map_line(line, &m))
			continue;
		gm = mapping_find(p, g, &m);
		if (gm) {
			/* A library's code can span several mappings. */
			if (m.lo < gm->lo)
				gm->lo = m.lo;
			if (m.hi > gm->hi)
				gm->hi = m.hi;
			continue;
		}
		new_mapping(g, p, &m);
		runtime_new |= p->nmaps &&
			(g->objs[p->maps[p->nmaps - 1].obj].families & (1u << GF_CUDART));
	}
	fclose(f);
	if (runtime_new && g->launches)
		update_rt_ranges(g, p);
}

static void proc_gone(struct gpu *g, struct gpu_proc *p)
{
	if (p->detached)
		return;
	gpu_refresh(g);
	detach(p, false);
	p->detached = true;
	bpf_map_delete_elem(bpf_map__fd(g->tr->skel->maps.rt_ranges), &p->pid);
	/* Its counts are final here; the pid may come back as another process. */
	for (int a = 0; a < gpu_napis; a++) {
		struct tb_api_key key = { .tgid = p->pid, .api = a };

		bpf_map_delete_elem(bpf_map__fd(g->tr->skel->maps.api_stats), &key);
	}
}

void gpu_tick(struct gpu *g, const struct job *job, uint64_t now)
{
	for (int i = 0; i < job->nprocs; i++) {
		const struct proc_rec *r = &job->procs[i];
		struct gpu_proc *p;
		uint64_t code;

		if (!job_proc_alive(r)) {
			for (int j = 0; j < g->nprocs; j++)
				if (g->procs[j].pid == r->pid && !g->procs[j].detached)
					proc_gone(g, &g->procs[j]);
			continue;
		}
		/* A forked data-loader worker is a copy of its parent; CUDA cannot be used across fork. */
		if (r->role == TB_ROLE_WORKER)
			continue;
		p = proc_get(g, r->pid, now);
		if (!p || now < p->next_scan_ns)
			continue;
		/* Read maps (milliseconds for a PyTorch process) only when code changed. */
		p->scan_ns = now_ns();
		code = procfs_code_kb(p->pid);
		if (code && code != p->code_kb) {
			p->code_kb = code;
			scan_process(g, p);
		}
		p->next_scan_ns = now + (now - p->first_ns < SCAN_FAST_FOR_NS ?
					 SCAN_FAST_NS : SCAN_SLOW_NS);
	}
}

void gpu_on_exec(struct gpu *g, pid_t pid, uint64_t ts)
{
	for (int i = 0; i < g->nprocs; i++) {
		struct gpu_proc *p = &g->procs[i];

		if (p->pid != pid || p->detached || p->scan_ns > ts)
			continue;
		detach(p, true);
		p->code_kb = 0;
		p->first_ns = now_ns();
		p->next_scan_ns = 0;
	}
}

static struct gpu_comm *comm_add(struct gpu_proc *p)
{
	struct gpu_comm *c = realloc(p->comms, (p->ncomms + 1) * sizeof(*c));

	if (!c)
		return NULL;
	p->comms = c;
	c = &p->comms[p->ncomms++];
	memset(c, 0, sizeof(*c));
	return c;
}

void gpu_on_event(struct gpu *g, const void *data, size_t len)
{
	const struct tb_comm_event *e = data;
	struct gpu_proc *p;
	struct gpu_comm *c;

	if (len < sizeof(*e))
		return;
	p = proc_get(g, e->pid, now_ns());
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
	c = comm_add(p);
	if (!c)
		return;
	c->comm = e->comm;
	c->parent = e->parent;
	c->rank = e->rank;
	c->nranks = e->nranks;
	c->api = e->api;
	memcpy(c->id, e->id, sizeof(c->id));
}

void gpu_refresh(struct gpu *g)
{
	struct tb_api_key key, next;
	struct tb_api_stat st;
	void *prev = NULL;
	int fd;

	if (!g->tr)
		return;
	fd = bpf_map__fd(g->tr->skel->maps.api_stats);
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (key.api >= TB_MAX_APIS || bpf_map_lookup_elem(fd, &key, &st))
			continue;
		for (int i = g->nprocs - 1; i >= 0; i--) {
			if (g->procs[i].pid == (pid_t)key.tgid) {
				g->procs[i].stat[key.api] = st;
				break;
			}
		}
	}
}

void gpu_totals(const struct gpu *g, struct tb_api_stat out[TB_MAX_APIS])
{
	memset(out, 0, sizeof(*out) * TB_MAX_APIS);
	for (int i = 0; i < g->nprocs; i++) {
		for (int a = 0; a < gpu_napis; a++) {
			const struct tb_api_stat *s = &g->procs[i].stat[a];

			out[a].calls += s->calls;
			out[a].nested += s->nested;
			out[a].bytes += s->bytes;
			out[a].ns += s->ns;
		}
	}
}

bool gpu_any_library(const struct gpu *g)
{
	for (int i = 0; i < g->nobjs; i++)
		if (g->objs[i].families)
			return true;
	return false;
}

void gpu_sum_kinds(const struct tb_api_stat st[TB_MAX_APIS], struct gpu_sums *s)
{
	memset(s, 0, sizeof(*s));
	for (int a = 0; a < gpu_napis; a++) {
		enum tb_api_kind k = gpu_apis[a].kind;

		if (gpu_kind_is_sync(k))
			s->syncs += st[a].calls;
		if (gpu_kind_is_op(k)) {
			s->ops += st[a].calls;
			s->bytes += st[a].bytes;
		}
		if (k == TB_AK_LAUNCH)
			s->launches += st[a].calls;
	}
}
