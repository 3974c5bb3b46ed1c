/* SPDX-License-Identifier: MIT */
/* SP 800-90B section 6.3 estimators on a raw capture; the choice of estimators is in estimate.h. */
#include "estimate.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "macro.h"

/* 99 % one-sided, as in SP 800-90B. */
#define Z_ALPHA 2.5758293035489
/* Lag predictor depth, as in SP 800-90B 6.3.8. */
#define LAG_D 128

/* -log2(p) that prints 0 rather than -0 for p = 1. */
static double bits_of(double p)
{
	return 0.0 - log2(p);
}

static double upper_bound(double p, size_t n)
{
	double u = p + Z_ALPHA * sqrt(p * (1.0 - p) / (double)(n - 1));

	return u > 1.0 ? 1.0 : u;
}

/* 6.3.1: H = -log2(p_u), p_u the 99 % upper bound on the most common value's probability. */
static double mcv(const uint8_t *s, size_t n)
{
	size_t count[256] = {0}, max = 0;

	for (size_t i = 0; i < n; i++)
		count[s[i]]++;
	for (unsigned v = 0; v < 256; v++)
		if (count[v] > max)
			max = count[v];
	return bits_of(upper_bound((double)max / (double)n, n));
}

/* 6.3.2 for binary data: the waiting times to the first repeat are 2 (00, 11) or 3; their mean
 * is 2 + 2pq, so the 99 % lower bound on the mean bounds p from above. */
static double collision(const uint8_t *b, size_t n)
{
	double sum = 0, sum2 = 0, mean, sd, x, p;
	size_t v = 0, i = 0;

	while (i + 1 < n) {
		unsigned t;

		if (b[i] == b[i + 1])
			t = 2;
		else if (i + 2 < n)
			t = 3;
		else
			break;
		sum += t;
		sum2 += (double)t * t;
		v++;
		i += t;
	}
	if (v < 2)
		return 0;
	mean = sum / (double)v;
	sd = sqrt((sum2 - (double)v * mean * mean) / (double)(v - 1));
	x = mean - Z_ALPHA * sd / sqrt((double)v);
	if (x < 2.0)
		x = 2.0;
	if (x >= 2.5)
		return 1.0;
	p = 0.5 + sqrt(1.25 - 0.5 * x);
	return bits_of(p);
}

/* 6.3.3 for binary data: the most likely 128-bit sequence under a first-order Markov model fitted
 * to the data; H = -log2(P_max) / 128, at most 1. */
static double markov(const uint8_t *b, size_t n)
{
	double c[2][2] = {{0, 0}, {0, 0}}, p0, p1, t[2][2], lp[6], pmax;
	size_t ones = 0;

	for (size_t i = 0; i < n; i++)
		ones += b[i];
	for (size_t i = 0; i + 1 < n; i++)
		c[b[i]][b[i + 1]]++;
	p1 = (double)ones / (double)n;
	p0 = 1.0 - p1;
	for (unsigned a = 0; a < 2; a++) {
		double row = c[a][0] + c[a][1];

		t[a][0] = row > 0 ? c[a][0] / row : 0;
		t[a][1] = row > 0 ? c[a][1] / row : 0;
	}
	/* log2 of the six candidate sequences' probabilities (log2(0) = -inf is fine here). */
	lp[0] = log2(p0) + 127 * log2(t[0][0]);
	lp[1] = log2(p0) + 64 * log2(t[0][1]) + 63 * log2(t[1][0]);
	lp[2] = log2(p0) + log2(t[0][1]) + 126 * log2(t[1][1]);
	lp[3] = log2(p1) + log2(t[1][0]) + 126 * log2(t[0][0]);
	lp[4] = log2(p1) + 64 * log2(t[1][0]) + 63 * log2(t[0][1]);
	lp[5] = log2(p1) + 127 * log2(t[1][1]);
	pmax = lp[0];
	for (unsigned i = 1; i < 6; i++)
		if (lp[i] > pmax)
			pmax = lp[i];
	return fmin(0.0 - pmax / 128.0, 1.0);
}

/* P_local of SP 800-90B 6.3.7 step 9: the p for which a longest run of r - 1 correct predictions
 * in N has probability 0.99, found by bisection (the left side falls as p grows). */
static double p_local(size_t longest, size_t n)
{
	double lo = 0.0, hi = 1.0, r = (double)longest + 1.0;

	for (unsigned it = 0; it < 200; it++) {
		double p = (lo + hi) / 2, q = 1.0 - p, x = 1.0, f;

		for (unsigned j = 0; j < 10; j++)
			x = 1.0 + q * pow(p, r) * pow(x, r + 1.0);
		f = (1.0 - p * x) / ((r + 1.0 - r * x) * q) / pow(x, (double)n + 1.0);
		if (f > 0.99)
			lo = p;
		else
			hi = p;
	}
	return lo;
}

/* 6.3.8: D subpredictors guess s[i - d]; the one with the most hits so far predicts. k: how many
 * values a sample can take. */
static double lag(const uint8_t *s, size_t n, unsigned k)
{
	size_t score[LAG_D] = {0}, winner = 0, correct = 0, run = 0, longest = 0, predictions;
	double pg, pl;

	if (n < 2)
		return 0;
	for (size_t i = 1; i < n; i++) {
		size_t d_max = i < LAG_D ? i : LAG_D;

		if (winner < d_max && s[i - winner - 1] == s[i]) {
			correct++;
			if (++run > longest)
				longest = run;
		} else
			run = 0;
		for (size_t d = 0; d < d_max; d++)
			if (s[i - d - 1] == s[i] && ++score[d] >= score[winner])
				winner = d;
	}
	predictions = n - 1;
	pg = (double)correct / (double)predictions;
	if (correct == 0)
		pg = 1.0 - pow(0.01, 1.0 / (double)predictions);
	else
		pg = upper_bound(pg, predictions);
	pl = p_local(longest, predictions);
	/* No predictor does worse than guessing among the k possible values. */
	return bits_of(fmax(fmax(pg, pl), 1.0 / k));
}

unsigned eb_estimate_sample_bits(const uint8_t *s, size_t n)
{
	uint8_t all = 0;
	unsigned bits = 1;

	for (size_t i = 0; i < n; i++)
		all |= s[i];
	while (bits < 8 && (all >> bits) != 0)
		bits++;
	return bits;
}

int eb_estimate_min_entropy(const uint8_t *s, size_t n, unsigned bits, struct eb_estimate *ret)
{
	_cleanup_free_ uint8_t *b = NULL;
	struct eb_estimate e = {.samples = n, .bits = bits};
	size_t nb;

	assert(s || n == 0);
	assert(ret);

	if (bits < 1 || bits > 8)
		return -EINVAL;
	if (n < EB_ESTIMATE_SAMPLES_MIN || n > EB_ESTIMATE_SAMPLES_MAX)
		return -ERANGE;
	if (eb_estimate_sample_bits(s, n) > bits)
		return -EDOM;

	/* n <= 2^26 samples of at most 8 bits: no overflow. */
	nb = n * bits;
	b = malloc(nb);
	if (!b)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		for (unsigned k = 0; k < bits; k++)
			b[i * bits + k] = (uint8_t)((s[i] >> (bits - 1 - k)) & 1);

	e.mcv = mcv(s, n);
	e.lag = lag(s, n, 1u << bits);
	e.bit_mcv = mcv(b, nb);
	e.bit_collision = collision(b, nb);
	e.bit_markov = markov(b, nb);
	e.bit_lag = lag(b, nb, 2);
	e.h_original = fmin(e.mcv, e.lag);
	e.h_bitstring =
	    fmin(fmin(fmin(fmin(1.0, e.bit_mcv), e.bit_collision), e.bit_markov), e.bit_lag);
	e.min_entropy = fmin(e.h_original, bits * e.h_bitstring);
	*ret = e;
	return 0;
}
