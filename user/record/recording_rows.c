// SPDX-License-Identifier: BSD-3-Clause
/*
 * What every reader of a recording's tables shares (recording_read.c, its
 * GPU and Python parts): a statement's end checked, a column read as a
 * hostile file may hold it, a name looked up among this build's.
 */
#include <sqlite3.h>
#include <string.h>
#include "recording_read.h"

#define ERR(...) (snprintf(err, errlen, __VA_ARGS__), -1)

int rec_stmt_done(struct recording *r, struct sqlite3_stmt *st, int rc,
		  char *err, size_t errlen)
{
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return ERR("%s: %s", r->path, sqlite3_errmsg(r->db));
	return 0;
}

const char *rec_col_str(struct sqlite3_stmt *st, int i)
{
	const unsigned char *s = sqlite3_column_text(st, i);

	return s ? (const char *)s : "";
}

uint64_t rec_col_u64(struct sqlite3_stmt *st, int i)
{
	int64_t v = sqlite3_column_int64(st, i);

	return v > 0 ? (uint64_t)v : 0;
}

int rec_name_index(const char *s, const char *const *names, int n)
{
	for (int i = 0; s && i < n; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}
