/* SPDX-License-Identifier: MIT */
/* Reference binomial tails for checking health.c's cutoffs by another road: the probability mass
 * function by its exact ratio recurrence in long double (whose exponent range holds even
 * 0.07^1023), summed directly, where health.c uses lgamma() in log space. Test and doc tools
 * only. */
#pragma once

#include <math.h>
#include <stdlib.h>

/* P(X >= k) for X ~ Binomial(n, p), for every k in 0..n+1, into tail[] (n + 2 entries). */
static inline void binom_tails(unsigned n, long double p, long double *tail)
{
	long double pmf = powl(1.0L - p, (long double)n), odds = p / (1.0L - p);
	long double *mass = calloc(n + 1, sizeof(long double));

	if (!mass)
		abort();
	for (unsigned i = 0; i <= n; i++) {
		mass[i] = pmf;
		pmf = pmf * (long double)(n - i) / (long double)(i + 1) * odds;
	}
	tail[n + 1] = 0;
	for (unsigned i = n + 1; i-- > 0;)
		tail[i] = tail[i + 1] + mass[i];
	free(mass);
}

/* The APT cutoff as health.h defines it: the smallest C with P(1 + Bin(W - 1, p) >= C) <= alpha. */
static inline unsigned binom_apt_cutoff_exact(unsigned window, double h, unsigned alpha_log2)
{
	long double alpha = ldexpl(1.0L, -(int)alpha_log2), *tail;
	unsigned n = window - 1, c = 0;

	tail = calloc(n + 2, sizeof(long double));
	if (!tail)
		abort();
	binom_tails(n, exp2l(-(long double)h), tail);
	for (unsigned k = 0; k <= n + 1; k++)
		if (tail[k] <= alpha) {
			c = k + 1; /* X >= k is the alarm B >= k + 1 */
			break;
		}
	free(tail);
	return c;
}

/* The APT cutoff as SP 800-90B prints it: 1 + CRITBINOM(W, p, 1 - alpha), CRITBINOM(n, p, q)
 * being the smallest k with P(Bin(n, p) <= k) >= q, i.e. P(Bin(n, p) >= k + 1) <= 1 - q. */
static inline unsigned binom_apt_cutoff_sp800_90b(unsigned window, double h, unsigned alpha_log2)
{
	long double alpha = ldexpl(1.0L, -(int)alpha_log2), *tail;
	unsigned c = 0;

	tail = calloc(window + 2, sizeof(long double));
	if (!tail)
		abort();
	binom_tails(window, exp2l(-(long double)h), tail);
	for (unsigned k = 0; k <= window; k++)
		if (tail[k + 1] <= alpha) {
			c = 1 + k;
			break;
		}
	free(tail);
	return c;
}

/* The RCT cutoff by search instead of ceil(): the smallest C with H (C - 1) >= alpha_log2, the
 * product exact in long double (a 53-bit H times a count below 2^11). */
static inline unsigned binom_rct_cutoff(double h, unsigned alpha_log2)
{
	unsigned c = 1;

	while ((long double)h * (c - 1) < alpha_log2)
		c++;
	return c;
}
