/* SPDX-License-Identifier: MIT */
/* Histogram, byte-pair and health-test plots as PNG, through cairo's image surface. */
#include "assess-plot.h"

#include <assert.h>
#include <cairo.h>
#include <errno.h>
#include <fcntl.h>
#include <fontconfig/fontconfig.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "assess-health.h"
#include "assess-stats.h"
#include "io.h"
#include "macro.h"

/* Margins around a plot's frame: room for the title above and the tick labels left and below. */
#define M_LEFT   70.0
#define M_RIGHT  20.0
#define M_TOP    34.0
#define M_BOTTOM 44.0

struct frame {
	double x, y, w, h; /* the plot area in device pixels */
};

static void surface_freep(cairo_surface_t **s)
{
	if (*s)
		cairo_surface_destroy(*s);
}

static void context_freep(cairo_t **cr)
{
	if (*cr)
		cairo_destroy(*cr);
}

static cairo_status_t write_fd(void *closure, const unsigned char *data, unsigned int length)
{
	return eb_write_all(*(int *)closure, data, length) < 0 ? CAIRO_STATUS_WRITE_ERROR
	                                                       : CAIRO_STATUS_SUCCESS;
}

/* cairo's status enum is foreign and open-ended: ifs, not a switch. */
static int status_to_errno(cairo_status_t st)
{
	if (st == CAIRO_STATUS_SUCCESS)
		return 0;
	if (st == CAIRO_STATUS_NO_MEMORY)
		return -ENOMEM;
	if (st == CAIRO_STATUS_WRITE_ERROR)
		return -EIO;
	return -EPROTO; /* cairo's own failure: a bug here, not in the data */
}

/* Writes the surface to path through a file opened without following a symlink, so that a
 * plot directory others can write cannot redirect the output. */
static int save(cairo_surface_t *surface, const char *path)
{
	_cleanup_close_ int fd = -EBADF;
	cairo_status_t st;

	cairo_surface_flush(surface);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -errno;
	st = cairo_surface_write_to_png_stream(surface, write_fd, &fd);
	if (st != CAIRO_STATUS_SUCCESS)
		return status_to_errno(st);
	if (close(TAKE_FD(fd)) < 0)
		return -errno;
	return 0;
}

static int canvas(int width, int height, cairo_surface_t **ret_surface, cairo_t **ret_cr)
{
	cairo_surface_t *surface;
	cairo_t *cr;
	int r;

	surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);
	r = status_to_errno(cairo_surface_status(surface));
	if (r < 0) {
		cairo_surface_destroy(surface);
		return r;
	}
	cr = cairo_create(surface);
	r = status_to_errno(cairo_status(cr));
	if (r < 0) {
		cairo_destroy(cr);
		cairo_surface_destroy(surface);
		return r;
	}
	cairo_set_source_rgb(cr, 1, 1, 1);
	cairo_paint(cr);
	cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
	cairo_set_font_size(cr, 12);
	*ret_surface = surface;
	*ret_cr = cr;
	return 0;
}

/* Text with its anchor at (x, y): ax and ay pick the anchor within the text's box, 0 for the
 * left or top edge, 0.5 for the middle, 1 for the right or bottom edge. */
static void text(cairo_t *cr, double x, double y, double ax, double ay, const char *s)
{
	cairo_text_extents_t e;

	cairo_text_extents(cr, s, &e);
	cairo_move_to(cr, x - e.x_bearing - ax * e.width, y - e.y_bearing - ay * e.height);
	cairo_set_source_rgb(cr, 0, 0, 0);
	cairo_show_text(cr, s);
}

/* The frame around plot area f on a canvas w wide, with the title centred above and the axis
 * labels below and left. */
static struct frame frame_draw_area(cairo_t *cr, struct frame f, double w, const char *title,
                                    const char *xlabel, const char *ylabel)
{
	text(cr, w / 2, f.y - M_TOP + 8, 0.5, 0, title);
	text(cr, f.x + f.w / 2, f.y + f.h + 26, 0.5, 0, xlabel);
	cairo_save(cr);
	cairo_translate(cr, 12, f.y + f.h / 2);
	cairo_rotate(cr, -M_PI / 2);
	text(cr, 0, 0, 0.5, 0, ylabel);
	cairo_restore(cr);
	cairo_set_source_rgb(cr, 0, 0, 0);
	cairo_set_line_width(cr, 1);
	cairo_rectangle(cr, f.x - 0.5, f.y - 0.5, f.w + 1, f.h + 1);
	cairo_stroke(cr);
	return f;
}

static struct frame frame_draw(cairo_t *cr, double x, double y, double w, double h,
                               const char *title, const char *xlabel, const char *ylabel)
{
	struct frame f = {x + M_LEFT, y + M_TOP, w - M_LEFT - M_RIGHT, h - M_TOP - M_BOTTOM};

	return frame_draw_area(cr, f, w, title, xlabel, ylabel);
}

/* A tick and its label below the frame at value v of [0, max] along x, or left of it along y. */
static void tick_x(cairo_t *cr, const struct frame *f, double v, double max, const char *label)
{
	/* On a pixel's centre: a 1-pixel line there is one sharp column, not two grey ones. */
	double x = floor(f->x + v / max * f->w) + 0.5;

	cairo_set_source_rgb(cr, 0, 0, 0);
	cairo_move_to(cr, x, f->y + f->h);
	cairo_line_to(cr, x, f->y + f->h + 4);
	cairo_stroke(cr);
	text(cr, x, f->y + f->h + 6, 0.5, 0, label);
}

static void tick_y(cairo_t *cr, const struct frame *f, double v, double max, const char *label)
{
	double y = floor(f->y + f->h - v / max * f->h) + 0.5;

	cairo_set_source_rgb(cr, 0, 0, 0);
	cairo_move_to(cr, f->x - 4, y);
	cairo_line_to(cr, f->x, y);
	cairo_stroke(cr);
	text(cr, f->x - 6, y, 1, 0.5, label);
}

/* A horizontal line across the frame at value v of [0, max], in red, dashed. */
static void level(cairo_t *cr, const struct frame *f, double v, double max)
{
	static const double dash[] = {6, 4};
	double y = f->y + f->h - v / max * f->h;

	cairo_save(cr);
	cairo_set_source_rgb(cr, 0.85, 0.1, 0.1);
	cairo_set_dash(cr, dash, 2, 0);
	cairo_move_to(cr, f->x, y);
	cairo_line_to(cr, f->x + f->w, y);
	cairo_stroke(cr);
	cairo_restore(cr);
}

static void tick_label(char *buf, size_t size, double v)
{
	snprintf(buf, size, "%.0f", v);
}

/* A step of 1, 2 or 5 times a power of ten that cuts [0, max] into at most about n parts. */
static double nice_step(double max, unsigned n)
{
	double raw = max / n, p = pow(10, floor(log10(raw)));

	if (raw <= p)
		return p;
	if (raw <= 2 * p)
		return 2 * p;
	if (raw <= 5 * p)
		return 5 * p;
	return 10 * p;
}

int assess_plot_histogram(const struct assess_stats *st, const char *title, const char *path)
{
	_cleanup_(surface_freep) cairo_surface_t *surface = NULL;
	_cleanup_(context_freep) cairo_t *cr = NULL;
	double max = 0, expected = (double)st->bytes / 256.0, step;
	/* Each value a bar of whole pixels, drawn without antialiasing: no bar is smeared into
	 * its neighbours, and no band appears that the data does not have. */
	struct frame f = {M_LEFT, M_TOP, 256 * ASSESS_HISTOGRAM_BAR,
	                  ASSESS_HISTOGRAM_HEIGHT - M_TOP - M_BOTTOM};
	char buf[48];
	int r;

	r = canvas(ASSESS_HISTOGRAM_WIDTH, ASSESS_HISTOGRAM_HEIGHT, &surface, &cr);
	if (r < 0)
		return r;
	for (unsigned v = 0; v < 256; v++)
		max = MAX(max, (double)st->count[v]);
	max = MAX(MAX(max, expected) * 1.08, 1);

	f = frame_draw_area(cr, f, ASSESS_HISTOGRAM_WIDTH, title, "byte value", "count");
	cairo_save(cr);
	cairo_set_antialias(cr, CAIRO_ANTIALIAS_NONE);
	cairo_set_source_rgb(cr, 0.2, 0.35, 0.7);
	for (unsigned v = 0; v < 256; v++) {
		double h = round((double)st->count[v] / max * f.h);

		cairo_rectangle(cr, f.x + v * ASSESS_HISTOGRAM_BAR, f.y + f.h - h,
		                ASSESS_HISTOGRAM_BAR, h);
	}
	cairo_fill(cr);
	cairo_restore(cr);
	level(cr, &f, expected, max);
	snprintf(buf, sizeof(buf), "expected %.0f", expected);
	text(cr, f.x + f.w - 4, f.y + f.h - expected / max * f.h - 3, 1, 1, buf);
	for (unsigned v = 0; v <= 256; v += 64) {
		tick_label(buf, sizeof(buf), MIN(v, 255u));
		tick_x(cr, &f, v, 256, buf);
	}
	step = nice_step(max, 5);
	for (double v = 0; v <= max; v += step) {
		tick_label(buf, sizeof(buf), v);
		tick_y(cr, &f, v, max, buf);
	}
	r = status_to_errno(cairo_status(cr));
	if (r < 0)
		return r;
	return save(surface, path);
}

int assess_plot_pairs(const uint8_t *s, size_t n, const char *title, const char *path)
{
	const struct frame pairs_area = {M_LEFT, M_TOP, 256 * ASSESS_PAIRS_CELL,
	                                 256 * ASSESS_PAIRS_CELL};
	_cleanup_(surface_freep) cairo_surface_t *surface = NULL;
	_cleanup_(context_freep) cairo_t *cr = NULL;
	_cleanup_free_ uint32_t *count = NULL;
	uint32_t max = 0;
	struct frame f;
	char buf[32];
	int r;

	count = calloc(256 * 256, sizeof(*count));
	if (!count)
		return -ENOMEM;
	/* n is at most ASSESS_SAMPLES_MAX, so no count wraps. */
	for (size_t i = 0; i + 1 < n; i += 2) {
		uint32_t c = ++count[s[i] << 8 | s[i + 1]];

		max = MAX(max, c);
	}

	r = canvas(ASSESS_PAIRS_WIDTH, ASSESS_PAIRS_HEIGHT, &surface, &cr);
	if (r < 0)
		return r;
	f = frame_draw_area(cr, pairs_area, ASSESS_PAIRS_WIDTH, title, "first byte", "second byte");
	/* Grey by count, black at the most common pair; y grows upwards as on paper. Each pair
	 * is a cell of whole pixels at whole-pixel coordinates, filled without antialiasing: a
	 * cell of a fraction of a pixel would blend with its neighbours in bands that beat
	 * across the square, which the data does not have. */
	cairo_save(cr);
	cairo_set_antialias(cr, CAIRO_ANTIALIAS_NONE);
	for (unsigned x = 0; x < 256; x++)
		for (unsigned y = 0; y < 256; y++) {
			uint32_t c = count[x << 8 | y];
			double g;

			if (c == 0)
				continue;
			g = 0.85 * (1.0 - (double)c / max);
			cairo_set_source_rgb(cr, g, g, g);
			cairo_rectangle(cr, f.x + x * ASSESS_PAIRS_CELL,
			                f.y + f.h - (y + 1) * ASSESS_PAIRS_CELL, ASSESS_PAIRS_CELL,
			                ASSESS_PAIRS_CELL);
			cairo_fill(cr);
		}
	cairo_restore(cr);
	for (unsigned v = 0; v <= 256; v += 64) {
		tick_label(buf, sizeof(buf), MIN(v, 255u));
		tick_x(cr, &f, v, 256, buf);
		tick_y(cr, &f, v, 256, buf);
	}
	r = status_to_errno(cairo_status(cr));
	if (r < 0)
		return r;
	return save(surface, path);
}

/* One of the health plot's two panels: per span, the count the test reached, against its
 * cutoff; alarms as red marks along the bottom. */
static void health_panel(cairo_t *cr, const struct assess_health *a, double y, double h, bool rct,
                         const char *title)
{
	unsigned cutoff = rct ? a->health.rct_cutoff : a->health.apt_cutoff, top = cutoff;
	uint64_t samples = a->health.samples;
	struct frame f;
	char buf[32];

	for (size_t i = 0; i < a->n_spans; i++)
		top = MAX(top, rct ? a->spans[i].rct_max : a->spans[i].apt_max);
	f = frame_draw(cr, 0, y, ASSESS_HEALTH_WIDTH, h, title, "sample",
	               rct ? "longest run" : "window count");

	cairo_set_source_rgb(cr, 0.2, 0.35, 0.7);
	for (size_t i = 0; i < a->n_spans; i++) {
		unsigned v = rct ? a->spans[i].rct_max : a->spans[i].apt_max;
		double x = f.x + (i + 0.5) * f.w / a->n_spans;
		double yy = f.y + f.h - (double)v / (top * 1.1) * f.h;

		if (i == 0)
			cairo_move_to(cr, x, yy);
		else
			cairo_line_to(cr, x, yy);
	}
	cairo_stroke(cr);
	cairo_set_source_rgb(cr, 0.85, 0.1, 0.1);
	for (size_t i = 0; i < a->n_spans; i++)
		if (a->spans[i].alarms > 0)
			cairo_rectangle(cr, f.x + i * f.w / a->n_spans, f.y + f.h - 6,
			                MAX(f.w / a->n_spans, 1.0), 6);
	cairo_fill(cr);
	level(cr, &f, cutoff, top * 1.1);

	tick_y(cr, &f, 0, top * 1.1, "0");
	snprintf(buf, sizeof(buf), "%u", cutoff);
	tick_y(cr, &f, cutoff, top * 1.1, buf);
	text(cr, f.x + f.w - 4, f.y + f.h - cutoff / (top * 1.1) * f.h - 3, 1, 1, "cutoff");
	tick_x(cr, &f, 0, 1, "0");
	snprintf(buf, sizeof(buf), "%" PRIu64, samples);
	text(cr, f.x + f.w, f.y + f.h + 6, 1, 0, buf);
}

int assess_plot_health(const struct assess_health *a, const char *title, const char *path)
{
	_cleanup_(surface_freep) cairo_surface_t *surface = NULL;
	_cleanup_(context_freep) cairo_t *cr = NULL;
	char head[160];
	double half = ASSESS_HEALTH_HEIGHT / 2.0;
	int r;

	r = canvas(ASSESS_HEALTH_WIDTH, ASSESS_HEALTH_HEIGHT, &surface, &cr);
	if (r < 0)
		return r;
	snprintf(head, sizeof(head), "%s: repetition count test, H = %.4g", title, a->h);
	health_panel(cr, a, 0, half, true, head);
	snprintf(head, sizeof(head), "adaptive proportion test, window %u", a->health.apt_window);
	health_panel(cr, a, half, half, false, head);
	r = status_to_errno(cairo_status(cr));
	if (r < 0)
		return r;
	return save(surface, path);
}

void assess_plot_done(void)
{
	cairo_debug_reset_static_data();
	FcFini();
}
