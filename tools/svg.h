/* SPDX-License-Identifier: MIT */
/* A time-series chart drawn as one SVG document: lines or areas over a window of fixed slots,
 * marks on the time axis, a y axis with round steps. No script, no outside resource. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A sample's marks, drawn on the time axis. */
enum {
	SVG_MARK_ALARM = 1 << 0,   /* a health alarm: a red triangle under the axis */
	SVG_MARK_STARVED = 1 << 1, /* EMPTY answers: an amber band over the plot */
};

struct svg_line {
	const double *y;    /* n values, oldest first */
	const char *colour; /* "#rrggbb" */
	bool area;          /* filled down to 0 */
};

struct svg_chart {
	size_t slots;         /* the window's slots; the n samples fill its right end */
	size_t n;             /* samples, at most slots */
	uint32_t interval_ms; /* a slot's length, for the time axis' labels */
	const struct svg_line *lines;
	size_t n_lines;
	const uint8_t *marks; /* n of SVG_MARK_*, or NULL */
	double y_min_top;     /* the y axis reaches at least this (0: from the data alone) */
};

/* The chart's width and height in the SVG's own units; a page scales it to its column. */
#define SVG_WIDTH  600
#define SVG_HEIGHT 210

/* Writes one <svg> document (with its xmlns, to stand alone as an image). */
void svg_chart_write(FILE *f, const struct svg_chart *c);

/* A figure in at most 5 characters: 950, 9.5k, 12M. */
const char *svg_si(double v, char buf[static 16]);
