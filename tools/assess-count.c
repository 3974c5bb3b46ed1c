/* SPDX-License-Identifier: MIT */
/* SP 800-90B sections 6.3.1-6.3.4: the estimators that count (most common value, collision,
 * Markov, compression). */
#include <assert.h>
#include <math.h>

#include "assess-bound.h"
#include "assess-estimators.h"
#include "macro.h"

/* -log2(p) that gives 0 rather than -0 for p = 1. */
static double bits_of(double p)
{
	return 0.0 - log2(p);
}

double assess_mcv(const uint8_t *s, size_t n)
{
	size_t count[256] = {0}, max = 0;

	assert(n > 1);
	for (size_t i = 0; i < n; i++)
		count[s[i]]++;
	for (unsigned v = 0; v < 256; v++)
		max = MAX(max, count[v]);
	return bits_of(assess_upper_bound((double)max / (double)n, (double)n));
}

double assess_collision(const uint8_t *b, size_t n)
{
	double sum2 = 0, mean, sd, x;
	size_t v = 0, i = 0;

	/* Step 2: the waiting time to the first repeat from b[i] is 2 (00, 11) or 3 (010, 011,
	 * 100, 101); a pair at the very end with no third bit ends the walk. */
	while (i + 1 < n) {
		unsigned t;

		if (b[i] == b[i + 1])
			t = 2;
		else if (i + 2 < n)
			t = 3;
		else
			break;
		sum2 += (double)(t * t);
		v++;
		i += t;
	}
	if (v < 2)
		return 0;
	/* The walk covered i bits in v collisions: the mean is i / v. */
	mean = (double)i / (double)v;
	sd = sqrt((sum2 - (double)i * mean) / (double)(v - 1));
	x = MAX(mean - ASSESS_Z_ALPHA * sd / sqrt((double)v), 2.0);
	/* Step 7: for binary data the mean 2 + 2pq solves for p in closed form; a bound at 2.5 or
	 * above is the uniform case. */
	if (x >= 2.5)
		return 1.0;
	return bits_of(0.5 + sqrt(1.25 - 0.5 * x));
}

/* log2 of a candidate's probability: its first bit's, then its transitions' (from, to, times);
 * -inf when it takes a transition never seen. */
static double markov_path(double p0, const double t[2][2], const unsigned (*steps)[3],
                          unsigned n_steps)
{
	double lp = log2(p0);

	for (unsigned i = 0; i < n_steps; i++) {
		double pr = t[steps[i][0]][steps[i][1]];

		if (!(pr > 0))
			return -INFINITY;
		lp += steps[i][2] * log2(pr);
	}
	return lp;
}

double assess_markov(const uint8_t *b, size_t n)
{
	/* Step 3's six candidates for the most likely 128-bit sequence: the first bit, then
	 * (from, to, how many) transitions. */
	static const unsigned paths[6][3][3] = {
	    {{0, 0, 127}},            /* 0 then 127 x 00 */
	    {{0, 1, 64}, {1, 0, 63}}, /* 0101... */
	    {{0, 1, 1}, {1, 1, 126}}, /* 0 then 1s */
	    {{1, 0, 1}, {0, 0, 126}}, /* 1 then 0s */
	    {{1, 0, 64}, {0, 1, 63}}, /* 1010... */
	    {{1, 1, 127}},            /* 1s */
	};
	static const unsigned n_steps[6] = {1, 2, 2, 2, 2, 1};
	size_t c[2] = {0, 0}, cc[2][2] = {{0, 0}, {0, 0}};
	double t[2][2] = {{0, 0}, {0, 0}}, p[2], best = -INFINITY;

	assert(n > 1);
	for (size_t i = 0; i + 1 < n; i++) {
		c[b[i]]++;
		cc[b[i]][b[i + 1]]++;
	}
	for (unsigned a = 0; a < 2; a++)
		for (unsigned z = 0; z < 2; z++)
			t[a][z] = c[a] > 0 ? (double)cc[a][z] / (double)c[a] : 0;
	/* The initial probabilities count the last bit too. */
	c[b[n - 1]]++;
	p[0] = (double)c[0] / (double)n;
	p[1] = 1.0 - p[0];
	for (unsigned i = 0; i < 6; i++)
		best = MAX(best, markov_path(p[i / 3], t, paths[i], n_steps[i]));
	return MIN(0.0 - best / 128.0, 1.0);
}

struct compression_arg {
	uint64_t d, L;
};

static double compression_f(double p, const void *arg)
{
	const struct compression_arg *a = arg;

	return assess_compression_mean(p, ASSESS_COMPRESSION_B, a->d, a->L);
}

double assess_compression(const uint8_t *b, size_t n)
{
	const unsigned blocks = 1u << ASSESS_COMPRESSION_B;
	struct compression_arg a = {.d = ASSESS_COMPRESSION_D, .L = n / ASSESS_COMPRESSION_B};
	size_t last[1u << ASSESS_COMPRESSION_B] = {0};
	double sum = 0, sum2 = 0, x, sd, p;
	uint64_t v;

	if (a.L <= a.d)
		return NAN;
	v = a.L - a.d;
	/* Maurer's universal statistic over 6-bit blocks: for each block after the first d, log2
	 * of how far back its value was last seen (blocks counted from 1). */
	for (size_t i = 0; i < a.L; i++) {
		unsigned block = 0;

		for (unsigned j = 0; j < ASSESS_COMPRESSION_B; j++)
			block = block << 1 | (b[i * ASSESS_COMPRESSION_B + j] & 1);
		if (i >= a.d) {
			double l = log2((double)(i + 1 - last[block]));

			sum += l;
			sum2 += l * l;
		}
		last[block] = i + 1;
	}
	x = sum / (double)v;
	sd = 0.5907 * sqrt(sum2 / (double)(v - 1) - x * x);
	x -= ASSESS_Z_ALPHA * sd / sqrt((double)v);
	/* The mean falls as p grows; above its value at uniform p the data look uniform. */
	if (!(compression_f(1.0 / blocks, &a) > x))
		return 1.0;
	p = assess_bisect(compression_f, &a, x, 1.0 / blocks, 1.0);
	if (!(p > 1.0 / blocks))
		return 1.0;
	return bits_of(p) / ASSESS_COMPRESSION_B;
}
