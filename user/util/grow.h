/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Growing realloc'd arrays: by doubling (the lists of epochs and steps),
 * or one element at a time (processes, libraries: a few per run).
 */
#ifndef TB_GROW_H
#define TB_GROW_H

#include <stdlib.h>
#include <string.h>

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

/* 0 with *p grown to room for need items of size (cap updated); -1 out of memory, *p as it was. */
static inline int tb_grow_ptr(void **p, int *cap, int need, size_t size)
{
	void *np = tb_grow(*p, cap, need, size);

	if (!np)
		return -1;
	*p = np;
	return 0;
}

/*
 * A new zeroed element at the end of *arrp (a pointer to the array's
 * pointer), *n counted up; NULL if out of memory (the array unchanged).
 */
static inline void *tb_append(void *arrp, int *n, size_t size)
{
	void **arr = arrp;
	char *p = realloc(*arr, (*n + 1) * size);

	if (!p)
		return NULL;
	*arr = p;
	p += (size_t)*n * size;
	memset(p, 0, size);
	(*n)++;
	return p;
}

#endif
