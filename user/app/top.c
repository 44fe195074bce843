// SPDX-License-Identifier: BSD-3-Clause
/* `trainbpf top` (top.h): the terminal side of the table. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include "top.h"

/* The alternate screen, cursor hidden; and back, cursor shown. */
#define ALT_ON "\033[?1049h\033[?25l"
#define ALT_OFF "\033[?25h\033[?1049l"

void top_start(struct top *t, double interval_s)
{
	struct termios raw;

	memset(t, 0, sizeof(*t));
	t->out = stdout;
	t->period_ns = (uint64_t)((interval_s > 0 ? interval_s : 2) * 1e9);
	t->tty = isatty(STDOUT_FILENO);
	if (t->tty && isatty(STDIN_FILENO) && !tcgetattr(STDIN_FILENO, &t->saved)) {
		raw = t->saved;
		/* Keys one at a time, not echoed; ^C still a signal (ISIG kept). */
		raw.c_lflag &= ~(ICANON | ECHO);
		raw.c_cc[VMIN] = 0;
		raw.c_cc[VTIME] = 0;
		t->keys = !tcsetattr(STDIN_FILENO, TCSANOW, &raw);
	}
	if (t->tty) {
		fputs(ALT_ON, t->out);
		fflush(t->out);
	}
}

static int cols_now(void)
{
	struct winsize ws;

	return !ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) && ws.ws_col ? ws.ws_col : 0;
}

void top_draw(struct top *t, const struct metrics *m, uint64_t now, bool force)
{
	int n;

	if (!force && now < t->next_ns)
		return;
	t->next_ns = now + t->period_ns;
	if (t->tty)
		fputs("\033[H", t->out);
	n = top_view_draw(t->out, &t->view, m, now, t->sel, cols_now(), t->tty);
	if (t->sel >= n)
		t->sel = n ? n - 1 : 0;
	fputs(t->tty ? "\033[J" : "\n", t->out);
	fflush(t->out);
}

/* One key (or the end of an escape sequence): what it asks. */
static void key(struct top *t, const struct metrics *m, char c)
{
	if (t->nseq || c == '\033') {
		/* ESC [ A: up, ESC [ B: down (and ESC O A/B, the application mode) */
		t->seq[t->nseq++] = c;
		if (t->nseq < 3 && t->nseq < (int)sizeof(t->seq))
			return;
		c = t->seq[2] == 'A' ? 'k' : t->seq[2] == 'B' ? 'j' : 0;
		t->nseq = 0;
	}
	if (c == 'q' || c == 'Q') {
		t->quit = true;
	} else if (c == 'k' && t->sel > 0) {
		t->sel--;
	} else if (c == 'j' && t->sel + 1 < t->view.nrows) {
		t->sel++;
	} else if (c == '\n' || c == '\r') {
		t->nchosen = top_view_pids(&t->view, m, t->sel, t->chosen, TB_MAX_PIDS);
		t->quit = t->nchosen > 0;
	}
}

bool top_keys(struct top *t, const struct metrics *m)
{
	char buf[32];
	ssize_t n;
	int sel = t->sel;

	if (!t->keys)
		return true;
	while ((n = read(STDIN_FILENO, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n && !t->quit; i++)
			key(t, m, buf[i]);
	if (sel != t->sel)	/* the choice shows at once, not at the next table */
		t->next_ns = 0;
	return !t->quit;
}

void top_end(struct top *t)
{
	if (t->tty) {
		fputs(ALT_OFF, t->out);
		fflush(t->out);
	}
	if (t->keys)
		tcsetattr(STDIN_FILENO, TCSANOW, &t->saved);
	t->tty = t->keys = false;
}

int top_exec_live(const struct top *t, double interval_s)
{
	char pids[TB_MAX_PIDS * 12] = "", iv[32];
	char *argv[] = { "trainbpf", "-p", pids, "-i", iv, NULL };

	for (int i = 0; i < t->nchosen; i++)
		snprintf(pids + strlen(pids), sizeof(pids) - strlen(pids), "%s%d", i ? "," : "",
			 t->chosen[i]);
	snprintf(iv, sizeof(iv), "%g", interval_s > 0 ? interval_s : 2);
	/* Ourselves, as the kernel knows it: not a path another user could have replaced. */
	execv("/proc/self/exe", argv);
	fprintf(stderr, "trainbpf top: cannot start the live view: %s\n", strerror(errno));
	return 1;
}
