/* SPDX-License-Identifier: MIT */
/* SP 800-90B's shared arithmetic (NIST SP 800-90B, January 2018, sections 6.3.4 and 6.3.7). */
#include "assess-bound.h"

#include <assert.h>
#include <float.h>
#include <math.h>

#include "macro.h"

double assess_upper_bound(double p, double n)
{
	double u;

	assert(n > 1);
	u = p + ASSESS_Z_ALPHA * sqrt(p * (1.0 - p) / (n - 1.0));
	return u > 1.0 ? 1.0 : u;
}

double assess_bisect(double (*f)(double p, const void *arg), const void *arg, double target,
                     double lo, double hi)
{
	assert(lo <= hi);

	/* f(lo) > target, as the caller checked, and f(hi) is taken to be below it without being
	 * evaluated (the ends of the predictors' range, 1, is a pole). 1100 halvings reach any
	 * double's last bit; the loop stops sooner, when the midpoint is one of the ends. */
	for (unsigned i = 0; i < 1100; i++) {
		double mid = lo + (hi - lo) / 2, v;

		if (mid <= lo || mid >= hi)
			break;
		v = f(mid, arg);
		if (v == target)
			return mid;
		if (v > target)
			lo = mid;
		else
			hi = mid;
	}
	/* The upper end: of the two, the one that credits less. */
	return hi;
}

double assess_run_log_probability(double p, uint64_t r, uint64_t N)
{
	long double q = 1.0L - p, x = 1.0L, last = 0.0L, pr = powl(p, (long double)r);

	assert(p > 0 && p < 1);
	/* The fixed point of x = 1 + q p^r x^(r+1) in [1, 1/p], approached from below. The spec
	 * stops at the tenth term; that is short of it when p r nears 1, so iterate until x stops
	 * growing (at most 66 rounds, as the reference implementation does). */
	for (unsigned i = 0; i <= 65 && x - last > LDBL_EPSILON * x; i++) {
		last = x;
		x = 1.0L + q * pr * powl(x, (long double)r + 1.0L);
	}
	return (double)(logl(1.0L - p * x) -
	                logl(((long double)r + 1.0L - (long double)r * x) * q) -
	                ((long double)N + 1.0L) * logl(x));
}

struct run_arg {
	uint64_t r, N;
};

static double run_f(double p, const void *arg)
{
	const struct run_arg *a = arg;

	return assess_run_log_probability(p, a->r, a->N);
}

double assess_predictor_h(uint64_t C, uint64_t N, uint64_t longest, unsigned k)
{
	struct run_arg a = {.r = longest + 1, .N = N};
	double pg, p;

	assert(N > 1 && k >= 2);
	pg = (double)C / (double)N;
	/* No correct prediction: the p for which none in N has probability 0.01. */
	pg = C > 0 ? assess_upper_bound(pg, (double)N) : 1.0 - pow(0.01, 1.0 / (double)N);
	p = MAX(1.0 / k, pg);
	/* P_local: the p at which a longest run of r - 1 has probability 0.99 of not being
	 * beaten; only where it is above what the bounds so far give. */
	if (p < 1.0 && run_f(p, &a) > log(0.99))
		p = MAX(p, assess_bisect(run_f, &a, log(0.99), p, 1.0));
	return 0.0 - log2(p);
}

/* G(z) of 6.3.4 step 8: the mean over blocks t = d+1..L of sum over u of log2(u) P(the last
 * occurrence of a block of probability z was u blocks back). The sum stops once (1 - z)^u falls
 * below 10^-30: all the terms after it together weigh less than 10^-15 of it (each is at most
 * L log2(L) (1 - z)^u and they fall geometrically), below what the estimate prints. */
static long double compression_g(long double z, uint64_t d, uint64_t L)
{
	long double q = 1.0L - z, qu = 1.0L, inner = 0, last = 0;

	/* sum_{t=d+1}^{L} [ z^2 sum_{u<t} log2(u) q^(u-1) + z log2(t) q^(t-1) ]; for u <= d the
	 * inner term counts L - d times, for d < u < L it counts L - u times. */
	for (uint64_t u = 1; u <= L; u++) {
		long double lu = log2l((long double)u) * qu;

		if (u < L)
			inner += lu * (long double)(u <= d ? L - d : L - u);
		if (u > d)
			last += lu;
		qu *= q;
		if (qu < 1e-30L)
			break;
	}
	return (z * z * inner + z * last) / (long double)(L - d);
}

double assess_compression_mean(double p, unsigned b, uint64_t d, uint64_t L)
{
	long double blocks = (long double)(1u << b), q = (1.0L - p) / (blocks - 1.0L);

	assert(L > d);
	return (double)(compression_g(p, d, L) + (blocks - 1.0L) * compression_g(q, d, L));
}
