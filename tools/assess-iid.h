/* SP 800-90B's IID track (NIST SP 800-90B, January 2018, section 5): the permutation tests of
 * 5.1 (19 statistics against 10,000 shuffles of the data), the chi-square tests of 5.2.1-5.2.2
 * (independence and goodness of fit) and the longest repeated substring test of 5.2.3. The data
 * pass as IID only if all three do. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ASSESS_PERMUTATIONS 10000u
#define ASSESS_IID_TESTS    19u

struct assess_iid {
	bool permutation, chi_square, lrs, iid;
	/* Per statistic: shuffles that gave a higher, an equal, a lower value than the data, and
	 * whether the statistic ran at all (the compression statistic does not when another one
	 * already failed: it could not change the verdict). */
	unsigned count[ASSESS_IID_TESTS][3];
	bool ran[ASSESS_IID_TESTS];
	unsigned shuffles; /* the most any statistic needed */
	double chi_independence_p, chi_fit_p;
	size_t lrs_length;
};

const char *assess_iid_test_to_string(unsigned test);

/* The 19 statistics of 5.1 on data (symbols 0..k-1) and raw (the samples themselves, which the
 * excursion, covariance and compression statistics read), computed for the tests with want[t];
 * mean and median as 5.1 defines them. -ENOMEM. */
int assess_iid_statistics(const uint8_t *data, const uint8_t *raw, size_t n, unsigned k,
                          uint8_t max_raw, double mean, double median, const bool *want,
                          long double *ret);

/* 5.1's permutation testing, shuffles drawn from a generator seeded with seed. -ENOMEM. */
int assess_iid_permutation(const uint8_t *data, const uint8_t *raw, size_t n, unsigned k,
                           uint64_t seed, struct assess_iid *a);

/* 5.2's chi-square tests and LRS test. -ENOMEM. */
int assess_iid_chi_square(const uint8_t *data, size_t n, unsigned k, struct assess_iid *a);
int assess_iid_lrs(const uint8_t *data, size_t n, unsigned k, struct assess_iid *a);

/* The whole IID track on n samples: mapped onto their own alphabet as the non-IID track does.
 * -EDOM for data of one value, -ERANGE for n < 64, -ENOMEM. */
int assess_iid_run(const uint8_t *s, size_t n, uint64_t seed, struct assess_iid *ret);
