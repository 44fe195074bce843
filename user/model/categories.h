/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The categories' names and the headline's four groups they roll up into:
 * one table, read by every output (text, JSON, CSV, trace, diff).
 */
#ifndef TB_CATEGORIES_H
#define TB_CATEGORIES_H

#include <stdint.h>
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

#endif
