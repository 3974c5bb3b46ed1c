/* SPDX-License-Identifier: MIT */
/* eb-assess's PNG plots, drawn with cairo. Each writes one file and returns 0 or a negative
 * errno. */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct assess_stats;
struct assess_health;

/* The images' sizes in pixels, which eb-assess(1) states. */
#define ASSESS_HISTOGRAM_BAR    3   /* pixels per byte value */
#define ASSESS_HISTOGRAM_WIDTH  860 /* 256 bars of 3 pixels and the margins */
#define ASSESS_HISTOGRAM_HEIGHT 400
#define ASSESS_PAIRS_CELL       2 /* each byte pair is a 2 x 2 cell of a 512 x 512 square */
#define ASSESS_PAIRS_WIDTH      600
#define ASSESS_PAIRS_HEIGHT     600
#define ASSESS_HEALTH_WIDTH     800
#define ASSESS_HEALTH_HEIGHT    500
/* Spans of samples the health plot draws: one per pixel of its width. */
#define ASSESS_HEALTH_SPANS 700u

/* How often each byte value occurs, against the count a uniform source would give. */
int assess_plot_histogram(const struct assess_stats *st, const char *title, const char *path);

/* Successive non-overlapping byte pairs (x, y) as points, darker where a pair is more common:
 * Entropy Broker 2's plot. Structure (lines, clusters, empty bands) shows as a pattern; good
 * noise is an even grey. */
int assess_plot_pairs(const uint8_t *s, size_t n, const char *title, const char *path);

/* The RCT's run length and the APT's count per span of samples, each against its cutoff, with
 * the alarms marked. */
int assess_plot_health(const struct assess_health *a, const char *title, const char *path);

/* Releases what cairo and fontconfig keep for the process's lifetime (font caches, the parsed
 * configuration), so that a leak checker sees only what eb-assess itself forgot. Call once, after
 * the last plot. */
void assess_plot_done(void);
