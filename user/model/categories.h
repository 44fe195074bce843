/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The categories' names and the headline's four groups they roll up into:
 * one table, read by every output (text, JSON, CSV, trace, diff).
 */
#ifndef TB_CATEGORIES_H
#define TB_CATEGORIES_H

#include <stdint.h>
#include <sys/types.h>
#include "trainbpf.h"

enum tb_rollup { TB_R_COMPUTATION, TB_R_COMMUNICATION, TB_R_IO_DATA,
		 TB_R_OTHER, TB_NROLLUP };

/* "cpu", "gpu_wait", ...: JSON keys, CSV columns, trace names. */
extern const char *const tb_cat_names[TB_NCAT];
/* Column heads of 80-column tables: "cpu", "gpu", "comm", "data", ... */
extern const char *const tb_cat_short[TB_NCAT];
/* JSON keys ("io_data") and text labels ("io & data") of the groups. */
extern const char *const tb_rollup_names[TB_NROLLUP];
extern const char *const tb_rollup_labels[TB_NROLLUP];
/* The categories of each group in the order reports list them; -1 ends. */
extern const int tb_rollup_cats[TB_NROLLUP][4];

enum tb_rollup tb_cat_rollup(int cat);
/* Each group's share of the total, in percent; all zero if total is 0. */
void rollup_pct(const uint64_t cats[TB_NCAT], double pct[TB_NROLLUP]);
uint64_t sum_cats(const uint64_t c[TB_NCAT]);

/*
 * DataLoader workers by their own times: I/O-bound (io >= 30% and at
 * least their CPU), CPU-bound (cpu + runqueue >= 50%), else mostly
 * waiting. A tally keeps what the diagnosis says of workers once their
 * rows are summed into one (folded): how many of each kind, and the
 * busiest (io + cpu + runqueue share) with its shares.
 */
enum tb_worker_kind { TB_WK_IO_BOUND, TB_WK_CPU_BOUND, TB_WK_WAITING, TB_NWK };

struct worker_tally {
	int n[TB_NWK];
	pid_t busiest;
	double busy, cpu, io;	/* the busiest's shares, 0..1 */
};

/* A worker's kind; its io and cpu (+ runqueue) shares into io, cpu. */
enum tb_worker_kind worker_kind(const int64_t own[TB_NCAT], double *io, double *cpu);
/* Counts worker pid with these times (none if they sum to 0). */
void worker_tally_add(struct worker_tally *t, pid_t pid, const int64_t own[TB_NCAT]);
void worker_tally_merge(struct worker_tally *t, const struct worker_tally *o);
int worker_tally_count(const struct worker_tally *t);

#endif
