// SPDX-License-Identifier: BSD-3-Clause
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "clock.h"
#include "elf_syms.h"
#include "lib_probes.h"
#include "libraries.h"
#include "links.h"
#include "grow.h"
#include "procfs.h"
#include "procmaps.h"
#include "tracer.h"
#include "trainbpf.skel.h"
#include "uprobe_multi.h"

#define SCAN_FAST_NS 200000000ull	/* while the loader maps libraries */
#define SCAN_FAST_FOR_NS 3000000000ull
#define SCAN_SLOW_NS 1000000000ull	/* then: dlopen is picked up within 1 s */
/*
 * A process whose code grows look after look is loading (import torch
 * maps hundreds of files over seconds): its maps, thousands of lines, are
 * read again at most this often until it settles, then once more. Half of
 * a node daemon's CPU was these reads. 800 ms plus a look keeps the 1 s.
 */
#define SCAN_LOADING_NS 800000000ull

void lib_probes_init(struct lib_probes *gp, struct tracer *tr, struct gpu *g,
		     bool launches, bool phases, bool verbose)
{
	memset(gp, 0, sizeof(*gp));
	gp->tr = tr;
	gp->gpu = g;
	gp->launches = g->launches = launches;
	gp->phases = phases;
	gp->verbose = verbose;
	gp->t0 = now_ns();
	gp->plain = -1;
}

/* Removes a process's probes; forget: its mappings too (exec replaced them). */
static void detach(struct lib_probes *gp, struct lp_proc *p, bool forget)
{
	struct bpf_link **all = NULL;
	int n = 0, *fds = calloc(p->nmaps * LP_NPROGS + 1, sizeof(*fds)), nfds = 0;

	for (int i = 0; i < p->nmaps; i++) {
		struct lp_map *m = &p->maps[i];
		struct bpf_link **grown;

		for (int k = 0; k < LP_NPROGS; k++) {
			if (m->multi_fds[k] >= 0 && fds)
				fds[nfds++] = m->multi_fds[k];
			else if (m->multi_fds[k] >= 0)
				close(m->multi_fds[k]);
			m->multi_fds[k] = -1;
		}
		if (!m->nlinks)
			continue;
		grown = realloc(all, (n + m->nlinks) * sizeof(*all));
		if (grown) {
			all = grown;
			memcpy(all + n, m->links, m->nlinks * sizeof(*all));
			n += m->nlinks;
		} else {
			links_destroy(m->links, m->nlinks);
		}
		free(m->links);
		m->links = NULL;
		m->nlinks = 0;
	}
	links_destroy(all, n);
	links_close_fds(fds, nfds);
	free(all);
	free(fds);
	if (!forget)
		return;
	free(p->maps);
	p->maps = NULL;
	p->nmaps = 0;
	p->nprobed = 0;
	gpu_proc_forget_maps(&gp->gpu->procs[p->proc]);
}

void lib_probes_free(struct lib_probes *gp)
{
	for (int i = 0; i < gp->nprocs; i++) {
		detach(gp, &gp->procs[i], false);
		free(gp->procs[i].maps);
	}
	free(gp->procs);
	memset(gp, 0, sizeof(*gp));
}

/* pid's probes that are still in place, made (with the model's entry) if none. */
static struct lp_proc *proc_get(struct lib_probes *gp, pid_t pid, uint64_t now)
{
	struct gpu_proc *mp;
	struct lp_proc *p;

	for (int i = gp->nprocs - 1; i >= 0; i--)
		if (!gp->procs[i].detached && gp->gpu->procs[gp->procs[i].proc].pid == pid)
			return &gp->procs[i];
	mp = gpu_proc_get(gp->gpu, pid);
	if (!mp)
		return NULL;
	p = tb_append(&gp->procs, &gp->nprocs, sizeof(*p));
	if (!p)
		return NULL;
	p->proc = mp - gp->gpu->procs;
	p->first_ns = now;
	return p;
}

static struct gpu_proc *model_of(struct lib_probes *gp, const struct lp_proc *p)
{
	return &gp->gpu->procs[p->proc];
}

static pid_t pid_of(struct lib_probes *gp, const struct lp_proc *p)
{
	return model_of(gp, p)->pid;
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

void lib_so_version(const char *name, char *out, size_t len)
{
	const char *v = strstr(base_name(name), ".so.");

	snprintf(out, len, "%s", v ? v + 4 : "");
}

static void warn_object(const struct gpu_object *o, const struct elf_info *info, pid_t pid)
{
	char missing[512];

	for (int f = 0; f < LIB_NFAMILIES; f++) {
		if (!(o->families & (1u << f))) {
			if (!library_named(o->path, f))
				continue;
			fprintf(stderr, "trainbpf: warning: %s (pid %d) is named like %s but %s: its calls are not seen\n",
				o->path, pid, probe_family_names[f],
				info->has_symbols ? "defines none of its functions" :
				"has no symbol table (stripped)");
			continue;
		}
		if (gpu_missing(o, f, missing, sizeof(missing)))
			fprintf(stderr, "trainbpf: warning: %s (pid %d) lacks %s: not probed\n",
				o->path, pid, missing);
	}
}

static bool defines_kind(const struct gpu_object *o, enum tb_api_kind k)
{
	for (int i = 0; i < probe_nfns; i++)
		if (o->offs[i] && probe_fns[i].kind == k)
			return true;
	return false;
}

/* Which families o defines, which of its functions are aliases, and versions. */
static void object_families(struct gpu_object *o, int found, int fd, const char *path,
			    const struct elf_info *info)
{
	for (int i = 0; i < probe_nfns && found > 0; i++) {
		if (!o->offs[i])
			continue;
		o->families |= 1u << probe_fns[i].family;
		for (int j = 0; j < i; j++)
			if (o->offs[j] == o->offs[i])
				o->alias[i] = true;
	}
	/* torch.ops calls but no DisableTorchFunctionSubclass: torch < 2.0 */
	o->torch_legacy = defines_kind(o, TB_AK_TORCH_OP) && !defines_kind(o, TB_AK_TORCH_CLOSE);
	/*
	 * Its brackets close when the exit op returns (the GIL taken back: a
	 * Python thread that took it meanwhile is the fetch's time, as on 2.x),
	 * where the one caller torch.ops calls go through gets the result.
	 */
	if (o->torch_legacy)
		o->nop_returns = elf_call_returns(fd,
			"_ZN5torch3jit37_get_operation_for_overload_or_packetE*",
			"_ZN5torch3jit24invokeOperatorFromPythonE*", o->op_returns, 2);
	for (int f = 0; f < LIB_NFAMILIES; f++) {
		if (!(o->families & (1u << f)))
			continue;
		o->is_static[f] = !library_named(path, f);
		if (f == LIB_NCCL &&
		    elf_find_string(fd, "NCCL version ", o->version[f], sizeof(o->version[f])))
			continue;
		if (o->is_static[f])
			continue;	/* the file's version is its host's, not ours */
		lib_so_version(path, o->version[f], sizeof(o->version[f]));
		if (!o->version[f][0] && info->soname[0])
			lib_so_version(info->soname, o->version[f], sizeof(o->version[f]));
	}
}

/*
 * Where a function's uprobe goes: past its endbr64, if it starts with one
 * (CET builds: most libraries now). The kernel cannot emulate endbr64 and
 * single-steps it out of line, a second trap; the instruction after it (a
 * push, mostly) is emulated. Measured on a torch 2.6 loop: a hit costs
 * about half as much. Registers and the stack are as at the entry.
 */
static void probe_points(struct gpu_object *o, int fd)
{
	static const unsigned char endbr64[4] = { 0xf3, 0x0f, 0x1e, 0xfa };
	unsigned char b[4];

	for (int i = 0; i < probe_nfns; i++) {
		o->probe_at[i] = o->offs[i];
		if (o->offs[i] && pread(fd, b, sizeof(b), (off_t)o->offs[i]) == sizeof(b) &&
		    !memcmp(b, endbr64, sizeof(b)))
			o->probe_at[i] += sizeof(b);
	}
}

static int64_t ts_ns(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

/* Is o the file st describes, as it was when o was read? */
static bool same_file(const struct gpu_object *o, const struct stat *st)
{
	return o->dev == st->st_dev && o->ino == st->st_ino && o->size == (uint64_t)st->st_size &&
	       o->mtime_ns == ts_ns(&st->st_mtim) && o->ctime_ns == ts_ns(&st->st_ctim);
}

/* The one object standing for every file past LP_MAX_OBJECTS with nothing to probe. */
static int plain_object(struct lib_probes *gp)
{
	gp->unkept++;
	if (gp->plain < 0 && (gp->plain = gpu_object_add(gp->gpu)) >= 0)
		snprintf(gp->gpu->objs[gp->plain].path, sizeof(gp->gpu->objs[0].path),
			 "(files not kept: nothing to probe)");
	return gp->plain;
}

/* Kept files with something to probe that uid owns. */
static int owned_objects(const struct gpu *g, uint32_t uid)
{
	int n = 0;

	for (int i = 0; i < g->nobjs; i++)
		n += g->objs[i].families && g->objs[i].uid == uid;
	return n;
}

/*
 * One owner's look-alikes past LP_MAX_USER_OBJECTS: not kept, not probed
 * (the stand-in), counted with the refused; said once per owner.
 */
static int user_past_share(struct lib_probes *gp, const struct gpu_object *o, pid_t pid)
{
	int i;

	gp->refused++;
	for (i = 0; i < gp->nsaid_uid && gp->said_uid[i] != o->uid; i++)
		;
	if (i == gp->nsaid_uid && i < LP_MAX_SAID_UIDS) {
		gp->said_uid[gp->nsaid_uid++] = o->uid;
		fprintf(stderr, "trainbpf: warning: %s (pid %d): uid %u owns %d libraries "
			"kept already: not probed, nor more of theirs\n", o->path, pid, o->uid,
			LP_MAX_USER_OBJECTS);
	}
	return plain_object(gp);
}

/*
 * Reads which probed functions an object defines: once per file as it is
 * (st: fstat of fd). A file rewritten in place, or a new one on a reused
 * inode, is read again: its old offsets would put an int3 in the middle of
 * another program's instructions.
 */
static int object_get(struct lib_probes *gp, const struct stat *st, int fd,
		      const char *path, pid_t pid)
{
	const char *names[TB_MAX_APIS];
	struct gpu *g = gp->gpu;
	struct gpu_object o = { 0 };
	struct elf_info info;
	int found, idx;

	for (int i = g->nobjs - 1; i >= 0; i--)
		if (same_file(&g->objs[i], st))
			return i;
	o.dev = st->st_dev;
	o.ino = st->st_ino;
	o.size = st->st_size;
	o.mtime_ns = ts_ns(&st->st_mtim);
	o.ctime_ns = ts_ns(&st->st_ctim);
	o.uid = st->st_uid;
	snprintf(o.path, sizeof(o.path), "%s", path);
	for (int i = 0; i < probe_nfns; i++)
		names[i] = probe_fns[i].name;
	found = elf_find_functions(fd, names, probe_nfns, o.offs, &info);
	probe_points(&o, fd);
	object_families(&o, found, fd, path, &info);
	warn_object(&o, &info, pid);
	if (!o.families && g->nobjs >= LP_MAX_OBJECTS)
		return plain_object(gp);
	if (o.families && o.uid && owned_objects(g, o.uid) >= LP_MAX_USER_OBJECTS)
		return user_past_share(gp, &o, pid);
	idx = gpu_object_add(g);
	if (idx >= 0)
		g->objs[idx] = o;
	return idx;
}

/* The mapping of the file m names, as an index into the process's maps; -1. */
static int mapping_find(const struct lp_proc *p, const struct map_line *m)
{
	for (int i = 0; i < p->nmaps; i++)
		if (p->maps[i].dev == m->dev && p->maps[i].ino == m->ino)
			return i;
	return -1;
}

static int add_link(struct lp_map *am, struct bpf_link *l)
{
	struct bpf_link **n = realloc(am->links, (am->nlinks + 1) * sizeof(*n));

	if (!n) {
		bpf_link__destroy(l);
		return -1;
	}
	am->links = n;
	am->links[am->nlinks++] = l;
	return 0;
}

static uint64_t cookie_of(const struct gpu_object *o, int api)
{
	uint64_t c = probe_fn_cookie(api);

	if (!o->torch_legacy || probe_fns[api].kind != TB_AK_TORCH_OP)
		return c;
	return c | TB_COOKIE_LEGACY | (o->nop_returns ? TB_COOKIE_RET_SITE : 0);
}

static struct bpf_link *attach_one(struct bpf_program *prog, pid_t pid, const char *path,
				   const struct gpu_object *o, int api, bool ret)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = ret, .bpf_cookie = cookie_of(o, api));

	return bpf_program__attach_uprobe_opts(prog, pid, path, o->probe_at[api], &opts);
}

/* Is api probed in o: defined there, not an alias, and asked for? */
static bool probed(const struct lib_probes *gp, const struct gpu_object *o, int api)
{
	return o->offs[api] && !o->alias[api] &&
	       (probe_fns[api].kind != TB_AK_LAUNCH || gp->launches) &&
	       (!probe_kind_is_torch(probe_fns[api].kind) || gp->phases);
}

/* Whether a function of kind k gets program p. */
static bool gets(enum tb_api_kind k, enum lp_prog p)
{
	switch (p) {
	case LP_GPU_RET:
	case LP_GPU_ENTRY:
		return k < TB_AK_LAUNCH;
	case LP_LAUNCH:
		return k == TB_AK_LAUNCH;
	case LP_TORCH_RET:
		return k == TB_AK_TORCH_BACKWARD || k == TB_AK_PYLOCK;
	case LP_TORCH_ENTRY:
		return probe_kind_is_torch(k);
	default:
		return false;
	}
}

static bool is_return(enum lp_prog p)
{
	return p == LP_GPU_RET || p == LP_TORCH_RET;
}

static struct bpf_program *program(const struct trainbpf_bpf *skel, enum lp_prog p,
				   bool multi)
{
	switch (p) {
	case LP_GPU_RET:
		return multi ? skel->progs.gpu_exit_multi : skel->progs.gpu_exit;
	case LP_GPU_ENTRY:
		return multi ? skel->progs.gpu_enter_multi : skel->progs.gpu_enter;
	case LP_LAUNCH:
		return multi ? skel->progs.gpu_launch_multi : skel->progs.gpu_launch;
	case LP_TORCH_RET:
		return multi ? skel->progs.torch_return_multi : skel->progs.torch_return;
	default:
		return multi ? skel->progs.torch_entry_multi : skel->progs.torch_entry;
	}
}

/* The functions of o that program p probes; probes[] counts entries per family. */
static int select_apis(const struct lib_probes *gp, const struct gpu_object *o,
		       enum lp_prog p, uint64_t *offs, uint64_t *cookies, int *probes)
{
	int n = 0;

	for (int i = 0; i < probe_nfns; i++) {
		const struct probe_fn *a = &probe_fns[i];

		if (!probed(gp, o, i) || !gets(a->kind, p))
			continue;
		offs[n] = o->probe_at[i];
		cookies[n++] = cookie_of(o, i);
		if (!is_return(p))
			probes[a->family]++;
	}
	return n;
}

static void close_multi(struct lp_map *am)
{
	for (int k = 0; k < LP_NPROGS; k++) {
		if (am->multi_fds[k] >= 0)
			close(am->multi_fds[k]);
		am->multi_fds[k] = -1;
	}
}

/*
 * One uprobe_multi link per program, in enum lp_prog's order. Returns
 * -errno when the kernel refuses: the caller falls back to one perf-event
 * uprobe per function.
 */
static int attach_multi(struct lib_probes *gp, pid_t pid, struct gpu_mapping *mm,
			struct lp_map *am, const char *path)
{
	const struct gpu_object *o = &gp->gpu->objs[mm->obj];
	uint64_t offs[TB_MAX_APIS], cookies[TB_MAX_APIS];
	int probes[LIB_NFAMILIES] = {};

	for (int p = 0; p < LP_NPROGS; p++) {
		int n = select_apis(gp, o, p, offs, cookies, probes), fd;

		if (!n)
			continue;
		fd = uprobe_multi_attach(bpf_program__fd(program(gp->tr->skel, p, true)), pid,
					 path, offs, cookies, n, is_return(p));
		if (fd < 0) {
			close_multi(am);
			return fd;
		}
		am->multi_fds[p] = fd;
	}
	memcpy(mm->probes, probes, sizeof(probes));
	return 0;
}

/* A perf-event uprobe per function and program; how many failed, the last error in *err. */
static int attach_each(struct lib_probes *gp, pid_t pid, struct gpu_mapping *mm,
		       struct lp_map *am, const char *path, int *err)
{
	const struct gpu_object *o = &gp->gpu->objs[mm->obj];
	int failed = 0;

	for (int i = 0; i < probe_nfns; i++) {
		const struct probe_fn *a = &probe_fns[i];
		bool ok = true;

		if (!probed(gp, o, i))
			continue;
		for (int p = 0; p < LP_NPROGS && ok; p++) {
			struct bpf_link *l;

			if (!gets(a->kind, p))
				continue;
			l = attach_one(program(gp->tr->skel, p, false), pid, path, o, i,
				       is_return(p));
			ok = l && !add_link(am, l);
		}
		if (!ok) {
			failed++, *err = errno;
			continue;
		}
		mm->probes[a->family]++;
	}
	return failed;
}

static bool uses_multi(const struct lp_map *am)
{
	for (int k = 0; k < LP_NPROGS; k++)
		if (am->multi_fds[k] >= 0)
			return true;
	return false;
}

/* torch < 2.0: a uprobe where each torch.ops call returns (no uretprobe). */
static int attach_op_returns(struct lib_probes *gp, pid_t pid, struct lp_map *am,
			     const char *path, const struct gpu_object *o)
{
	int api = 0, failed = 0;

	while (api < probe_nfns && probe_fns[api].kind != TB_AK_TORCH_OP)
		api++;
	for (int i = 0; gp->phases && api < probe_nfns && i < o->nop_returns; i++) {
		LIBBPF_OPTS(bpf_uprobe_opts, opts,
			    .bpf_cookie = TB_COOKIE(api, TB_AK_TORCH_OP_RET, 0, 0, 0, 0));
		struct bpf_link *l = bpf_program__attach_uprobe_opts(gp->tr->skel->progs.torch_entry,
								     pid, path, o->op_returns[i],
								     &opts);

		if (!l || add_link(am, l))
			failed++;
	}
	return failed;
}

/* The entry and return order is enum lp_prog's (lib_probes.h). */
static void attach_object(struct lib_probes *gp, pid_t pid, struct gpu_mapping *mm,
			  struct lp_map *am, const char *path)
{
	const struct gpu_object *o = &gp->gpu->objs[mm->obj];
	int failed = 0, err = 0, n = 0;

	/* Before the entries: an exit op's entry waits for its return site. */
	if (attach_op_returns(gp, pid, am, path, o))
		fprintf(stderr, "trainbpf: warning: %s (pid %d): no probe where torch.ops calls return: its exit ops close no bracket\n",
			o->path, pid);
	if (gp->tr->uprobe_multi) {
		err = attach_multi(gp, pid, mm, am, path);
		if (!err)
			goto done;
		if (gp->verbose)
			fprintf(stderr, "trainbpf: uprobe_multi on %s: %s; one probe per function\n",
				o->path, strerror(-err));
		err = 0;
	}
	failed = attach_each(gp, pid, mm, am, path, &err);
	if (failed)
		fprintf(stderr, "trainbpf: warning: %d probes on %s (pid %d) failed: %s\n",
			failed, o->path, pid, strerror(err));
done:
	for (int f = 0; f < LIB_NFAMILIES; f++)
		n += mm->probes[f];
	if (gp->verbose)
		fprintf(stderr, "trainbpf: %.3f s: %d functions probed in %s (pid %d)%s\n",
			(now_ns() - gp->t0) / 1e9, n, o->path, pid,
			uses_multi(am) ? " (uprobe_multi)" : "");
}

/* Tells BPF where this process's CUDA runtime code is (see tb_rt_ranges). */
static void update_rt_ranges(struct lib_probes *gp, struct lp_proc *p)
{
	const struct gpu_proc *mp = model_of(gp, p);
	struct tb_rt_ranges r = {};
	pid_t pid = mp->pid;
	int n = 0;

	for (int i = 0; i < p->nmaps && n < TB_MAX_RT_RANGES; i++) {
		if (!(gp->gpu->objs[mp->maps[i].obj].families & (1u << LIB_CUDART)))
			continue;
		r.lo[n] = p->maps[i].lo;
		r.hi[n++] = p->maps[i].hi;
	}
	if (n)
		bpf_map_update_elem(bpf_map__fd(gp->tr->skel->maps.rt_ranges), &pid, &r, BPF_ANY);
}

/* Room for one more mapping in the process's probes; NULL if out of memory. */
static struct lp_map *add_map(struct lp_proc *p, const struct map_line *m)
{
	struct lp_map *am = tb_append(&p->maps, &p->nmaps, sizeof(*am));

	if (!am)
		return NULL;
	for (int k = 0; k < LP_NPROGS; k++)
		am->multi_fds[k] = -1;
	am->lo = m->lo;
	am->hi = m->hi;
	am->dev = m->dev;
	am->ino = m->ino;
	return am;
}

/*
 * Whose code trainbpf may put probes in: a file owned by root or by the
 * process's own user, and not writable by others. Anything else any user
 * could rewrite under a probe, or place in a shared directory to have it
 * probed in a process not theirs. Group-writable files stay probed: a
 * team's shared environment (umask 002) is one, and its group can change
 * the job's code anyway. The process's user is its /proc directory's
 * owner (its effective uid).
 */
static bool may_probe(pid_t pid, const struct stat *st)
{
	char dir[32];
	struct stat ps;

	if (st->st_mode & S_IWOTH)
		return false;
	if (!st->st_uid)
		return true;
	snprintf(dir, sizeof(dir), "/proc/%d", pid);
	return !stat(dir, &ps) && ps.st_uid == st->st_uid;
}

/* Not probed: counted, said once per *said (a file's, or a process's). */
static void refuse(struct lib_probes *gp, const struct gpu_object *o, pid_t pid,
		   const char *why, bool *said)
{
	gp->refused++;
	if (*said)
		return;
	*said = true;
	fprintf(stderr, "trainbpf: warning: %s (pid %d) is %s: not probed\n", o->path, pid, why);
}

/*
 * Probes the object fd holds through fd itself, so that the kernel puts
 * them in the very file that was read, not in whatever the path names by
 * then; and only if it is still as it was read (no write in place since).
 */
static void attach_checked(struct lib_probes *gp, struct lp_proc *p, struct gpu_mapping *mm,
			   struct lp_map *am, int fd, const struct stat *st)
{
	struct gpu_object *o = &gp->gpu->objs[mm->obj];
	pid_t pid = pid_of(gp, p);
	struct stat now;
	char path[64];

	if (!may_probe(pid, st)) {
		refuse(gp, o, pid, "writable by others or owned by another user", &o->refused);
		return;
	}
	if (p->nprobed >= LP_MAX_PROBED) {
		refuse(gp, o, pid, "one library too many in its process (and any after it)",
		       &p->said_max);
		return;
	}
	if (fstat(fd, &now) || !same_file(o, &now)) {
		refuse(gp, o, pid, "being rewritten", &o->refused);
		return;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	attach_object(gp, pid, mm, am, path);
	p->nprobed++;
}

/* A file the process newly maps: probed if it holds CUDA or NCCL code. */
static void new_mapping(struct lib_probes *gp, struct lp_proc *p, const struct map_line *m)
{
	pid_t pid = pid_of(gp, p);
	struct gpu_mapping *mm;
	struct lp_map *am;
	struct stat st;
	int fd, obj;

	fd = procmaps_open_file(pid, m, &st);
	if (fd < 0)
		return;		/* unmapped meanwhile, or not ours to read */
	obj = object_get(gp, &st, fd, m->path, pid);
	if (obj < 0)
		goto cleanup;
	/* Both lists grow together: the model's maps and ours stay parallel. */
	am = add_map(p, m);
	if (!am)
		goto cleanup;
	/* Files past the cache share one stand-in: a mapping each, or each scan reads them again. */
	mm = obj == gp->plain ? gpu_mapping_append(model_of(gp, p), obj) :
				gpu_mapping_add(model_of(gp, p), obj);
	if (!mm || model_of(gp, p)->nmaps != p->nmaps) {
		p->nmaps--;
		goto cleanup;
	}
	if (gp->gpu->objs[obj].families)
		attach_checked(gp, p, mm, am, fd, &st);
cleanup:
	close(fd);
}

static void scan_process(struct lib_probes *gp, struct lp_proc *p)
{
	struct procmaps pm;
	struct map_line m;
	bool runtime_new = false;

	if (procmaps_open(&pm, pid_of(gp, p), false))
		return;
	while (procmaps_next(&pm, &m)) {
		const struct gpu_proc *mp;
		int i = mapping_find(p, &m);

		if (i >= 0) {
			/* A library's code can span several mappings. */
			if (m.lo < p->maps[i].lo)
				p->maps[i].lo = m.lo;
			if (m.hi > p->maps[i].hi)
				p->maps[i].hi = m.hi;
			continue;
		}
		if (procmaps_path(&pm, &m))
			continue;
		new_mapping(gp, p, &m);
		mp = model_of(gp, p);
		runtime_new |= mp->nmaps &&
			(gp->gpu->objs[mp->maps[mp->nmaps - 1].obj].families & (1u << LIB_CUDART));
	}
	procmaps_close(&pm);
	if (runtime_new && gp->launches)
		update_rt_ranges(gp, p);
}

/* The newest model entry of pid; NULL if none. */
static struct gpu_proc *latest(struct gpu *g, pid_t pid)
{
	for (int i = g->nprocs - 1; i >= 0; i--)
		if (g->procs[i].pid == pid)
			return &g->procs[i];
	return NULL;
}

/* Per communicator: its data calls (comm_stats), into the newest made at its address. */
static void read_comms(struct lib_probes *gp)
{
	int fd = bpf_map__fd(gp->tr->skel->maps.comm_stats);
	struct tb_comm_key key, next;
	struct tb_comm_stat st;
	struct gpu_proc *p;
	void *prev = NULL;

	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &st))
			continue;
		p = latest(gp->gpu, key.tgid);
		if (p)
			gpu_comm_count(p, key.comm, st.calls, st.bytes);
	}
}

/* pid's communicator counts: final in the model, gone from the map. */
static void forget_comms(struct lib_probes *gp, pid_t pid)
{
	int fd = bpf_map__fd(gp->tr->skel->maps.comm_stats);
	const struct gpu_proc *p = gpu_proc_find(gp->gpu, pid);

	for (int c = 0; p && c < p->ncomms; c++) {
		struct tb_comm_key key = { .tgid = pid, .comm = p->comms[c].comm };

		bpf_map_delete_elem(fd, &key);
	}
}

static void proc_gone(struct lib_probes *gp, struct lp_proc *p)
{
	pid_t pid = pid_of(gp, p);

	if (p->detached)
		return;
	lib_probes_read(gp);
	detach(gp, p, false);
	p->detached = true;
	model_of(gp, p)->exited = true;
	bpf_map_delete_elem(bpf_map__fd(gp->tr->skel->maps.rt_ranges), &pid);
	/* Its counts are final here; the pid may come back as another process. */
	for (int a = 0; a < probe_nfns; a++) {
		struct tb_api_key key = { .tgid = pid, .api = a };

		bpf_map_delete_elem(bpf_map__fd(gp->tr->skel->maps.api_stats), &key);
	}
	forget_comms(gp, pid);
}

/* Detached: nothing left to do but free; the model keeps the counts. */
static void prune(struct lib_probes *gp)
{
	int k = 0, *map;

	for (int i = 0; i < gp->nprocs; i++) {
		if (gp->procs[i].detached) {
			free(gp->procs[i].maps);
			continue;
		}
		gp->procs[k++] = gp->procs[i];
	}
	gp->nprocs = k;
	map = malloc((gp->gpu->nprocs ? gp->gpu->nprocs : 1) * sizeof(*map));
	if (!map)
		return;
	if (gpu_fold_exited(gp->gpu, map))
		for (int i = 0; i < gp->nprocs; i++)
			gp->procs[i].proc = map[gp->procs[i].proc];
	free(map);
}

/*
 * A process's probes go when it has exited, or when the job's process of
 * that pid started after they were made (its pid was reused).
 */
static void detach_gone(struct lib_probes *gp, const struct job *job)
{
	bool any = false;

	for (int j = 0; j < gp->nprocs; j++) {
		struct lp_proc *p = &gp->procs[j];
		const struct proc_rec *r;

		if (p->detached)
			continue;
		r = job_proc_const(job, pid_of(gp, p));
		if (r && job_proc_alive(r) && r->start_ns <= p->first_ns)
			continue;
		proc_gone(gp, p);
		any = true;
	}
	if (any)
		prune(gp);
}

/*
 * Maps are read when the code changed since they were last read: at once
 * if it had been still or none was read yet, else once it stops changing
 * or a while has passed. A library named like one to probe is read at once
 * anyway (lib_probes_on_library): a job can train within a few hundred ms
 * of loading libtorch, and what runs before the probes is lost.
 */
static bool scan_due(const struct lp_proc *p, uint64_t code, uint64_t now)
{
	if (!code || code == p->code_kb)
		return false;
	return !p->loading || !p->nmaps || code == p->seen_kb ||
	       now - p->scan_ns >= SCAN_LOADING_NS;
}

/* Maps: milliseconds for a PyTorch process. */
static void scan_now(struct lib_probes *gp, struct lp_proc *p, uint64_t code)
{
	p->scan_ns = now_ns();
	p->code_kb = code;
	scan_process(gp, p);
}

/* A forked data-loader worker is a copy of its parent; CUDA cannot be used across fork. */
static bool probes_its_own(const struct proc_rec *r)
{
	return r && job_proc_alive(r) && r->role != TB_ROLE_WORKER;
}

void lib_probes_tick(struct lib_probes *gp, const struct job *job, uint64_t now)
{
	detach_gone(gp, job);
	for (int i = 0; i < job->nprocs; i++) {
		const struct proc_rec *r = &job->procs[i];
		struct lp_proc *p;
		uint64_t code;

		if (!probes_its_own(r))
			continue;
		p = proc_get(gp, r->pid, now);
		if (!p || now < p->next_scan_ns)
			continue;
		code = procfs_code_kb(r->pid);
		if (scan_due(p, code, now))
			scan_now(gp, p, code);
		p->loading = code != p->seen_kb;
		p->seen_kb = code;
		p->next_scan_ns = now + (p->loading || now - p->first_ns < SCAN_FAST_FOR_NS ?
					 SCAN_FAST_NS : SCAN_SLOW_NS);
	}
}

void lib_probes_on_library(struct lib_probes *gp, const struct job *job, pid_t pid,
			   uint64_t now)
{
	const struct proc_rec *r = job_proc_const(job, pid);
	struct lp_proc *p;

	if (!gp->tr || !probes_its_own(r))
		return;
	p = proc_get(gp, pid, now);
	if (!p)
		return;
	if (gp->verbose)
		fprintf(stderr, "trainbpf: %.3f s: pid %d mapped a library to probe\n",
			(now_ns() - gp->t0) / 1e9, pid);
	scan_now(gp, p, procfs_code_kb(pid));
}

void lib_probes_on_exec(struct lib_probes *gp, pid_t pid, uint64_t ts)
{
	for (int i = 0; i < gp->nprocs; i++) {
		struct lp_proc *p = &gp->procs[i];

		if (pid_of(gp, p) != pid || p->detached || p->scan_ns > ts)
			continue;
		detach(gp, p, true);
		p->code_kb = p->seen_kb = 0;
		p->loading = false;
		p->first_ns = now_ns();
		p->next_scan_ns = 0;
	}
}

void lib_probes_read(struct lib_probes *gp)
{
	struct gpu *g = gp->gpu;
	struct tb_api_key key, next;
	struct tb_api_stat st;
	struct gpu_proc *p;
	void *prev = NULL;
	int fd;

	if (!gp->tr)
		return;
	read_comms(gp);
	fd = bpf_map__fd(gp->tr->skel->maps.api_stats);
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (key.api >= TB_MAX_APIS || bpf_map_lookup_elem(fd, &key, &st))
			continue;
		if ((p = latest(g, key.tgid)))
			p->stat[key.api] = st;
	}
}
