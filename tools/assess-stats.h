/* SPDX-License-Identifier: MIT */
/* The statistics John Walker's ent prints for a byte stream, computed the way ent computes them,
 * so that eb-assess's figures can be checked against Debian's ent on the same file. */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct assess_stats {
	size_t bytes;
	uint64_t count[256];
	double entropy;     /* Shannon entropy of the byte frequencies, bits per byte */
	double compression; /* what an optimal order-0 coder would save, percent */
	double chi_square;  /* against the uniform distribution, 255 degrees of freedom */
	double chi_p;       /* probability that a uniform source exceeds chi_square, percent */
	double mean;        /* of the byte values; 127.5 for uniform bytes */
	double pi;          /* Monte Carlo estimate from 24-bit coordinate pairs */
	size_t pi_points;   /* how many pairs went into it */
	double correlation; /* serial correlation of successive bytes; NaN when undefined */
};

/* Fills *ret from n bytes (n >= 1). */
void assess_stats_compute(const uint8_t *s, size_t n, struct assess_stats *ret);
