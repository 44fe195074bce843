// SPDX-License-Identifier: BSD-3-Clause
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "elf_syms.h"
#include "grow.h"
#include "job.h"
#include "procfs.h"
#include "procmaps.h"
#include "pyreader.h"
#include "pystacks.h"
#include "tracer.h"
#include "trainbpf.skel.h"

/* Interpreters and threads per process walked at most: a list gone bad ends there. */
#define PY_MAX_INTERPS 8
#define PY_MAX_THREADS 1024
/* Time entries read from BPF per batch. */
#define PY_BATCH 1024
/*
 * A process without an interpreter yet is looked at again, PY_LOOKS
 * times: one just exec'd may not have mapped libpython at the first look.
 * The next PY_SOON ticks each, for it; then every PY_LOOK_TICKS.
 */
#define PY_LOOKS 15
#define PY_SOON 5
#define PY_LOOK_TICKS 5

static int read_mem(int mem, uint64_t addr, void *buf, size_t len)
{
	return pread(mem, buf, len, (off_t)addr) == (ssize_t)len ? 0 : -1;
}

static int read_u64(int mem, uint64_t addr, uint64_t *v)
{
	return read_mem(mem, addr, v, sizeof(*v));
}

/*
 * A str object's text, as UTF-8 (compact strings: every identifier and
 * file name CPython makes). "?" if it cannot be read.
 */
static void read_str(const struct py_proc *pp, uint64_t obj, char *out, size_t len)
{
	const struct py_offsets *o = &pp->off;
	uint32_t state, kind, ascii, compact;
	unsigned char raw[512];
	int64_t n;
	size_t w = 0;

	snprintf(out, len, "?");
	if (!obj || read_mem(pp->mem, obj + o->unicode_state, &state, sizeof(state)) ||
	    read_mem(pp->mem, obj + o->unicode_length, &n, sizeof(n)) || n < 0)
		return;
	/* PyASCIIObject.state: interned:2, kind:3, compact:1, ascii:1 (3.8-3.13). */
	kind = state >> 2 & 7;
	compact = state >> 5 & 1;
	ascii = state >> 6 & 1;
	if (!compact || (kind != 1 && kind != 2 && kind != 4))
		return;
	if ((size_t)n * kind > sizeof(raw))
		n = sizeof(raw) / kind;
	if (read_mem(pp->mem, obj + (ascii ? o->ascii_size : o->compact_size), raw, n * kind))
		return;
	for (int64_t i = 0; i < n && w + 5 < len; i++) {
		uint32_t c = kind == 1 ? raw[i] : kind == 2 ? ((uint16_t *)raw)[i] :
			     ((uint32_t *)raw)[i];

		if (c < 0x80) {
			out[w++] = c >= 0x20 ? (char)c : '?';
		} else if (c < 0x800) {
			out[w++] = (char)(0xc0 | c >> 6);
			out[w++] = (char)(0x80 | (c & 0x3f));
		} else if (c < 0x10000 && (c < 0xd800 || c > 0xdfff)) {
			out[w++] = (char)(0xe0 | c >> 12);
			out[w++] = (char)(0x80 | (c >> 6 & 0x3f));
			out[w++] = (char)(0x80 | (c & 0x3f));
		} else if (c >= 0x10000 && c < 0x110000) {
			out[w++] = (char)(0xf0 | c >> 18);
			out[w++] = (char)(0x80 | (c >> 12 & 0x3f));
			out[w++] = (char)(0x80 | (c >> 6 & 0x3f));
			out[w++] = (char)(0x80 | (c & 0x3f));
		} else {
			out[w++] = '?';
		}
	}
	out[w] = '\0';
}

/* Whether obj is a code object: its type's name is "code". */
static bool is_code(const struct py_proc *pp, uint64_t obj)
{
	uint64_t type, name;
	char s[8] = {};

	return !read_u64(pp->mem, obj + pp->off.ob_type, &type) && type &&
	       !read_u64(pp->mem, type + PY_TP_NAME, &name) &&
	       !read_mem(pp->mem, name, s, 5) && !strcmp(s, "code");
}

/* The function a code object of this process is: named once, then cached. */
static int code_fn(struct pystacks *m, struct py_proc *pp, uint64_t code)
{
	const struct py_offsets *o = &pp->off;
	char name[PY_NAME_LEN], file[PY_FILE_LEN];
	uint64_t pname, pfile;
	int32_t line = 0;
	int lo = 0, hi = pp->ncode, fn;

	while (lo < hi) {
		int mid = (lo + hi) / 2;

		if (pp->code[mid] == code)
			return pp->fn[mid];
		if (pp->code[mid] < code)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (pp->mem >= 0 && is_code(pp, code) &&
	    !read_u64(pp->mem, code + (o->code_qualname >= 0 ? o->code_qualname : o->code_name),
		      &pname) &&
	    !read_u64(pp->mem, code + o->code_filename, &pfile) &&
	    !read_mem(pp->mem, code + o->code_firstlineno, &line, sizeof(line))) {
		read_str(pp, pname, name, sizeof(name));
		read_str(pp, pfile, file, sizeof(file));
	} else {
		snprintf(name, sizeof(name), "(code freed before it was named)");
		file[0] = '\0';
		line = 0;
	}
	fn = pystacks_func(m, name, file, line);
	if (fn < 0 || tb_grow_ptr((void **)&pp->code, &pp->capcode, pp->ncode + 1, sizeof(*pp->code)))
		return fn;
	if (tb_grow_ptr((void **)&pp->fn, &pp->capfn, pp->ncode + 1, sizeof(*pp->fn)))
		return fn;
	memmove(pp->code + lo + 1, pp->code + lo, (pp->ncode - lo) * sizeof(*pp->code));
	memmove(pp->fn + lo + 1, pp->fn + lo, (pp->ncode - lo) * sizeof(*pp->fn));
	pp->code[lo] = code;
	pp->fn[lo] = fn;
	pp->ncode++;
	return fn;
}

static bool exe_of(pid_t pid, uint64_t *dev, uint64_t *ino)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	if (stat(path, &st))
		return false;
	*dev = st.st_dev;
	*ino = st.st_ino;
	return true;
}

/* 3.minor from a file's name: python3.X, libpython3.X.so...; -1 if it does not say. */
static int minor_from_name(const char *path)
{
	const char *b = strrchr(path, '/');
	int minor;

	b = b ? b + 1 : path;
	if (!strncmp(b, "lib", 3))
		b += 3;
	if (sscanf(b, "python3.%d", &minor) == 1 && minor > 0 && minor < 100)
		return minor;
	return -1;
}

/*
 * Where this mapping's file has _PyRuntime and which version it is. 1 if
 * it has it (pp->runtime, pp->off set, or why says what failed), 0 if not.
 */
static int interpreter_in(struct py_proc *pp, const struct map_line *m, int fd, char *why,
			  size_t whylen)
{
	uint64_t va, size, text, bias, vva;
	uint32_t hex = 0;
	int minor = -1;

	if (!elf_exported_object(fd, "_PyRuntime", &va, &size, &text))
		return 0;
	bias = m->lo - text;
	pp->runtime = bias + va;
	/* Py_Version: 3.11 on (PY_VERSION_HEX); before, the file's name says it. */
	if (elf_exported_object(fd, "Py_Version", &vva, &size, &text) &&
	    !read_mem(pp->mem, bias + vva, &hex, sizeof(hex)) && (hex >> 24) == 3)
		minor = hex >> 16 & 0xff;
	else
		minor = minor_from_name(m->path);
	if (minor < 0) {
		snprintf(why, whylen, "%.120s exports _PyRuntime but neither Py_Version nor a name "
			 "that says its version", m->path);
		return 1;
	}
	if (minor >= PY_DEBUG_OFFSETS_MINOR) {
		unsigned char buf[1024];
		size_t len = py_offsets_debug_len();

		if (len > sizeof(buf) || read_mem(pp->mem, pp->runtime, buf, len)) {
			snprintf(why, whylen, "Python 3.%d: its _PyRuntime could not be read", minor);
			return 1;
		}
		if (py_offsets_debug(buf, len, &pp->off, why, whylen))
			return 1;
	} else if (py_offsets_table(minor)) {
		pp->off = *py_offsets_table(minor);
	} else {
		snprintf(why, whylen, "Python 3.%d: not a version the reader knows (3.8 on)", minor);
		return 1;
	}
	pp->on = true;
	snprintf(why, whylen, "Python 3.%d (%.120s)", pp->off.minor, m->path);
	return 1;
}

/*
 * Looks for the interpreter in the executable and libpython*: the only
 * files that define _PyRuntime. Says what it found in the model's notes.
 */
static void find_interpreter(struct pystacks *model, struct py_proc *pp)
{
	char why[200] = "", path[64];
	struct procmaps pm;
	struct map_line m;
	int found = 0;

	snprintf(path, sizeof(path), "/proc/%d/mem", pp->pid);
	pp->mem = open(path, O_RDONLY | O_CLOEXEC);
	if (pp->mem < 0 || procmaps_open(&pm, pp->pid, false)) {
		snprintf(why, sizeof(why), "its memory could not be read (%s)", strerror(errno));
		goto note;
	}
	while (!found && procmaps_next(&pm, &m)) {
		const char *b;
		struct stat st;
		int fd;

		if (procmaps_path(&pm, &m))
			continue;
		b = strrchr(m.path, '/');
		b = b ? b + 1 : m.path;
		if (!(m.dev == pp->exe_dev && m.ino == pp->exe_ino) && strncmp(b, "libpython3", 10))
			continue;
		fd = procmaps_open_file(pp->pid, &m, &st);
		if (fd < 0)
			continue;
		found = interpreter_in(pp, &m, fd, why, sizeof(why));
		close(fd);
	}
	procmaps_close(&pm);
	if (!found)
		snprintf(why, sizeof(why), "no Python interpreter (no _PyRuntime exported by its "
			 "executable or a libpython)");
note:
	pystacks_note(model, pp->pid, pp->on, why);
}

static void publish_layout(struct pyreader *pr, struct py_proc *pp)
{
	const struct py_offsets *o = &pp->off;
	struct tb_py_layout l = {
		.tstate_frame = o->tstate_frame, .cframe_frame = o->cframe_frame,
		.frame_back = o->frame_back, .frame_code = o->frame_code,
		.frame_owner = o->frame_owner, .owner_cstack = o->owner_cstack,
	};
	__u32 key = pp->pid;

	if (bpf_map_update_elem(bpf_map__fd(pr->tr->skel->maps.py_layouts), &key, &l, BPF_ANY)) {
		pp->on = false;
		pystacks_note(pr->m, pp->pid, false, "Python found, but more processes than the "
			      "reader keeps (1024)");
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * The interpreter's threads now: every interpreter's list of thread
 * states, (pthread id, tstate) pairs into ids/ts; how many.
 */
static int walk_threads(const struct py_proc *pp, uint64_t *ids, uint64_t *ts, int max)
{
	const struct py_offsets *o = &pp->off;
	uint64_t interp = 0, t;
	int n = 0;

	if (read_u64(pp->mem, pp->runtime + o->runtime_interp_head, &interp))
		return 0;
	for (int i = 0; interp && i < PY_MAX_INTERPS; i++) {
		if (read_u64(pp->mem, interp + o->interp_threads_head, &t))
			break;
		for (; t && n < max; ) {
			uint64_t id, next;

			if (read_u64(pp->mem, t + o->tstate_thread_id, &id) ||
			    read_u64(pp->mem, t + o->tstate_next, &next))
				break;
			ids[n] = id;
			ts[n++] = t;
			t = next;
		}
		if (read_u64(pp->mem, interp + o->interp_next, &interp))
			break;
	}
	return n;
}

/* BPF's py_threads for this process made what the interpreter lists now. */
static void publish_threads(struct pyreader *pr, struct py_proc *pp)
{
	static uint64_t ids[PY_MAX_THREADS], ts[PY_MAX_THREADS];
	int fd = bpf_map__fd(pr->tr->skel->maps.py_threads);
	struct tb_py_thread_key k = { .tgid = pp->pid };
	int n = walk_threads(pp, ids, ts, PY_MAX_THREADS);
	uint64_t *now = malloc((n ? n : 1) * sizeof(*now));

	if (!now)
		return;
	for (int i = 0; i < n; i++) {
		k.pthread = ids[i];
		bpf_map_update_elem(fd, &k, &ts[i], BPF_ANY);
		now[i] = ids[i];
	}
	qsort(now, n, sizeof(*now), cmp_u64);
	for (int i = 0; i < pp->nids; i++) {
		if (bsearch(&pp->ids[i], now, n, sizeof(*now), cmp_u64))
			continue;
		k.pthread = pp->ids[i];
		bpf_map_delete_elem(fd, &k);
	}
	free(pp->ids);
	pp->ids = now;
	pp->nids = pp->capids = n;
}

static void forget(struct pyreader *pr, struct py_proc *pp)
{
	struct tb_py_thread_key k = { .tgid = pp->pid };
	__u32 key = pp->pid;

	for (int i = 0; i < pp->nids; i++) {
		k.pthread = pp->ids[i];
		bpf_map_delete_elem(bpf_map__fd(pr->tr->skel->maps.py_threads), &k);
	}
	bpf_map_delete_elem(bpf_map__fd(pr->tr->skel->maps.py_layouts), &key);
	if (pp->mem >= 0)
		close(pp->mem);
	pp->mem = -1;
	pp->on = false;
	free(pp->ids);
	pp->ids = NULL;
	pp->nids = pp->capids = 0;
}

static struct py_proc *proc_of(struct pyreader *pr, pid_t pid)
{
	for (int i = 0; i < pr->nprocs; i++)
		if (pr->procs[i].pid == pid)
			return &pr->procs[i];
	return NULL;
}

/*
 * Where the i-th frame kept (innermost first) is in BPF's code[]: past
 * the innermost, the kept are the last frames walked, the i-th of them
 * frame (cut + i) from the innermost (include/pystack.h).
 */
unsigned int pyreader_slot(unsigned int i, uint32_t cut)
{
	return i < TB_PY_INNER ? i : tb_py_slot(i + (cut & ~TB_PY_CUT_OUTER));
}

static int read_named(struct pyreader *pr, struct py_proc *pp, pid_t tgid, uint64_t hash,
		      int *fn, uint32_t *cut, int level);

/* The scope's name as UTF-8 (BPF cut it anywhere), its frame's function. */
static int scope_fn(struct pystacks *m, const struct tb_py_scope *v)
{
	char name[PY_SCOPE_NAME_LEN];

	pystacks_scope_name(name, sizeof(name), &v->name);
	return pystacks_func(m, name, PY_SCOPE_FILE, 0);
}

/*
 * fn (depth frames, none cut) read inside the scope id: with its frame
 * (pystacks_place_scope). Left as read where it cannot be placed: its
 * time is then its frames', as without the scope.
 */
static int place_scope(struct pyreader *pr, struct py_proc *pp, pid_t tgid, uint64_t id,
		       int *fn, int depth, int level)
{
	struct tb_py_scope_key k = { .tgid = tgid, .id = id };
	int open[PY_STACK_MAX], out[PY_STACK_MAX], on, sfn, n;
	struct tb_py_scope v;
	uint32_t ocut;

	if (level >= TB_NBRACKET ||
	    bpf_map_lookup_elem(bpf_map__fd(pr->tr->skel->maps.py_scopes), &k, &v))
		return depth;
	on = read_named(pr, pp, tgid, v.stack, open, &ocut, level + 1);
	if (on < 0 || ocut || (sfn = scope_fn(pr->m, &v)) < 0)
		return depth;
	n = pystacks_place_scope(pr->m, fn, depth, open, on, sfn, out, PY_STACK_MAX);
	if (n < 0) {
		pr->m->scopes_unplaced++;
		return depth;
	}
	memcpy(fn, out, n * sizeof(*fn));
	return n;
}

/*
 * A stack BPF read, named into fn (PY_STACK_MAX), its scope placed: its
 * depth, -1 if it cannot be named.
 */
static int read_named(struct pyreader *pr, struct py_proc *pp, pid_t tgid, uint64_t hash,
		      int *fn, uint32_t *cut, int level)
{
	struct tb_py_stack_key k = { .tgid = tgid, .hash = hash };
	struct tb_py_stack st;

	if (bpf_map_lookup_elem(bpf_map__fd(pr->tr->skel->maps.py_stacks), &k, &st) ||
	    st.depth > TB_PY_DEPTH)
		return -1;
	for (unsigned int i = 0; i < st.depth; i++)
		if ((fn[i] = code_fn(pr->m, pp, st.code[pyreader_slot(i, st.cut)])) < 0)
			return -1;	/* out of memory: its time is counted as not named */
	*cut = st.cut;
	/* A deep stack's frames between were not kept: where it opened may be among them. */
	if (st.scope && !st.cut)
		return place_scope(pr, pp, tgid, st.scope, fn, (int)st.depth, level);
	return (int)st.depth;
}

/* A stack BPF read, named: its index in the model, -1 if it cannot be. */
static int name_stack(struct pyreader *pr, pid_t tgid, uint64_t hash)
{
	int fn[PY_STACK_MAX], idx = pystacks_find(pr->m, tgid, hash), depth;
	struct py_proc *pp;
	uint32_t cut = 0;

	if (idx >= 0)
		return idx;
	if (hash == TB_PY_EMPTY)
		return pystacks_add(pr->m, tgid, hash, fn, 0, 0);
	pp = proc_of(pr, tgid);
	if (!pp || (depth = read_named(pr, pp, tgid, hash, fn, &cut, 0)) < 0)
		return -1;
	return pystacks_add(pr->m, tgid, hash, fn, depth, cut);
}

/*
 * BPF's time per stack and span into the model's rows: a span's once it
 * is over and placed (its entries then leave BPF's map, which stays the
 * size of the spans under way); every entry at the end (finishing).
 */
static void read_times(struct pyreader *pr, bool finishing)
{
	static struct tb_py_time_key keys[PY_BATCH];
	static struct tb_py_time vals[PY_BATCH];
	int fd = bpf_map__fd(pr->tr->skel->maps.py_time);
	struct tb_py_time_key in, out, *gone = NULL;
	int ngone = 0, capgone = 0;
	bool first = true;

	for (;;) {
		__u32 n = PY_BATCH;
		int err = bpf_map_lookup_batch(fd, first ? NULL : &in, &out, keys, vals, &n, NULL);

		for (__u32 i = 0; i < n; i++) {
			bool final;
			int ph = pystacks_phase_of(pr->m, keys[i].tid, keys[i].seq, keys[i].phase,
						   &final);
			int st;

			/* Named now, final or not: its code may be gone with its process later. */
			st = name_stack(pr, keys[i].tgid, keys[i].hash);
			if (!final && !finishing)
				continue;
			if (st < 0)
				pr->m->rows_dropped += vals[i].ns;
			else
				pystacks_add_time(pr->m, st, keys[i].tid, ph >= 0 ? ph : PH_OTHER,
						  keys[i].cat, keys[i].own, keys[i].how, vals[i].ns,
						  vals[i].n);
			if (!finishing &&
			    !tb_grow_ptr((void **)&gone, &capgone, ngone + 1, sizeof(*gone)))
				gone[ngone++] = keys[i];
		}
		if (err)
			break;	/* ENOENT: the last batch */
		in = out;
		first = false;
	}
	/* After the walk: deleting during it would skip entries. */
	for (int i = 0; i < ngone; i++)
		bpf_map_delete_elem(fd, &gone[i]);
	free(gone);
	if (!finishing)
		pystacks_prune(pr->m);
	pr->m->bpf = pr->tr->skel->bss->py_counters;
}

void pyreader_finish(struct pyreader *pr, uint64_t end)
{
	pystacks_finish(pr->m, end);
	read_times(pr, true);
}

void pyreader_tick(struct pyreader *pr, const struct job *job)
{
	for (int i = 0; i < job->nprocs; i++) {
		const struct proc_rec *p = &job->procs[i];
		struct py_proc *pp;
		uint64_t dev, ino;

		if (p->folded || !p->pid)
			continue;
		pp = proc_of(pr, p->pid);
		if (pp && pp->on) {
			const struct thread_rec *lt = job_trainer_thread(p);

			pystacks_set_role(pr->m, p->pid, p->role,
					  p->role == TB_ROLE_TRAINER && lt ? lt->tid : 0);
		}
		if (!job_proc_alive(p)) {
			if (pp && pp->on)
				forget(pr, pp);
			continue;
		}
		if (!exe_of(p->pid, &dev, &ino))
			continue;
		if (!pp) {
			if (tb_grow_ptr((void **)&pr->procs, &pr->capprocs, pr->nprocs + 1,
				 sizeof(*pr->procs)))
				continue;
			pp = &pr->procs[pr->nprocs++];
			memset(pp, 0, sizeof(*pp));
			pp->pid = p->pid;
			pp->mem = -1;
		} else if (pp->exe_dev == dev && pp->exe_ino == ino) {
			if (pp->on)
				publish_threads(pr, pp);
			if (pp->on || pp->looks >= PY_LOOKS || --pp->wait > 0)
				continue;
		} else {
			pp->looks = 0;	/* it exec'd: another program */
		}
		forget(pr, pp);
		pp->ncode = 0;
		pp->exe_dev = dev;
		pp->exe_ino = ino;
		find_interpreter(pr->m, pp);
		pp->looks++;
		pp->wait = pp->looks < PY_SOON ? 1 : PY_LOOK_TICKS;
		if (pp->on)
			publish_layout(pr, pp);
		if (pp->on)
			publish_threads(pr, pp);
	}
	read_times(pr, false);
}

int pyreader_open(struct pyreader *pr, struct tracer *tr, struct pystacks *m)
{
	struct perf_event_attr attr = {
		.size = sizeof(attr),
		.type = PERF_TYPE_SOFTWARE,
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.sample_period = m->period_ns,
	};
	int ncpu = libbpf_num_possible_cpus();

	memset(pr, 0, sizeof(*pr));
	pr->tr = tr;
	pr->m = m;
	if (ncpu <= 0 || !(pr->links = calloc(ncpu, sizeof(*pr->links))))
		goto fail;
	for (int cpu = 0; cpu < ncpu; cpu++) {
		int fd = syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
		struct bpf_link *l;

		if (fd < 0) {
			if (errno == ENODEV)	/* a possible CPU that is not online */
				continue;
			fprintf(stderr, "trainbpf: --functions: perf_event_open on CPU %d: %s\n",
				cpu, strerror(errno));
			goto fail;
		}
		l = bpf_program__attach_perf_event(tr->skel->progs.py_sample, fd);
		if (!l) {
			close(fd);
			fprintf(stderr, "trainbpf: --functions: attaching the sampler on CPU %d: %s\n",
				cpu, strerror(errno));
			goto fail;
		}
		pr->links[pr->nlinks++] = l;	/* the link owns fd */
	}
	return 0;
fail:
	pyreader_close(pr);
	return -1;
}

void pyreader_close(struct pyreader *pr)
{
	for (int i = 0; i < pr->nlinks; i++)
		bpf_link__destroy(pr->links[i]);
	free(pr->links);
	for (int i = 0; i < pr->nprocs; i++) {
		struct py_proc *pp = &pr->procs[i];

		if (pp->mem >= 0)
			close(pp->mem);
		free(pp->ids);
		free(pp->code);
		free(pp->fn);
	}
	free(pr->procs);
	memset(pr, 0, sizeof(*pr));
}
