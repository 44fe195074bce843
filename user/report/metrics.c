// SPDX-License-Identifier: BSD-3-Clause
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "gpu.h"
#include "metrics.h"
#include "stall.h"
#include "phases.h"
#include "utf8.h"

void metrics_init(struct metrics *m, uint64_t grace_ns)
{
	memset(m, 0, sizeof(*m));
	m->grace_ns = grace_ns;
}

/* key's entry in v->comm, made if there is room, else the other one's. */
static struct mx_comm *comm_slot(struct mx_values *v, uint64_t key)
{
	if (key == MX_COMM_OTHER)
		goto other;
	for (int i = 0; i < v->ncomm; i++)
		if (v->comm[i].key == key)
			return &v->comm[i];
	if (v->ncomm < MX_COMMS) {
		v->comm[v->ncomm] = (struct mx_comm){ .key = key };
		return &v->comm[v->ncomm++];
	}
other:
	v->comm[MX_COMMS].key = MX_COMM_OTHER;
	return &v->comm[MX_COMMS];
}

/* A process's data calls per communicator id (several handles may share one: unknown). */
static void proc_comms(const struct gpu_proc *gp, struct mx_values *v)
{
	for (int c = 0; c < gp->ncomms; c++)
		if (gp->comms[c].calls)
			comm_slot(v, gpu_comm_key(&gp->comms[c]))->calls += gp->comms[c].calls;
}

/*
 * What a process gave so far. A trainer's categories are its main thread's
 * critical path (the report's headline: a wait for another thread counts
 * as what that thread did), others' their main thread's own states; so a
 * process adds one second per second whatever its threads.
 */
static void proc_values(const struct session *ses, const struct proc_rec *p,
			struct mx_values *v, bool *phases)
{
	const struct thread_rec *t = job_trainer_thread(p);
	const struct gpu_proc *gp = gpu_proc_find(&ses->gpu, p->pid);
	const struct ph_thread *pt;

	memset(v, 0, sizeof(*v));
	*phases = false;
	for (int i = 0; i < p->nthreads; i++) {
		v->rbytes += p->threads[i].io_rbytes;
		v->wbytes += p->threads[i].io_wbytes;
	}
	if (t)
		for (int c = 0; c < TB_NCAT; c++)
			v->cat_ns[c] = p->role == TB_ROLE_TRAINER ? t->cp[c] : t->own[c];
	if (gp) {
		struct gpu_sums s;

		gpu_sum_kinds(gp->stat, &s);
		v->syncs = s.syncs;
		v->nccl_ops = s.ops;
		v->nccl_bytes = s.bytes;
		proc_comms(gp, v);
	}
	/* Settled phase time only: a pending step's may still move between phases. */
	pt = t ? ses_phase_thread(ses, t->tid) : NULL;
	if (p->role != TB_ROLE_TRAINER || !pt)
		return;
	*phases = true;
	memcpy(v->phase_ns, pt->tot, sizeof(v->phase_ns));
	v->phase_ns[PH_SETUP] = pt->ends_ns[0];	/* a thread born under the daemon's eye */
	v->steps = pt->steps.steps;
	v->step_ms = pt->steps.step_ms;
	v->epochs = pt->passes;
}

static uint64_t gain(uint64_t now, uint64_t then)
{
	return now > then ? now - then : 0;
}

/*
 * Time split n ways (categories, phases): what cur gained over last, into
 * s. The split of time already counted can change between two updates
 * (an open wait counted as lock is closed as the cpu of the thread it
 * waited for; the trainer thread or the role changes, and with it the
 * values followed), and a counter cannot give back what it counted: the
 * parts that grew are scaled down so that together they add no more than
 * the whole grew, one second per second. Returns what was added.
 */
static uint64_t add_split(uint64_t *s, const uint64_t *cur, const uint64_t *last, int n)
{
	uint64_t d[(int)TB_NCAT > (int)PH_NSHOWN ? (int)TB_NCAT : (int)PH_NSHOWN];
	uint64_t grew = 0, now = 0, then = 0, whole;

	for (int i = 0; i < n; i++) {
		grew += d[i] = gain(cur[i], last[i]);
		now += cur[i];
		then += last[i];
	}
	whole = gain(now, then);
	if (grew <= whole) {
		for (int i = 0; i < n; i++)
			s[i] += d[i];
		return grew;
	}
	for (int i = 0; i < n; i++)
		s[i] += (uint64_t)((unsigned __int128)d[i] * whole / grew);
	return whole;
}

/* Adds what cur gained over last to s; whether anything was. */
static bool add_gain(struct mx_values *s, const struct mx_values *cur,
		     const struct mx_values *last)
{
	uint64_t any = 0, d;

	any += add_split(s->cat_ns, cur->cat_ns, last->cat_ns, TB_NCAT);
	any += add_split(s->phase_ns, cur->phase_ns, last->phase_ns, PH_NSHOWN);
	any += d = gain(cur->steps, last->steps), s->steps += d;
	any += d = gain(cur->epochs, last->epochs), s->epochs += d;
	if (cur->step_ms > last->step_ms)
		s->step_ms += cur->step_ms - last->step_ms;
	any += d = gain(cur->rbytes, last->rbytes), s->rbytes += d;
	any += d = gain(cur->wbytes, last->wbytes), s->wbytes += d;
	any += d = gain(cur->syncs, last->syncs), s->syncs += d;
	any += d = gain(cur->nccl_ops, last->nccl_ops), s->nccl_ops += d;
	any += d = gain(cur->nccl_bytes, last->nccl_bytes), s->nccl_bytes += d;
	for (int c = 0; c <= MX_COMMS; c++) {
		const struct mx_comm *k = &cur->comm[c];
		uint64_t then = 0;

		if (!k->calls)
			continue;
		for (int l = 0; l <= MX_COMMS; l++)
			if (last->comm[l].calls && last->comm[l].key == k->key)
				then = last->comm[l].calls;
		if ((d = gain(k->calls, then)))
			comm_slot(s, k->key)->calls += d, any += d;
	}
	return any;
}

/* id with "~uid<N>" after it, id cut on a character's boundary to fit. */
static void with_uid(char *id, size_t len, const char *base, unsigned int uid)
{
	char tail[24];
	size_t room;

	snprintf(tail, sizeof(tail), "~uid%u", uid);
	room = len - strlen(tail);
	utf8_clean(id, room, base, room);
	strcat(id, tail);
}

/*
 * Who may speak for a job: the user whose processes named it first on
 * this node. Another user's process naming the same job (its environment
 * is its own to set: TORCHELASTIC_RUN_ID, RANK) is a job of its own, its
 * id followed by ~uid<N>: it can never add to the first one's series.
 */
static void claim(const struct metrics *m, char *id, size_t len, unsigned int uid)
{
	char base[JOB_ID_LEN];

	for (int i = 0; i < m->nseries; i++) {
		const struct mx_series *s = &m->series[i];

		if (s->alive_ns && s->uid != uid && !strcmp(s->job, id)) {
			snprintf(base, sizeof(base), "%s", id);
			with_uid(id, len, base, uid);
			return;
		}
	}
}

/* The job's label, as claimed (the process's own labels: it can have none). */
static void label_of(const struct metrics *m, const struct job *job, const struct proc_rec *p,
		     char *id, size_t len, unsigned int *uid)
{
	job_id_of(job, p, id, len, uid);
	claim(m, id, len, *uid);
}

static bool same_labels(const struct mx_series *s, const char *job,
			const struct proc_labels *l, int role, unsigned int uid)
{
	return s->alive_ns && s->role == role && s->rank == l->rank && s->uid == uid &&
	       s->local_rank == l->local_rank && s->world_size == l->world_size &&
	       !strcmp(s->job, job);
}

/* A series made at free_at (a free one, or one more); -1 past the bound. */
static int new_series(struct metrics *m, int free_at, const char *job,
		      const struct proc_labels *l, int role, unsigned int uid, uint64_t now)
{
	struct mx_series *s;

	if (free_at < 0) {
		if (m->nseries == MX_MAX_SERIES) {
			m->series_dropped++;
			return -1;
		}
		s = realloc(m->series, (m->nseries + 1) * sizeof(*s));
		if (!s)
			return -1;
		m->series = s;
		free_at = m->nseries++;
	}
	s = &m->series[free_at];
	memset(s, 0, sizeof(*s));
	snprintf(s->job, sizeof(s->job), "%s", job);
	s->uid = uid;
	s->rank = l->rank;
	s->local_rank = l->local_rank;
	s->world_size = l->world_size;
	s->role = role;
	s->alive_ns = now;
	return free_at;
}

/*
 * The series of these labels, made if new (a free one reused); past the
 * user's bound, the user's overflow series; -1 past the node's.
 */
static int series_of(struct metrics *m, const char *job, const struct proc_labels *l,
		     int role, unsigned int uid, uint64_t now)
{
	static const struct proc_labels none = { .rank = -1, .local_rank = -1, .world_size = -1 };
	int free_at = -1, mine = 0;
	char over[JOB_ID_LEN];

	for (int i = 0; i < m->nseries; i++) {
		if (same_labels(&m->series[i], job, l, role, uid))
			return i;
		if (!m->series[i].alive_ns && free_at < 0)
			free_at = i;
		mine += m->series[i].alive_ns && m->series[i].uid == uid;
	}
	if (mine < MX_MAX_SERIES_PER_UID)
		return new_series(m, free_at, job, l, role, uid, now);
	m->series_dropped++;
	with_uid(over, sizeof(over), "overflow", uid);
	for (int i = 0; i < m->nseries; i++)
		if (same_labels(&m->series[i], over, &none, TB_ROLE_OTHER, uid))
			return i;
	return new_series(m, free_at, over, &none, TB_ROLE_OTHER, uid, now);
}

static unsigned int slot_of(pid_t pid, uint64_t start, int cap)
{
	uint64_t h = ((uint64_t)pid * 0x9E3779B97F4A7C15ull) ^ (start * 0xC2B2AE3D27D4EB4Full);

	return (unsigned int)(h >> 32) & (cap - 1);
}

static int find(const struct metrics *m, pid_t pid, uint64_t start)
{
	if (!m->index_cap) {	/* the index could not be made: slower, never wrong */
		for (int i = 0; i < m->nprocs; i++)
			if (m->procs[i].pid == pid && m->procs[i].start_ns == start)
				return i;
		return -1;
	}
	for (unsigned int k = slot_of(pid, start, m->index_cap);; k = (k + 1) & (m->index_cap - 1)) {
		int i = m->index[k];

		if (i < 0 || (m->procs[i].pid == pid && m->procs[i].start_ns == start))
			return i;
	}
}

/* The processes followed from now on, and their index. */
static int reindex(struct metrics *m, struct mx_proc *procs, int n)
{
	int cap = 64;

	while (cap < 2 * n + 2)
		cap *= 2;
	free(m->index);
	free(m->procs);
	m->procs = procs;
	m->nprocs = n;
	m->index = malloc(cap * sizeof(int));
	m->index_cap = m->index ? cap : 0;
	if (!m->index)
		return -1;
	memset(m->index, 0xff, cap * sizeof(int));
	for (int i = 0; i < n; i++) {
		unsigned int k = slot_of(procs[i].pid, procs[i].start_ns, cap);

		while (m->index[k] >= 0)
			k = (k + 1) & (cap - 1);
		m->index[k] = i;
	}
	return 0;
}

/*
 * Its labels, or, not read yet (it exited first: a short helper), its
 * nearest ancestor's, whose environment it inherited. NULL if none.
 */
static const struct proc_labels *labels_of(const struct job *job, const struct proc_rec *p)
{
	for (int hops = 0; p && hops < 64; hops++) {
		const struct proc_rec *up;

		if (p->labels.reads)
			return &p->labels;
		up = job_proc_const(job, p->ppid);
		p = up != p ? up : NULL;
	}
	return NULL;
}

/*
 * No RANK in its environment (mp.spawn sets none): its first NCCL
 * communicator's rank and size, where it made one. Else ranks of one
 * job share a series ("unknown").
 */
static void nccl_rank(const struct session *ses, const struct proc_rec *p, struct proc_labels *l)
{
	const struct gpu_proc *gp = gpu_proc_find(&ses->gpu, p->pid);

	if (l->rank >= 0 || !gp || !gp->ncomms || gp->comms[0].rank < 0)
		return;
	l->rank = gp->comms[0].rank;
	if (l->world_size < 0)
		l->world_size = gp->comms[0].nranks;
}

/* The stalled job's culprit rank, if p's trainer is it: its phase and wait, for the labels. */
static void culprit_of(struct mx_series *s, const struct session *ses, const struct proc_rec *p)
{
	const struct stall *st = ses_stall(ses);
	const struct stall_rank *r;

	if (p->role != TB_ROLE_TRAINER || !st || !(r = stall_culprit(st, p->pid)))
		return;
	s->culprit_phase = ph_shown_of(r->phase);
	s->culprit_wait = r->wait;
}

/* One process: its gain into its series. Returns its entry, kept in out. */
static void follow(struct metrics *m, const struct session *ses, const struct proc_rec *p,
		   const struct proc_labels *l, uint64_t now, struct mx_proc *out)
{
	const struct job *job = &ses->job;
	int old = find(m, p->pid, p->start_ns), si = -1;
	bool alive = job_proc_alive(p), phases;
	struct proc_labels eff = *l;
	char id[JOB_ID_LEN];
	struct mx_values cur;
	unsigned int uid;

	proc_values(ses, p, &cur, &phases);
	if (old >= 0)
		*out = m->procs[old];
	else
		*out = (struct mx_proc){ .pid = p->pid, .start_ns = p->start_ns, .series = -1 };
	/* Labels may come late (read after an exec): a process follows them. */
	label_of(m, job, p, id, sizeof(id), &uid);
	nccl_rank(ses, p, &eff);
	if (alive || add_gain(&(struct mx_values){ 0 }, &cur, &out->last))
		si = series_of(m, id, &eff, p->role, uid, now);
	if (si >= 0) {
		struct mx_series *s = &m->series[si];

		if (cur.steps > out->last.steps && cur.step_ms > out->last.step_ms)
			s->step_now_ms = (cur.step_ms - out->last.step_ms) /
					 (cur.steps - out->last.steps);
		add_gain(&s->v, &cur, &out->last);
		s->phases |= phases;
		if (alive) {
			s->live++;
			s->alive_ns = now;
			s->stalled |= p->role == TB_ROLE_TRAINER && ses->stall_on &&
				      stall_pid_stalled(&ses->stall, p->pid);
			culprit_of(s, ses, p);
		}
	}
	out->series = si;
	out->last = cur;
}

int metrics_update(struct metrics *m, const struct session *ses, uint64_t now)
{
	const struct job *job = &ses->job;
	struct mx_proc *procs = calloc(job->nprocs ? job->nprocs : 1, sizeof(*procs));
	int n = 0;

	if (!procs)
		return -1;
	for (int i = 0; i < m->nseries; i++) {
		m->series[i].live = 0;
		m->series[i].stalled = false;
		m->series[i].culprit_phase = m->series[i].culprit_wait = -1;
	}
	for (int i = 0; i < job->nprocs; i++) {
		const struct proc_rec *p = &job->procs[i];
		const struct proc_labels *l = labels_of(job, p);

		/* Folded: their gains were given while they had rows of their own. */
		if (p->folded || !l)
			continue;
		if (n == MX_MAX_PROCS) {
			m->procs_dropped++;
			continue;
		}
		follow(m, ses, p, l, now, &procs[n++]);
	}
	/* Gone for the grace period: the series goes (alive_ns 0: free). */
	for (int i = 0; i < m->nseries; i++)
		if (m->series[i].alive_ns && !m->series[i].live &&
		    now > m->series[i].alive_ns + m->grace_ns)
			m->series[i].alive_ns = 0;
	return reindex(m, procs, n);
}

/*
 * The processes of the job named id as a job of their own: shallow copies
 * with no pid index (job.h looks them up one by one then), no epochs (the
 * node's epochs mix its jobs). Free only out->procs.
 */
/*
 * Whether p is of the job named id: its series' job, as the last update
 * placed it (a hash lookup: a node of 2,000 jobs is judged job by job,
 * over every process each time); a process with no series of its own (a
 * folded row) by its labels.
 */
static bool in_job(const struct metrics *m, const struct job *job, const struct proc_rec *p,
		   const char *id)
{
	int si = metrics_series_of(m, p);
	char lab[JOB_ID_LEN];
	unsigned int uid;

	if (si >= 0)
		return !strcmp(m->series[si].job, id);
	job_id_of(job, p, lab, sizeof(lab), &uid);
	return !strcmp(lab, id);
}

/*
 * The node's session seen as job id's alone: its processes only, and no
 * epochs (the node's intervals are no job's). A shallow copy: the other
 * models are the node's, read, never freed through it. Free out->job.procs
 * and out.
 */
static struct session *sub_session(const struct metrics *m, const struct session *ses,
				   const char *id)
{
	const struct job *job = &ses->job;
	struct session *out = malloc(sizeof(*out));
	struct job *sub;

	if (!out)
		return NULL;
	*out = *ses;
	sub = &out->job;
	sub->procs = calloc(job->nprocs ? job->nprocs : 1, sizeof(*sub->procs));
	if (!sub->procs) {
		free(out);
		return NULL;
	}
	sub->nprocs = 0;
	sub->cap = job->nprocs;
	sub->pid_ix = NULL;
	sub->pid_cap = 0;
	for (int i = 0; i < job->nprocs; i++)
		if (in_job(m, job, &job->procs[i], id))
			sub->procs[sub->nprocs++] = job->procs[i];
	memset(&out->ep, 0, sizeof(out->ep));
	out->ep.want = EP_NSRC;	/* epochs_source: none */
	return out;
}

static int judge_one(const struct metrics *m, struct mx_job *j, const struct session *ses,
		     uint64_t now)
{
	struct dg_finding fs[DG_MAX_FINDINGS];
	struct dg_view v = { 0 };
	struct session *sub = sub_session(m, ses, j->job);
	int n, rc = -1;

	if (!sub)
		return -1;
	if (diag_view_run(&v, sub, now))
		goto cleanup;
	n = diag_run(&v, fs, DG_MAX_FINDINGS);
	for (int k = 0; k < DG_NIDS; k++)
		j->severity[k] = -1;
	for (int k = 0; k < n; k++)
		j->severity[fs[k].id] = fs[k].severity;
	rc = 0;
cleanup:
	diag_view_free(&v);
	free(sub->job.procs);
	free(sub);
	return rc;
}

/* The entry of job id among m->jobs, made if new (its findings unknown). */
static struct mx_job *job_entry(struct metrics *m, const char *id)
{
	struct mx_job *j;

	for (int i = 0; i < m->njobs; i++)
		if (!strcmp(m->jobs[i].job, id))
			return &m->jobs[i];
	j = realloc(m->jobs, (m->njobs + 1) * sizeof(*j));
	if (!j)
		return NULL;
	m->jobs = j;
	j = &m->jobs[m->njobs++];
	memset(j, 0, sizeof(*j));
	snprintf(j->job, sizeof(j->job), "%s", id);
	for (int k = 0; k < DG_NIDS; k++)
		j->severity[k] = -1;
	return j;
}

int metrics_judge(struct metrics *m, const struct session *ses, uint64_t now)
{
	int rc = 0, n = 0;

	for (int i = 0; i < m->njobs; i++)
		m->jobs[i].live = false;
	for (int i = 0; i < m->nseries; i++) {
		struct mx_job *j;

		if (!m->series[i].alive_ns || !(j = job_entry(m, m->series[i].job))) {
			rc |= m->series[i].alive_ns ? -1 : 0;
			continue;
		}
		if (!j->live && judge_one(m, j, ses, now))
			rc = -1;
		j->live = true;
	}
	/* A job whose series all went leaves with them. */
	for (int i = 0; i < m->njobs; i++)
		if (m->jobs[i].live)
			m->jobs[n++] = m->jobs[i];
	m->njobs = n;
	return rc;
}

int metrics_series_of(const struct metrics *m, const struct proc_rec *p)
{
	int i = find(m, p->pid, p->start_ns);

	return i >= 0 ? m->procs[i].series : -1;
}

void metrics_free(struct metrics *m)
{
	free(m->jobs);
	free(m->gpu.s);
	free(m->series);
	free(m->procs);
	free(m->index);
	memset(m, 0, sizeof(*m));
}
