// SPDX-License-Identifier: BSD-3-Clause
#include <string.h>
#include "session.h"

void session_init(struct session *s)
{
	memset(s, 0, sizeof(*s));
	gu_init(&s->gu);
	diag_init(&s->diag);
	s->ep.want = EP_AUTO;	/* epochs_source: none until one has a boundary */
	s->ep.calls = &s->steps;
}

void session_free(struct session *s)
{
	epochs_free(&s->ep);
	steps_free(&s->steps);
	phases_free(&s->phases);
	gpu_free(&s->gpu);
	gu_free(&s->gu);
	diag_free(&s->diag);
	stall_free(&s->stall);
	pystacks_free(&s->py);
	job_free(&s->job);
}
