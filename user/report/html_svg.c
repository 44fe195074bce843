// SPDX-License-Identifier: BSD-3-Clause
/* Escaping and inline SVG for the HTML page: bars, lines, labels, legends. */
#include <stdbool.h>
#include <string.h>
#include "html.h"
#include "utf8.h"

/* Tableau 10: tells eight categories apart, also in greyscale print. */
const char *const html_cat_color[TB_NCAT] = {
	"#4e79a7", "#59a14f", "#f28e2b", "#e15759", "#b07aa1", "#edc948", "#9c755f", "#bab0ac",
};
const char *const html_ph_color[PH_NSHOWN] = {
	"#e15759", "#4e79a7", "#76b7b2", "#59a14f", "#b07aa1", "#edc948", "#f28e2b", "#bab0ac",
	"#d7d7d7", "#8c8c8c",
};

static const char *entity(unsigned char c)
{
	switch (c) {
	case '&': return "&amp;";
	case '<': return "&lt;";
	case '>': return "&gt;";
	case '"': return "&quot;";
	case '\'': return "&#39;";
	}
	return NULL;
}

void html_esc(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s);

	while (n) {
		int k = utf8_seq(p, n);
		const char *e = entity(*p);

		if (e)
			fputs(e, f);
		else if (!k || (k == 1 && (*p < 0x20 || *p == 0x7f)) ||
			 (k == 2 && p[0] == 0xc2 && p[1] < 0xa0))	/* C1 */
			fputs(UTF8_REPLACEMENT, f);
		else
			fwrite(p, 1, k, f);
		k = k ? k : 1;
		p += k;
		n -= k;
	}
}

void svg_open(FILE *f, const char *cls, double w, double h, const char *label,
	      const char *attrs)
{
	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"%s\" width=\"%.0f\" "
		"height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-label=\"", cls, w, h,
		w, h);
	html_esc(f, label);
	fprintf(f, "\"%s%s>\n", *attrs ? " " : "", attrs);
}

void svg_close(FILE *f)
{
	fputs("</svg>\n", f);
}

static void part(FILE *f, double x, double y, double w, double h, const struct svg_part *p)
{
	fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\" "
		"data-key=\"%s\"><title>", x, y, w, h, p->color, p->key);
	html_esc(f, p->title);
	fputs("</title></rect>\n", f);
}

double svg_hstack(FILE *f, double x, double y, double h, const struct svg_part *p, int n)
{
	for (int i = 0; i < n; i++) {
		if (p[i].px <= 0)
			continue;
		part(f, x, y, p[i].px, h, &p[i]);
		x += p[i].px;
	}
	return x;
}

double svg_vstack(FILE *f, double x, double base, double w, const struct svg_part *p, int n)
{
	for (int i = 0; i < n; i++) {
		if (p[i].px <= 0)
			continue;
		base -= p[i].px;
		part(f, x, base, w, p[i].px, &p[i]);
	}
	return base;
}

void svg_text(FILE *f, double x, double y, const char *anchor, const char *text)
{
	fprintf(f, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"%s\">", x, y, anchor);
	html_esc(f, text);
	fputs("</text>\n", f);
}

void svg_line(FILE *f, double x1, double y1, double x2, double y2, const char *cls)
{
	fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" class=\"%s\"/>\n",
		x1, y1, x2, y2, cls);
}

void html_legend(FILE *f, const char *const *names, const char *const *colors, int n)
{
	fputs("<p class=\"legend\">", f);
	for (int i = 0; i < n; i++) {
		fprintf(f, "<span><i style=\"background:%s\"></i>", colors[i]);
		html_esc(f, names[i]);
		fputs("</span>", f);
	}
	fputs("</p>\n", f);
}
