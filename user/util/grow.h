/* SPDX-License-Identifier: BSD-3-Clause */
/* Growing a realloc'd array by doubling: the lists of epochs and steps. */
#ifndef TB_GROW_H
#define TB_GROW_H

#include <stdlib.h>

/* p with room for need items of size (cap updated); NULL if out of memory. */
static inline void *tb_grow(void *p, int *cap, int need, size_t size)
{
	int ncap = *cap ? *cap : 16;
	void *np;

	if (need <= *cap)
		return p;
	while (ncap < need)
		ncap *= 2;
	np = realloc(p, ncap * size);
	if (!np)
		return NULL;
	*cap = ncap;
	return np;
}

#endif
