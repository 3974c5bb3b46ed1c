/* SPDX-License-Identifier: MIT */
/* A time-series chart as SVG, written by the server: the status page shows it as an image of its
 * own document, so that a browser needs nothing but the page, and a text browser shows the
 * image's alternative text instead of the axis labels. */
#include "svg.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "macro.h"

/* The plot inside the labels. */
#define LEFT   56
#define RIGHT  12
#define TOP    12
#define BOTTOM 44
#define PLOT_W (SVG_WIDTH - LEFT - RIGHT)
#define PLOT_H (SVG_HEIGHT - TOP - BOTTOM)
/* The y axis' steps: a round number of them, 4 or 5. */
#define Y_STEPS 4

#define FONT    "font-family='DejaVu Sans,Liberation Sans,Arial,sans-serif' font-size='14'"
#define GRID    "#d8dee4"
#define INK     "#3d4752"
#define ALARM   "#c8102e"
#define STARVED "#f2b705"

const char *svg_si(double v, char buf[static 16])
{
	static const char prefix[] = " kMGTPE";
	int p = 0;

	while (fabs(v) >= 1000 && p < (int)sizeof(prefix) - 2) {
		v /= 1000;
		p++;
	}
	if (p == 0)
		snprintf(buf, 16, "%.0f", v);
	else
		snprintf(buf, 16, fabs(v) < 10 ? "%.1f%c" : "%.0f%c", v, prefix[p]);
	return buf;
}

/* The smallest 1, 2 or 5 x 10^k that is at least top / Y_STEPS: the y axis' step. */
static double y_step(double top)
{
	double s = top / Y_STEPS, m = pow(10, floor(log10(s)));

	if (!(s > 0) || !isfinite(s))
		return 1;
	return s <= m ? m : s <= 2 * m ? 2 * m : s <= 5 * m ? 5 * m : 10 * m;
}

static double x_of(const struct svg_chart *c, size_t i)
{
	/* Sample i covers slot (slots - n + i); it is drawn at the slot's end. */
	double slot = (double)PLOT_W / (double)c->slots;

	return LEFT + slot * (double)(c->slots - c->n + i + 1);
}

static double y_of(double v, double top)
{
	return TOP + PLOT_H - PLOT_H * MIN(MAX(v, 0.0), top) / top;
}

static void axes(FILE *f, const struct svg_chart *c, double top, double step)
{
	/* The window in seconds; a test's compressed window is labelled in seconds. */
	uint64_t span_ms = (uint64_t)c->slots * c->interval_ms, span = span_ms / 1000;
	bool hours = span >= 3 * 3600, seconds = span < 3 * 60;
	char buf[16];

	for (int k = 0; k <= (int)(top / step + 0.5); k++) {
		double y = y_of(k * step, top);

		fprintf(f, "<line x1='%d' y1='%.1f' x2='%d' y2='%.1f' stroke='" GRID "'/>", LEFT, y,
		        SVG_WIDTH - RIGHT, y);
		fprintf(f,
		        "<text x='%d' y='%.1f' text-anchor='end' fill='" INK "' " FONT ">%s</text>",
		        LEFT - 6, y + 4, svg_si(k * step, buf));
	}
	/* Four steps across the window, labelled by how long ago. */
	for (int k = 0; k <= 4; k++) {
		double x = LEFT + (double)PLOT_W * k / 4;
		uint64_t ago = span * (uint64_t)(4 - k) / 4;

		fprintf(f, "<line x1='%.1f' y1='%d' x2='%.1f' y2='%d' stroke='" GRID "'/>", x, TOP,
		        x, TOP + PLOT_H + 4);
		if (k == 4)
			fprintf(f,
			        "<text x='%.1f' y='%d' text-anchor='end' fill='" INK "' " FONT
			        ">now</text>",
			        x, SVG_HEIGHT - 6);
		else if (seconds)
			fprintf(f,
			        "<text x='%.1f' y='%d' text-anchor='%s' fill='" INK "' " FONT
			        ">&#8722;%" PRIu64 " s</text>",
			        x, SVG_HEIGHT - 6, k == 0 ? "start" : "middle",
			        span_ms * (uint64_t)(4 - k) / 4 / 1000);
		else if (hours)
			fprintf(f,
			        "<text x='%.1f' y='%d' text-anchor='%s' fill='" INK "' " FONT
			        ">&#8722;%" PRIu64 " h</text>",
			        x, SVG_HEIGHT - 6, k == 0 ? "start" : "middle", ago / 3600);
		else
			fprintf(f,
			        "<text x='%.1f' y='%d' text-anchor='%s' fill='" INK "' " FONT
			        ">&#8722;%" PRIu64 " min</text>",
			        x, SVG_HEIGHT - 6, k == 0 ? "start" : "middle", (ago + 30) / 60);
	}
	fprintf(f, "<line x1='%d' y1='%d' x2='%d' y2='%d' stroke='" INK "'/>", LEFT, TOP + PLOT_H,
	        SVG_WIDTH - RIGHT, TOP + PLOT_H);
}

/* Starvation as bands over the plot, behind the lines; alarms as triangles under the axis. */
static void marks(FILE *f, const struct svg_chart *c)
{
	double slot = (double)PLOT_W / (double)c->slots;

	if (!c->marks)
		return;
	/* One band per run of starved samples, so that a day's narrow slots do not overlap; at
	 * least 4 units wide, so that one starved sample of a day still shows. */
	for (size_t i = 0, j; i < c->n; i = j) {
		for (j = i; j < c->n && (c->marks[j] & SVG_MARK_STARVED); j++)
			;
		if (j > i)
			fprintf(f,
			        "<rect x='%.1f' y='%d' width='%.1f' height='%d' fill='" STARVED
			        "' fill-opacity='0.4'/>",
			        x_of(c, i) - slot, TOP, MAX(slot * (double)(j - i), 4.0), PLOT_H);
		else
			j++;
	}
	for (size_t i = 0; i < c->n; i++)
		if (c->marks[i] & SVG_MARK_ALARM) {
			double x = x_of(c, i) - slot / 2;

			fprintf(f,
			        "<path d='M%.1f %dl-6 11h12z' fill='" ALARM
			        "'><title>health alarm</title></path>",
			        x, TOP + PLOT_H + 2);
		}
}

static void line(FILE *f, const struct svg_chart *c, const struct svg_line *l, double top)
{
	double base = y_of(0, top);

	if (c->n == 0)
		return;
	fprintf(f, "<path d='");
	if (l->area)
		fprintf(f, "M%.1f %.1f", x_of(c, 0) - (double)PLOT_W / (double)c->slots, base);
	for (size_t i = 0; i < c->n; i++)
		fprintf(f, "%c%.1f %.1f", i == 0 && !l->area ? 'M' : 'L', x_of(c, i),
		        y_of(l->y[i], top));
	if (l->area)
		fprintf(f, "L%.1f %.1fz' fill='%s' fill-opacity='0.25' stroke='none'/><path d='",
		        x_of(c, c->n - 1), base, l->colour);
	if (l->area)
		for (size_t i = 0; i < c->n; i++)
			fprintf(f, "%c%.1f %.1f", i == 0 ? 'M' : 'L', x_of(c, i),
			        y_of(l->y[i], top));
	fprintf(f, "' fill='none' stroke='%s' stroke-width='2' stroke-linejoin='round'/>",
	        l->colour);
}

void svg_chart_write(FILE *f, const struct svg_chart *c)
{
	double top = c->y_min_top, step;

	for (size_t k = 0; k < c->n_lines; k++)
		for (size_t i = 0; i < c->n; i++)
			if (isfinite(c->lines[k].y[i]))
				top = MAX(top, c->lines[k].y[i]);
	step = y_step(top > 0 ? top : 1);
	top = step * ceil((top > 0 ? top : 1) / step);

	fprintf(f,
	        "<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 %d %d' width='%d' "
	        "height='%d'><rect width='100%%' height='100%%' fill='#ffffff'/>",
	        SVG_WIDTH, SVG_HEIGHT, SVG_WIDTH, SVG_HEIGHT);
	marks(f, c);
	axes(f, c, top, step);
	for (size_t k = 0; k < c->n_lines; k++)
		line(f, c, &c->lines[k], top);
	fputs("</svg>", f);
}
