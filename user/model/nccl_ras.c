// SPDX-License-Identifier: BSD-3-Clause
/*
 * NCCL RAS: the address a job names, and the text STATUS reply (JSON:
 * nccl_ras_json.c). The text's lines are those NCCL prints in
 * src/ras/client_support.cc, rasClientRunInit (version, job summary) and
 * rasClientRunComms (the communicator table, Errors, Warnings).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nccl_ras.h"

/* "UNKNOWN" is 2.24-2.25's name of NOCOMM (client_support.cc's statusStr). */
const char *const ras_status_names[RAS_NSTATUS] = {
	"nocomm", "init", "running", "finalize", "abort",
};
const char *const ras_flag_names[RAS_NFLAGS] = { "incomplete", "mismatch", "error" };
const char *const ras_result_names[RAS_NRESULTS] = {
	"ok", "disabled", "address_refused", "no_listener", "not_the_jobs_socket",
	"connect_failed", "timeout", "protocol", "gone",
};

static int parse_port(const char *s, int *port)
{
	char *end;
	long p;

	if (*s < '0' || *s > '9')
		return -1;
	p = strtol(s, &end, 10);
	if (*end || p < 1 || p > 65535)
		return -1;
	*port = p;
	return 0;
}

/* host part of "host:port" or "[v6]:port" into a; the port's text in *port_at. */
static int parse_host(const char *s, struct ras_addr *a, const char **port_at)
{
	char host[64];
	const char *colon;

	if (*s == '[') {
		colon = strstr(s, "]:");
		if (!colon || colon - s - 1 >= (long)sizeof(host))
			return -1;
		snprintf(host, sizeof(host), "%.*s", (int)(colon - s - 1), s + 1);
		*port_at = colon + 2;
		a->family = AF_INET6;
		return inet_pton(AF_INET6, host, a->ip) == 1 &&
		       !memcmp(a->ip, &in6addr_loopback, 16) ? 0 : -1;
	}
	colon = strrchr(s, ':');
	if (!colon || colon - s >= (long)sizeof(host))
		return -1;
	snprintf(host, sizeof(host), "%.*s", (int)(colon - s), s);
	*port_at = colon + 1;
	if (!strcmp(host, "localhost")) {
		a->family = 0;	/* as the job's resolver says: found by its listener */
		return 0;
	}
	a->family = AF_INET;
	return inet_pton(AF_INET, host, a->ip) == 1 && a->ip[0] == 127 ? 0 : -1;
}

int ras_addr_parse(const char *s, struct ras_addr *a, char *why, size_t len)
{
	const char *port_at;

	memset(a, 0, sizeof(*a));
	if (!s) {
		a->port = RAS_DEFAULT_PORT;	/* NCCL: "localhost:" STR(NCCL_RAS_CLIENT_PORT) */
		return 0;
	}
	if (parse_host(s, a, &port_at) || parse_port(port_at, &a->port)) {
		snprintf(why, len, "NCCL_RAS_ADDR=%.64s is not localhost, 127.x.y.z or [::1] with a "
			 "port: not connected to", s);
		return -1;
	}
	return 0;
}

bool ras_version_at_least(const char *v, int maj, int min, int patch)
{
	int a, b, c;

	if (sscanf(v, "%d.%d.%d", &a, &b, &c) != 3)
		return false;
	if (a != maj)
		return a > maj;
	if (b != min)
		return b > min;
	return c >= patch;
}

/* The text's status names; -1 if none. */
static int status_of(const char *s)
{
	if (!strcmp(s, "UNKNOWN"))
		return RAS_ST_NOCOMM;
	for (int i = 0; i < RAS_NSTATUS; i++)
		if (!strcasecmp(s, ras_status_names[i]))
			return i;
	return -1;
}

/* A row of the communicator table: "%5d  %8d  %8d  %8s  %8d  %8d  %8s  %6s". */
static int table_row(const char *line, struct ras_view *v)
{
	int group, count, nodes, per_comm, in_group, st;
	char per_node[16], status[16], errors[40], *tok, *save;

	if (sscanf(line, "%d %d %d %15s %d %d %15s %39s", &group, &count, &nodes, per_node,
		   &per_comm, &in_group, status, errors) != 8 || (st = status_of(status)) < 0)
		return -1;
	v->comms += count;
	v->comms_status[st] += count;
	for (tok = strtok_r(errors, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		for (int f = 0; f < RAS_NFLAGS; f++)
			if (!strcasecmp(tok, ras_flag_names[f]))
				v->comms_flag[f] += count;
	return 0;
}

/* The job summary's totals, on the line after a "(total)" header. */
static void summary_row(const char *prev, const char *line, struct ras_view *v)
{
	int n[5];

	/* consistent: Nodes, Processes per node, GPUs per process, Processes, GPUs */
	if (!strncmp(prev, "(total)   per node", 18) &&
	    sscanf(line, "%d %d %d %d %d", &n[0], &n[1], &n[2], &n[3], &n[4]) == 5) {
		v->nodes = n[0];
		v->processes = n[3];
		v->gpus = n[4];
	} else if (!strncmp(prev, "(total)    (total)", 18) &&
		   sscanf(line, "%d %d %d", &n[0], &n[1], &n[2]) == 3) {
		v->nodes = n[0];
		v->processes = n[1];
		v->gpus = n[2];
	}
}

/* N from a line "<head>N<tail>..."; -1 if it is not one (sscanf alone stops at the number). */
static int count_in(const char *line, const char *head, const char *tail)
{
	char *end;
	long n;

	if (strncmp(line, head, strlen(head)))
		return -1;
	n = strtol(line + strlen(head), &end, 10);
	return end != line + strlen(head) && !strncmp(end, tail, strlen(tail)) ? n : -1;
}

struct text_state {
	char prev[256];
	bool in_table, saw_comms, saw_table;
};

static int text_line(struct text_state *t, const char *line, struct ras_view *v)
{
	int n;

	if (sscanf(line, "NCCL version %31s", v->version) == 1)
		;
	else if (!strncmp(line, "Communicators...", 16)) {
		t->saw_comms = true;
		sscanf(line, "Communicators... (%lfs)", &v->collection_s);
	} else if (!strncmp(line, "    #  in group", 15))
		t->in_table = t->saw_table = true;
	else if (!strcmp(line, "No communicator data collected!"))
		t->saw_table = true;
	else if (t->in_table && !*line)
		t->in_table = false;
	else if (t->in_table && table_row(line, v))
		return -1;
	else if ((n = count_in(line, "  Missing communicator data from ", " job process")) >= 0)
		v->procs_missing = n;
	else if ((n = count_in(line, "  Missing communicator data from ", " rank")) >= 0)
		v->ranks_missing += n;
	else if ((n = count_in(line, "  ", " job process")) >= 0 && strstr(line, "considered dead"))
		v->procs_dead = n;
	else if ((n = count_in(line, "  Encountered ", " communication timeout")) >= 0)
		v->timeouts = n;
	else
		summary_row(t->prev, line, v);
	snprintf(t->prev, sizeof(t->prev), "%s", line);
	return 0;
}

static void view_init(struct ras_view *v)
{
	memset(v, 0, sizeof(*v));
	v->nodes = v->processes = v->gpus = -1;
}

int ras_parse_text(const char *buf, size_t len, struct ras_view *v, char *why, size_t wlen)
{
	struct text_state t = { 0 };
	char line[256];
	size_t at = 0;

	view_init(v);
	while (at < len) {
		const char *nl = memchr(buf + at, '\n', len - at);
		size_t n = (nl ? (size_t)(nl - buf) : len) - at;

		snprintf(line, sizeof(line), "%.*s", (int)(n < sizeof(line) ? n : sizeof(line) - 1),
			 buf + at);
		if (text_line(&t, line, v)) {
			snprintf(why, wlen, "RAS's communicator table has a row not in NCCL's "
				 "shape: %.80s", line);
			return -1;
		}
		at += n + 1;
	}
	if (!t.saw_comms || !t.saw_table) {
		snprintf(why, wlen, "RAS's reply has no communicator table");
		return -1;
	}
	return 0;
}
