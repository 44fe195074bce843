/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef TB_DIAGNOSIS_RULE_H
#define TB_DIAGNOSIS_RULE_H

/*
 * What the rules share (diagnosis_rules.c, diagnosis_gpu.c): the findings
 * they add to, and how a finding's strings and severity are made. Not for
 * the report layer: it reads findings, it does not make them.
 */
#include <stddef.h>
#include "diagnosis.h"

/* The caller's findings array: n used of max. */
struct dg_out {
	struct dg_finding *f;
	int n, max;
};

/* 0 at or below lo, 1 at or above hi, linear between: a severity. */
double dg_ramp(double x, double lo, double hi);
/* A new finding, zeroed but for these; NULL when the array is full. */
struct dg_finding *dg_add(struct dg_out *o, enum dg_id id, double value, double threshold,
			  double severity);
/* Appends to one of a finding's strings (truncated at its size). */
void dg_append(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define DG_PUT(f, field, ...) dg_append((f)->field, sizeof((f)->field), __VA_ARGS__)

#endif
