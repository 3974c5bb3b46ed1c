/* SPDX-License-Identifier: MIT */
/* The cutoffs of SP 800-90B's Repetition Count and Adaptive Proportion Tests (4.4.1, 4.4.2), from
 * the per-sample min-entropy and the false-alarm rate: arithmetic alone, apart from the tests that
 * apply them (health.c). */
#include <assert.h>
#include <errno.h>
#include <math.h>

#include "health.h"
#include "macro.h"

int eb_health_rct_cutoff(double h_per_sample, unsigned alpha_log2, unsigned *ret)
{
	double c;

	assert(ret);

	/* Written so that NaN fails too. */
	if (!(h_per_sample > 0 && h_per_sample <= EB_HEALTH_BITS_MAX))
		return -EINVAL;
	if (alpha_log2 == 0 || alpha_log2 > 64)
		return -EINVAL;

	/* A run of C identical samples has probability at most 2^(-H (C - 1)) for a source with H
	 * bits of min-entropy per sample; C - 1 >= alpha_log2 / H makes that at most alpha. */
	c = 1 + ceil((double)alpha_log2 / h_per_sample);
	if (c > EB_HEALTH_CUTOFF_MAX)
		return -ERANGE;

	/* The quotient is rounded, so when alpha_log2 / H is within an ulp of an integer ceil() can
	 * land one off. H (C - 1) in long double is exact (53 by 17 bits), so settle it there. */
	while (c > 1 && (long double)h_per_sample * (c - 2) >= alpha_log2)
		c--;
	while ((long double)h_per_sample * (c - 1) < alpha_log2)
		c++;

	*ret = (unsigned)c;
	return 0;
}

unsigned eb_health_apt_window(unsigned bits_per_sample)
{
	return bits_per_sample == 1 ? EB_HEALTH_APT_WINDOW_BINARY : EB_HEALTH_APT_WINDOW;
}

/* log(n!) without lgamma()'s global signgam, so that concurrent callers do not race. */
static double log_factorial(unsigned n)
{
	int sign;

	return lgamma_r((double)n + 1, &sign);
}

int eb_health_apt_cutoff(double h_per_sample, unsigned window, unsigned alpha_log2, unsigned *ret)
{
	double p, log_p, log_q, log_n, alpha, tail = 0;
	unsigned n;

	assert(ret);

	if (!(h_per_sample > 0 && h_per_sample <= EB_HEALTH_BITS_MAX))
		return -EINVAL;
	if (alpha_log2 == 0 || alpha_log2 > 64)
		return -EINVAL;
	if (window < 2 || window > EB_HEALTH_CUTOFF_MAX)
		return -EINVAL;

	p = exp2(-h_per_sample);
	if (!(p < 1))
		return -ERANGE;

	/* B - 1 = X ~ Binomial(n, p): the window's first sample is A by definition, each of the
	 * other n = W - 1 matches it with probability at most p = 2^-H. The alarm is B >= C, i.e.
	 * X >= C - 1, so we want the smallest k = C - 1 with P(X >= k) <= alpha. Summing the
	 * upper tail from its far end adds the small terms first, and each term is formed in log
	 * space so that neither the binomial coefficient nor p^k over- or underflows on the way. */
	n = window - 1;
	log_p = log(p);
	log_q = log1p(-p);
	log_n = log_factorial(n);
	alpha = ldexp(1, -(int)alpha_log2);

	for (unsigned k = n + 1; k-- > 0;) {
		double log_term =
		    log_n - log_factorial(k) - log_factorial(n - k) + k * log_p + (n - k) * log_q;

		tail += exp(log_term); /* now P(X >= k) */
		if (tail > alpha) {
			/* P(X >= k + 1) <= alpha < P(X >= k): the X cutoff is k + 1, B's is k + 2.
			 */
			unsigned c = k + 2;

			/* B never exceeds W: a cutoff above it is a test that cannot fire. */
			if (c > window)
				return -ERANGE;
			*ret = c;
			return 0;
		}
	}

	/* The whole distribution sums to 1 > alpha, so the loop returns; rounding cannot get here
	 * with alpha <= 1/2. */
	return -ERANGE;
}

int eb_health_period_cutoff(double h_per_sample, unsigned alpha_log2, unsigned *ret)
{
	unsigned c;
	int r;

	assert(ret);

	/* Cp matches at one lag have probability at most 2^-(H Cp); the periodic test looks at
	 * EB_HEALTH_PERIOD_MAX = 2^8 lags at once, so the union bound asks H Cp >= alpha_log2 + 8:
	 * the RCT's cutoff for alpha_log2 + 8, less the one sample a run of C equal ones starts
	 * with. */
	static_assert(EB_HEALTH_PERIOD_MAX == 1u << 8, "the union bound below adds log2 of it");
	if (alpha_log2 == 0 || alpha_log2 > 56)
		return -EINVAL;
	r = eb_health_rct_cutoff(h_per_sample, alpha_log2 + 8, &c);
	if (r < 0)
		return r;
	/* A run is counted in a byte, which the test must not wrap before it fires. */
	if (c - 1 > UINT8_MAX)
		return -ERANGE;
	*ret = c - 1;
	return 0;
}
