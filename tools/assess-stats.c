/* SPDX-License-Identifier: MIT */
/* ent's statistics (Fourmilab's ent, randtest.c), recomputed term by term. */
#include "assess-stats.h"

#include <assert.h>
#include <math.h>
#include <string.h>

/* ent's Monte Carlo test: each 6 bytes are a point (x, y), both 24-bit big-endian, in a square
 * of side 2^24 - 1; the share inside the quarter circle of that radius is pi / 4. */
#define MONTE_BYTES 6u

/* P(X >= x) for X chi-square with k degrees of freedom, by Wilson and Hilferty's cube-root
 * normal approximation: for k = 255 it is within a few thousandths of a percent of the exact
 * tail, finer than the two decimals ent prints. */
static double chi_square_tail(double x, double k)
{
	double v = 2.0 / (9.0 * k), z;

	if (x <= 0)
		return 1.0;
	z = (cbrt(x / k) - (1.0 - v)) / sqrt(v);
	return 0.5 * erfc(z / M_SQRT2);
}

void assess_stats_compute(const uint8_t *s, size_t n, struct assess_stats *ret)
{
	struct assess_stats st = {.bytes = n};
	double expected, sum = 0, t1 = 0, t2 = 0, t3 = 0, d, radius2;
	size_t inside = 0;

	assert(s);
	assert(n >= 1);

	for (size_t i = 0; i < n; i++) {
		st.count[s[i]]++;
		sum += s[i];
	}

	expected = (double)n / 256.0;
	for (unsigned v = 0; v < 256; v++) {
		double p = (double)st.count[v] / (double)n, dev = (double)st.count[v] - expected;

		if (p > 0)
			st.entropy -= p * log2(p);
		st.chi_square += dev * dev / expected;
	}
	st.compression = 100.0 * (8.0 - st.entropy) / 8.0;
	st.chi_p = 100.0 * chi_square_tail(st.chi_square, 255.0);
	st.mean = sum / (double)n;

	radius2 = (double)((1u << 24) - 1) * (double)((1u << 24) - 1);
	for (size_t i = 0; i + MONTE_BYTES <= n; i += MONTE_BYTES) {
		double x = (double)((uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2]);
		double y = (double)((uint32_t)s[i + 3] << 16 | (uint32_t)s[i + 4] << 8 | s[i + 5]);

		st.pi_points++;
		inside += x * x + y * y <= radius2;
	}
	st.pi = st.pi_points > 0 ? 4.0 * (double)inside / (double)st.pi_points : NAN;

	/* Successive bytes, the last paired with the first, as ent does. */
	for (size_t i = 0; i < n; i++) {
		double u = s[i];

		t1 += u * (double)s[(i + 1) % n];
		t2 += u;
		t3 += u * u;
	}
	d = (double)n * t3 - t2 * t2;
	st.correlation = d == 0 ? NAN : ((double)n * t1 - t2 * t2) / d;

	*ret = st;
}
