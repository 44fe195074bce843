// SPDX-License-Identifier: BSD-3-Clause
/* trainbpf record: the file's start, its flushes, its end. */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#include "diagnosis.h"
#include "gpu.h"
#include "procfs.h"
#include "record.h"
#include "session.h"
#include "clock.h"

static int meta_u64(struct recorder *r, const char *key, uint64_t v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	return rec_meta(r, key, buf);
}

static uint64_t mem_total_kb(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char text[256] = "";
	uint64_t total = 0, avail = 0;

	if (!f)
		return 0;
	if (!fread(text, 1, sizeof(text) - 1, f))
		text[0] = '\0';
	fclose(f);
	procfs_parse_meminfo(text, &total, &avail);
	return total;
}

static int write_start_meta(struct recorder *r, const struct record_meta *m,
			    const struct session *ses)
{
	const struct job *job = &ses->job;
	char buf[64], host[256] = "";
	struct utsname u;

	uname(&u);
	gethostname(host, sizeof(host) - 1);
	rec_meta(r, "format", "trainbpf-recording");
	rec_meta(r, "trainbpf_version", TB_VERSION);
	rec_meta(r, "hostname", host);
	rec_meta(r, "kernel", u.release);
	meta_u64(r, "ncpus", sysconf(_SC_NPROCESSORS_ONLN));
	meta_u64(r, "mem_total_kb", mem_total_kb());
	rec_meta(r, "command", m->command);
	meta_u64(r, "start_mono_ns", job->window_start_ns);
	snprintf(buf, sizeof(buf), "%.6f", job->window_start_unix);
	rec_meta(r, "start_unix_s", buf);
	meta_u64(r, "flush_ns", REC_FLUSH_NS);
	meta_u64(r, "idle_row_ns", REC_IDLE_ROW_NS);
	/* Known from the start (lib_probes_init): the report says "launches not counted". */
	rec_meta(r, "launches", ses->gpu.launches ? "1" : "0");
	return rec_meta(r, "epochs_wanted", m->epochs_wanted);
}

static void close_db(struct recorder *r)
{
	record_gpu_close(r);
	for (int i = 0; i < RS_N; i++) {
		sqlite3_finalize(r->st[i]);
		r->st[i] = NULL;
	}
	if (r->db)
		sqlite3_close(r->db);
	r->db = NULL;
}

int record_open(struct recorder *r, const char *path, bool force,
		const struct record_meta *m, const struct session *ses)
{
	const struct job *job = &ses->job;

	memset(r, 0, sizeof(*r));
	r->fd = -1;
	r->path = path;
	if (rec_create(r, force) || record_gpu_schema(r) || rec_exec(r, "BEGIN", "write"))
		goto err;
	write_start_meta(r, m, ses);
	if (rec_exec(r, "COMMIT", "write"))
		goto err;
	r->next_flush = job->window_start_ns + REC_FLUSH_NS;
	return 0;
err:
	close_db(r);
	rec_unmake(r);
	return -1;
}

void record_close(struct recorder *r)
{
	close_db(r);
	/* After SQLite: closing another descriptor of the file drops its locks. */
	if (r->path && r->fd >= 0)
		close(r->fd);
	for (int i = 0; i < r->nprocs; i++)
		free(r->procs[i].th);
	free(r->procs);
	free(r->ev);
	free(r->steps);
	free(r->ph);
	free(r->sc);
	memset(r, 0, sizeof(*r));
}

/* One transaction: everything since the last flush, or nothing. */
/*
 * The training job the trainers belong to, from their environment
 * (labels.c: a torchrun run id, a Slurm job, the rendezvous address, a
 * pod), once one is known: `trainbpf report a.db b.db` merges recordings
 * of one job made on several nodes.
 */
static void write_job_id(struct recorder *r, const struct job *job)
{
	char buf[32];

	for (int i = 0; i < job->nprocs && !r->job_id_written; i++) {
		const struct proc_rec *p = &job->procs[i];

		if (p->role != TB_ROLE_TRAINER || p->folded || !p->labels.job[0])
			continue;
		rec_meta(r, "job", p->labels.job);
		snprintf(buf, sizeof(buf), "%d", p->labels.world_size);
		if (p->labels.world_size > 0)
			rec_meta(r, "world_size", buf);
		r->job_id_written = true;
	}
}

static int flush(struct recorder *r, const struct session *ses,
		 const struct tb_counters *bpf, uint64_t now, bool last)
{
	const struct job *job = &ses->job;
	uint64_t t0 = now_ns(), dt;

	if (rec_exec(r, "BEGIN", "write"))
		return -1;
	record_job(r, ses, now, last);
	write_job_id(r, job);
	record_events(r, ses);
	record_gpu_flush(r, ses);
	record_counters(r, job, bpf);
	record_stall(r, ses);
	record_pystacks(r, ses);
	if (last) {
		record_final(r, ses, now);
		record_gpu_final(r, ses, now);
	}
	if (r->failed || rec_exec(r, "COMMIT", "write")) {
		sqlite3_exec(r->db, "ROLLBACK", NULL, NULL, NULL);
		return -1;
	}
	dt = now_ns() - t0;
	r->flushed_ns = now;
	r->flushes++;
	r->flush_ns_sum += dt;
	if (dt > r->flush_ns_max)
		r->flush_ns_max = dt;
	return 0;
}

int record_tick(struct recorder *r, const struct session *ses,
		const struct tb_counters *bpf, uint64_t now)
{
	if (r->failed)
		return -1;
	if (now < r->next_flush && !record_epoch_closed(r, ses))
		return 0;
	/* From now, not from the schedule: a slow flush must not pile up. */
	r->next_flush = now + REC_FLUSH_NS;
	return flush(r, ses, bpf, now, false);
}

int record_finish(struct recorder *r, const struct session *ses,
		  const struct tb_counters *bpf, uint64_t now)
{
	if (r->failed)
		return -1;
	if (flush(r, ses, bpf, now, true))
		return -1;
	/*
	 * Fold the WAL into the file and leave WAL mode: the recording is one
	 * file again, and its readers need no -wal or -shm beside it (they
	 * would have to make them). A reader that has the file open now keeps
	 * it in WAL mode: still complete, read through its -wal.
	 */
	sqlite3_wal_checkpoint_v2(r->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
	sqlite3_exec(r->db, "PRAGMA journal_mode=DELETE", NULL, NULL, NULL);
	return 0;
}
