// SPDX-License-Identifier: BSD-3-Clause
/*
 * `trainbpf report rank0.db rank1.db ...`: recordings of one job's ranks,
 * made on several nodes (each by its own `trainbpf record`), as one job:
 * each rank's time side by side and the diagnosis across all of them, the
 * straggler among the ranks named with its node. The monotonic clocks of
 * nodes are not comparable: only shares and per-step times are merged,
 * never instants.
 */
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include "diagnosis.h"
#include "phases.h"
#include "report.h"
#include "sections.h"

/* One rank: a trainer of one of the recordings. */
struct mg_rank {
	int rec;			/* which recording */
	const struct proc_rec *p;
	int rank;			/* -1: not known */
	uint64_t cp[TB_NCAT];		/* its main thread's critical path */
	struct ph_sum ph;		/* its steps and phases (none: ph.steps.steps 0) */
};

struct merged {
	struct recording *r;
	int n;
	char (*node)[32];		/* a short name per recording */
	struct mg_rank *ranks;
	int nranks;
	struct dg_finding fs[DG_MAX_FINDINGS];
	int nfs;			/* -1: not judged (out of memory) */
};

static int by_id(const void *a, const void *b)
{
	return memcmp(a, b, 16);
}

/* The NCCL communicator ids a recording's processes made, sorted; NULL if none or no memory. */
static unsigned char (*comm_ids(const struct recording *r, int *n))[16]
{
	unsigned char (*ids)[16];
	int k = 0;

	*n = 0;
	for (int i = 0; i < r->ses.gpu.nprocs; i++)
		*n += r->ses.gpu.procs[i].ncomms;
	if (!*n || !(ids = malloc(*n * sizeof(*ids))))
		return NULL;
	for (int i = 0; i < r->ses.gpu.nprocs; i++)
		for (int j = 0; j < r->ses.gpu.procs[i].ncomms; j++)
			memcpy(ids[k++], r->ses.gpu.procs[i].comms[j].id, 16);
	qsort(ids, *n, sizeof(*ids), by_id);
	return ids;
}

/*
 * Whether the recordings share an NCCL communicator id. Sorted and
 * searched: two crafted recordings of 100k communicators each took 10 s
 * compared pair by pair.
 */
static bool shares_comm(const struct recording *a, const struct recording *b)
{
	unsigned char (*ids)[16];
	bool found = false;
	int n;

	ids = comm_ids(b, &n);
	if (!ids)
		return false;
	for (int i = 0; i < a->ses.gpu.nprocs && !found; i++)
		for (int j = 0; j < a->ses.gpu.procs[i].ncomms && !found; j++)
			found = bsearch(a->ses.gpu.procs[i].comms[j].id, ids, n, sizeof(*ids), by_id);
	free(ids);
	return found;
}

/* The recordings that name their job (meta job) name the same one. */
static int ids_agree(const struct recording *r, int n, char *err, size_t len)
{
	int first = -1;

	for (int i = 0; i < n; i++) {
		if (!r[i].job_id[0])
			continue;
		if (first < 0)
			first = i;
		else if (strcmp(r[i].job_id, r[first].job_id))
			return snprintf(err, len, "%s is job %s, %s job %s: not one job",
					r[first].path, r[first].job_id, r[i].path, r[i].job_id), -1;
	}
	return 0;
}

/* Recording i is one of the others' job: the same name, or a communicator one of them made. */
static int same_job(const struct recording *r, int n, int i, char *err, size_t len)
{
	if (n == 1)
		return 0;
	for (int j = 0; j < n; j++)
		if (j != i && ((r[i].job_id[0] && !strcmp(r[i].job_id, r[j].job_id)) ||
			       shares_comm(&r[i], &r[j])))
			return 0;
	snprintf(err, len, "%s: no job id (TORCHELASTIC_RUN_ID, SLURM_JOB_ID, "
		 "MASTER_ADDR:MASTER_PORT, a pod) and no NCCL communicator shared with the "
		 "others: cannot tell it is the same job", r[i].path);
	return -1;
}

/*
 * Short host names, or the files' names where two recordings share a
 * host; escaped (a recording is a file anyone could have written: its
 * host name must not put escape sequences on the reader's terminal).
 */
static void name_nodes(struct merged *m)
{
	bool clash = false;

	for (int i = 0; i < m->n; i++) {
		size_t k = strcspn(m->r[i].host, ".");
		char host[sizeof(m->r[i].host)];

		snprintf(host, sizeof(host), "%.*s", (int)k, m->r[i].host);
		report_esc(m->node[i], sizeof(m->node[i]), host);
		for (int j = 0; j < i; j++)
			clash |= !strcmp(m->node[i], m->node[j]) || !m->node[i][0];
	}
	for (int i = 0; clash && i < m->n; i++) {
		char path[4096];

		snprintf(path, sizeof(path), "%s", m->r[i].path);
		report_esc(m->node[i], sizeof(m->node[i]), basename(path));
	}
}

static int by_rank(const void *a, const void *b)
{
	const struct mg_rank *x = a, *y = b;

	if (x->rank != y->rank)
		return x->rank < 0 ? 1 : y->rank < 0 ? -1 : x->rank - y->rank;
	return x->rec - y->rec;
}

static void add_rank(struct merged *m, int rec, const struct proc_rec *p)
{
	const struct session *ses = &m->r[rec].ses;
	const struct thread_rec *t = job_trainer_thread(p);
	const struct ph_thread *pt = t ? ses_phase_thread(ses, t->tid) : NULL;
	struct mg_rank *k = &m->ranks[m->nranks++];

	memset(k, 0, sizeof(*k));
	k->rec = rec;
	k->p = p;
	k->rank = diag_proc_rank(ses, p->pid);
	if (t)
		memcpy(k->cp, t->cp, sizeof(k->cp));
	if (pt)
		phases_thread_sum(pt, &k->ph);
}

static int collect_ranks(struct merged *m, char *err, size_t len)
{
	int cap = 0;

	for (int i = 0; i < m->n; i++)
		cap += m->r[i].ses.job.nprocs;
	m->ranks = calloc(cap ? cap : 1, sizeof(*m->ranks));
	if (!m->ranks)
		return snprintf(err, len, "out of memory"), -1;
	for (int i = 0; i < m->n; i++)
		for (int k = 0; k < m->r[i].ses.job.nprocs; k++) {
			const struct proc_rec *p = &m->r[i].ses.job.procs[k];

			if (p->role == TB_ROLE_TRAINER && !p->folded && job_trainer_thread(p))
				add_rank(m, i, p);
		}
	qsort(m->ranks, m->nranks, sizeof(*m->ranks), by_rank);
	for (int i = 1; i < m->nranks; i++)
		if (m->ranks[i].rank >= 0 && m->ranks[i].rank == m->ranks[i - 1].rank &&
		    m->ranks[i].rec != m->ranks[i - 1].rec)
			return snprintf(err, len, "rank %d is in %s and in %s: a recording given "
					"twice, or two jobs", m->ranks[i].rank,
					m->r[m->ranks[i - 1].rec].path, m->r[m->ranks[i].rec].path), -1;
	return 0;
}

/* The diagnosis of all the recordings' processes as one job. */
static void judge(struct merged *m)
{
	struct dg_view *v = calloc(m->n, sizeof(*v));
	struct dg_view all;
	const char **where = calloc(m->n, sizeof(*where));
	int made = 0;

	m->nfs = -1;
	if (!v || !where)
		goto cleanup;
	for (; made < m->n; made++) {
		where[made] = m->node[made];
		if (diag_view_run(&v[made], &m->r[made].ses, m->r[made].end_ns))
			goto cleanup;
	}
	if (diag_view_merge(&all, v, m->n, where))
		goto cleanup;
	m->nfs = diag_run(&all, m->fs, DG_MAX_FINDINGS);
	diag_view_free(&all);
cleanup:
	for (int i = 0; v && i < made; i++)
		diag_view_free(&v[i]);
	free(v);
	free(where);
}

int merged_open(struct merged **out, struct recording *r, int n, char *err, size_t len)
{
	struct merged *m = calloc(1, sizeof(*m));

	*out = m;
	if (!m || !(m->node = calloc(n, sizeof(*m->node))))
		return snprintf(err, len, "out of memory"), -1;
	m->r = r;
	m->n = n;
	if (ids_agree(r, n, err, len))
		return -1;
	/*
	 * Those without a job id first: where one recording names the job and
	 * another does not, the one that does not is the one to name.
	 */
	for (int named = 0; named < 2; named++)
		for (int i = 0; i < n; i++)
			if (!r[i].job_id[0] == !named && same_job(r, n, i, err, len))
				return -1;
	name_nodes(m);
	if (collect_ranks(m, err, len))
		return -1;
	if (!m->nranks)
		return snprintf(err, len, "no trainer in %d recordings: nothing to merge", n), -1;
	judge(m);
	return 0;
}

void merged_close(struct merged *m)
{
	if (!m)
		return;
	free(m->node);
	free(m->ranks);
	free(m);
}

static const char *job_name(const struct merged *m)
{
	for (int i = 0; i < m->n; i++)
		if (m->r[i].job_id[0])
			return m->r[i].job_id;
	return "(by its NCCL communicators)";
}

static double traced_s(const struct mg_rank *k)
{
	return sum_cats(k->cp) / 1e9;
}

static void rank_label(char *buf, size_t len, const struct mg_rank *k)
{
	if (k->rank >= 0)
		snprintf(buf, len, "%d", k->rank);
	else
		snprintf(buf, len, "?");
}

static void text_ranks(FILE *f, const struct merged *m)
{
	char rk[16];

	fprintf(f, "Ranks (each rank's trainer thread, critical path; %% of its traced time)\n");
	fprintf(f, "  %4s %-16s %7s %8s %5s %5s %5s %5s %6s %8s\n", "RANK", "NODE", "PID",
		"TRACED_S", "comp", "comm", "data", "other", "STEPS", "MS/STEP");
	for (int i = 0; i < m->nranks; i++) {
		const struct mg_rank *k = &m->ranks[i];
		double pct[TB_NROLLUP];

		rollup_pct(k->cp, pct);
		rank_label(rk, sizeof(rk), k);
		fprintf(f, "  %4s %-16.16s %7d %8.2f %5.1f %5.1f %5.1f %5.1f %6d %8.1f\n", rk,
			m->node[k->rec], k->p->pid, traced_s(k), pct[TB_R_COMPUTATION],
			pct[TB_R_COMMUNICATION], pct[TB_R_IO_DATA], pct[TB_R_OTHER],
			k->ph.steps.steps,
			k->ph.steps.steps ? k->ph.steps.step_ms / k->ph.steps.steps : 0.0);
	}
}

static void text_phases(FILE *f, const struct merged *m)
{
	char rk[16];
	bool any = false;

	for (int i = 0; i < m->nranks; i++)
		any |= m->ranks[i].ph.steps.steps > 0;
	if (!any)
		return;
	fprintf(f, "  by rank, training phases (ms/step):\n  %4s", "RANK");
	/* ms per step: the loop's phases (setup and teardown are no step's) */
	for (int p = 0; p < PH_NLOOP; p++)
		fprintf(f, " %8s", ph_short[p]);
	fputc('\n', f);
	for (int i = 0; i < m->nranks; i++) {
		const struct mg_rank *k = &m->ranks[i];

		if (!k->ph.steps.steps)
			continue;
		rank_label(rk, sizeof(rk), k);
		fprintf(f, "  %4s", rk);
		for (int p = 0; p < PH_NLOOP; p++)
			fprintf(f, " %8.1f", k->ph.wall_ms[p] / k->ph.steps.steps);
		fputc('\n', f);
	}
}

/* All ranks' main threads together: the job's headline. */
static void job_cats(const struct merged *m, uint64_t out[TB_NCAT])
{
	memset(out, 0, sizeof(uint64_t) * TB_NCAT);
	for (int i = 0; i < m->nranks; i++)
		for (int c = 0; c < TB_NCAT; c++)
			out[c] += m->ranks[i].cp[c];
}

void merged_text(FILE *f, const struct merged *m)
{
	uint64_t all[TB_NCAT], total;
	double pct[TB_NCAT];
	char job[4 * JOB_ID_LEN], path[4096];

	fprintf(f, "trainbpf %s: job %s, %d recordings merged, %d rank%s\n", TB_VERSION,
		report_esc(job, sizeof(job), job_name(m)), m->n, m->nranks,
		m->nranks == 1 ? "" : "s");
	for (int i = 0; i < m->n; i++)
		fprintf(f, "  %s: %s, %.1f s%s\n", report_esc(path, sizeof(path), m->r[i].path),
			m->node[i],
			(m->r[i].end_ns - m->r[i].start_ns) / 1e9,
			m->r[i].complete ? "" : " (cut short)");
	fputc('\n', f);
	text_ranks(f, m);
	text_phases(f, m);
	fputc('\n', f);
	job_cats(m, all);
	total = sum_cats(all);
	for (int c = 0; c < TB_NCAT; c++)
		pct[c] = total ? 100.0 * all[c] / total : 0.0;
	fprintf(f, "Job: critical path of %d rank trainer thread%s (%.2f s)\n", m->nranks,
		m->nranks == 1 ? "" : "s", total / 1e9);
	report_rollup_rows(f, pct, true);
	fputc('\n', f);
	if (m->nfs >= 0)
		report_findings_text(f, "Diagnosis across the ranks", "", m->fs, m->nfs);
}

static void json_rank(struct jw *w, const struct merged *m, const struct mg_rank *k)
{
	int64_t ns[TB_NCAT];

	jw_object(w);
	if (k->rank >= 0)
		jw_int_field(w, "rank", k->rank);
	else
		jw_null_field(w, "rank");
	jw_string_field(w, "node", m->node[k->rec]);
	jw_string_field(w, "recording", m->r[k->rec].path);
	jw_int_field(w, "pid", k->p->pid);
	for (int c = 0; c < TB_NCAT; c++)
		ns[c] = (int64_t)k->cp[c];
	report_json_times(w, "time_s", ns);
	jw_int_field(w, "steps", k->ph.steps.steps);
	jw_float_field(w, "step_ms", k->ph.steps.steps ?
		       k->ph.steps.step_ms / k->ph.steps.steps : 0.0, 4);
	jw_name(w, "phases_wall_s");
	jw_object(w);
	for (int p = 0; p < PH_NSHOWN; p++)
		jw_float_field(w, ph_names[p], k->ph.wall_ms[p] / 1e3, 6);
	jw_end_object(w);
	jw_end_object(w);
}

void merged_json(FILE *f, const struct merged *m)
{
	struct jw w;

	jw_init(&w, f);
	jw_object(&w);
	jw_string_field(&w, "tool", "trainbpf");
	jw_string_field(&w, "version", TB_VERSION);
	jw_string_field(&w, "job", job_name(m));
	jw_name(&w, "recordings");
	jw_array(&w);
	for (int i = 0; i < m->n; i++) {
		jw_object(&w);
		jw_string_field(&w, "path", m->r[i].path);
		jw_string_field(&w, "node", m->node[i]);
		jw_string_field(&w, "host", m->r[i].host);
		jw_float_field(&w, "duration_s", (m->r[i].end_ns - m->r[i].start_ns) / 1e9, 6);
		jw_bool_field(&w, "complete", m->r[i].complete);
		jw_end_object(&w);
	}
	jw_end_array(&w);
	jw_name(&w, "ranks");
	jw_array(&w);
	for (int i = 0; i < m->nranks; i++)
		json_rank(&w, m, &m->ranks[i]);
	jw_end_array(&w);
	report_findings_json(&w, m->fs, m->nfs > 0 ? m->nfs : 0);
	jw_end_object(&w);
	fputc('\n', f);
}
