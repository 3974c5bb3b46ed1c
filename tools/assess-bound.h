/* SPDX-License-Identifier: MIT */
/* The arithmetic SP 800-90B's estimators share: the 99 % upper bound on a proportion, the
 * predictors' global and local bounds (section 6.3.7's steps 6-9), and the bisection that solves
 * the compression and local-run equations for p. */
#pragma once

#include <stdint.h>

/* z for a one-sided 99 % bound, as SP 800-90B prints it (2.576) to all the digits a double has. */
#define ASSESS_Z_ALPHA 2.5758293035489008

/* min(1, p + z sqrt(p (1 - p) / (n - 1))): the bound of 6.3.1 step 2 and 6.3.7 step 7 (n > 1). */
double assess_upper_bound(double p, double n);

/* The bisection's root of a function that falls as p grows: the p in (lo, hi] with f(p) =
 * target, to the last bit a double has (the upper end of the last interval). The caller has
 * checked f(lo) > target; f is never evaluated at hi, which may be outside its domain. */
double assess_bisect(double (*f)(double p, const void *arg), const void *arg, double target,
                     double lo, double hi);

/* ln of the probability that N trials of success probability p have no run of r successes
 * (6.3.7 step 9's equation, the x of its series iterated until it stops growing). */
double assess_run_log_probability(double p, uint64_t r, uint64_t N);

/* 6.3.7 steps 6-10 for any predictor: C correct of N predictions, the longest run of correct
 * ones, k possible values. Returns -log2(max(1/k, P_global', P_local)). */
double assess_predictor_h(uint64_t C, uint64_t N, uint64_t longest, unsigned k);

/* 6.3.4's expected value of Maurer's statistic for a block alphabet of 2^b in which one block
 * has probability p and the others share 1 - p alike; d the dictionary's warm-up blocks, L all
 * the blocks. */
double assess_compression_mean(double p, unsigned b, uint64_t d, uint64_t L);
