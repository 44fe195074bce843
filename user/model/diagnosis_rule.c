// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "diagnosis_rule.h"

double dg_ramp(double x, double lo, double hi)
{
	double s = (x - lo) / (hi - lo);

	return s < 0 ? 0 : s > 1 ? 1 : s;
}

struct dg_finding *dg_add(struct dg_out *o, enum dg_id id, double value, double threshold,
			  double severity)
{
	struct dg_finding *f;

	if (o->n == o->max)
		return NULL;
	f = &o->f[o->n++];
	*f = (struct dg_finding){ .id = id, .value = value, .threshold = threshold,
				  .severity = severity };
	return f;
}

void dg_append(char *buf, size_t len, const char *fmt, ...)
{
	size_t used = strlen(buf);
	va_list ap;

	if (used + 1 >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + used, len - used, fmt, ap);
	va_end(ap);
}
