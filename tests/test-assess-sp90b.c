/* SPDX-License-Identifier: MIT */
/* Tests for eb-assess's SP 800-90B estimators (tools/assess-*.c) on inputs small enough to work
 * out by hand; each expected figure's derivation is in the comment beside it. The estimators'
 * agreement with NIST's reference tool on 10^6 samples is assess-sp90b-agreement's. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "assess-bound.h"
#include "assess-estimators.h"
#include "assess-iid.h"
#include "assess-noniid.h"
#include "assess-restart.h"

#define Z ASSESS_Z_ALPHA

static void near(double got, double want, double eps)
{
	if (!(fabs(got - want) <= eps))
		fail_msg("got %.12f, expected %.12f (within %g)", got, want, eps);
}

static void test_upper_bound(void **state)
{
	(void)state;
	/* 0.5 + z sqrt(0.25 / 100) = 0.5 + z / 20. */
	near(assess_upper_bound(0.5, 101), 0.5 + Z / 20, 1e-15);
	/* Capped at 1. */
	near(assess_upper_bound(0.99, 10), 1.0, 0);
}

static void test_mcv(void **state)
{
	static const uint8_t s[] = {0, 1, 2, 3, 4};

	(void)state;
	/* p = 1/5, p_u = 0.2 + z sqrt(0.16 / 4) = 0.2 + 0.2 z; H = -log2(p_u) = 0.48365. */
	near(assess_mcv(s, sizeof(s)), -log2(0.2 + 0.2 * Z), 1e-12);
	near(assess_mcv(s, sizeof(s)), 0.48365022548057, 1e-12);
}

static void test_collision(void **state)
{
	static const uint8_t b[] = {0, 0, 1, 0, 1, 1, 0, 1};
	uint8_t alt[300];

	(void)state;
	/* Collisions after 2 (00), 3 (101), 3 (101): mean 8/3, s = sqrt((22 - 8 x 8/3) / 2) =
	 * 1/sqrt(3); the bound 8/3 - z (1/sqrt(3)) / sqrt(3) = 1.808 is raised to 2, where p = 1:
	 * 0 bits. */
	near(assess_collision(b, sizeof(b)), 0.0, 0);
	/* 0101...: every collision takes 3, s = 0, the bound 3 is past 2.5: uniform, 1 bit. */
	for (unsigned i = 0; i < sizeof(alt); i++)
		alt[i] = i & 1;
	near(assess_collision(alt, sizeof(alt)), 1.0, 0);
}

static void test_markov(void **state)
{
	uint8_t b[128];

	(void)state;
	/* 0101...01: P0 = 1/2, P01 = P10 = 1, P00 = P11 = 0. The likeliest 128 bits are 0101...
	 * with probability 1/2, so H = 1/128 bit per bit. */
	for (unsigned i = 0; i < sizeof(b); i++)
		b[i] = i & 1;
	near(assess_markov(b, sizeof(b)), 1.0 / 128, 1e-15);
}

static void test_tuple_lrs(void **state)
{
	uint8_t s[70];
	double t, lrs;

	(void)state;
	/* (01) x 35: Q[1] = 35 (0 and 1), Q[2] = 35 (01; 10 is 34), Q[3] = 34 (010, 101): t = 2,
	 * P = max(35/70, (35/69)^(1/2)) = 0.71221, p_u = P + z sqrt(P (1 - P) / 69):
	 * -log2(p_u) = 0.2300567. LRS from W = 3 to v = 68 (the string at 0 and at 2): at W = 68
	 * the 3 tuples pair once in C(3, 2) = 3, (1/3)^(1/68) = 0.98397, whose bound passes 1: 0.
	 */
	for (unsigned i = 0; i < sizeof(s); i++)
		s[i] = i & 1;
	assert_int_equal(assess_tuple_lrs(s, sizeof(s), &t, &lrs), 0);
	near(t, 0.23005665747836, 1e-9);
	near(lrs, 0.0, 0);
	/* No tuple occurs 35 times: the t-tuple estimate has nothing to say. */
	assert_int_equal(assess_tuple_lrs(s, 20, &t, &lrs), 0);
	assert_true(isnan(t));
}

static void test_predictor_bounds(void **state)
{
	(void)state;
	/* No correct guess in 100: P_global' = 1 - 0.01^(1/100) = 0.045, below 1/k = 1/2, and a
	 * run of 1 is likely anywhere: 1 bit. */
	near(assess_predictor_h(0, 100, 0, 2), 1.0, 0);
	/* 50 of 100, longest run 20: P_global' = 0.5 + z sqrt(0.25 / 99) = 0.629440; a run of 20
	 * is unlikely at that p (ln P(no run of 21) = -0.0018 > ln 0.99), so P_local solves
	 * ln P = ln 0.99: 0.688233 by the series x = 1 + q p^21 x^22 and bisection worked
	 * separately; H = -log2(0.688233) = 0.539031. */
	near(assess_run_log_probability(0.5 + Z * sqrt(0.25 / 99), 21, 100), -0.001816765, 1e-8);
	near(assess_predictor_h(50, 100, 20, 2), 0.5390312306632, 1e-9);
	/* Every guess right: p = 1, 0 bits. */
	near(assess_predictor_h(100, 100, 100, 2), 0.0, 0);
}

static void test_compression_mean(void **state)
{
	(void)state;
	/* One warm-up block, two blocks, blocks of 1 bit: only u = 2 counts, G(z) = z log2(2)
	 * (1 - z), and the mean is G(p) + G(1 - p) = 2 p (1 - p): 0.375 at p = 1/4. */
	near(assess_compression_mean(0.25, 1, 1, 2), 0.375, 1e-15);
}

static void test_lag(void **state)
{
	static const uint8_t s[] = {0, 1, 0, 1, 0, 1};

	(void)state;
	/* Lag 1 guesses wrong at i = 1, 2; from i = 2 lag 2 leads and is right at 3, 4, 5: C = 3
	 * of N = 5, longest run 3. */
	near(assess_lag(s, sizeof(s), 2), assess_predictor_h(3, 5, 3, 2), 0);
}

static void test_noniid_constant(void **state)
{
	uint8_t s[2000];
	struct assess_noniid a;

	(void)state;
	memset(s, 7, sizeof(s));
	assert_int_equal(assess_noniid_run(s, sizeof(s), 3, &a), -EDOM);
	assert_int_equal(a.alphabet, 1);
}

static void test_noniid_binary_literal(void **state)
{
	uint8_t s[5000];
	struct assess_noniid a;

	(void)state;
	/* Two values only (0 and 255): assessed as bits, with no bit string of their own. */
	for (unsigned i = 0; i < sizeof(s); i++)
		s[i] = (i * 2654435761u >> 13) & 1 ? 255 : 0;
	assert_int_equal(assess_noniid_run(s, sizeof(s), 8, &a), 0);
	assert_int_equal(a.alphabet, 2);
	assert_int_equal(a.bitstring, 0);
	assert_false(isnan(a.literal[ASSESS_COLLISION]));
	near(a.min_entropy, a.h_original, 0);
}

static void test_iid_statistics(void **state)
{
	static const uint8_t d[] = {0, 1, 2, 3, 2, 1, 0};
	long double t[ASSESS_IID_TESTS];
	bool want[ASSESS_IID_TESTS];

	(void)state;
	for (unsigned i = 0; i < ASSESS_IID_TESTS; i++)
		want[i] = i != ASSESS_IID_TESTS - 1;
	assert_int_equal(assess_iid_statistics(d, d, sizeof(d), 4, 3, 9.0 / 7, 1.0, want, t), 0);
	/* Running sums 0 1 3 6 8 9 9 against 9/7 per sample: the widest gap is at the second,
	 * |1 - 18/7| = 11/7. */
	near((double)t[0], 11.0 / 7, 1e-12);
	/* Up, up, up, down, down, down: 2 runs, the longest 3, 3 ups and 3 downs. */
	near((double)t[1], 2, 0);
	near((double)t[2], 3, 0);
	near((double)t[3], 3, 0);
	/* Against the median 1: - + + + + + -: 3 runs, the longest 5. */
	near((double)t[4], 3, 0);
	near((double)t[5], 5, 0);
	/* 0 1 2 3 2: the first repeat is the fifth sample; 1 0 after it hold none. */
	near((double)t[6], 5, 0);
	near((double)t[7], 5, 0);
	/* Equal at lag 1: none; at lag 2: (2, 2) once; lags 8 and more reach past the end. */
	near((double)t[8], 0, 0);
	near((double)t[9], 1, 0);
	near((double)t[10], 0, 0);
	/* Lag 1: 0 + 2 + 6 + 6 + 2 + 0 = 16; lag 2: 0 + 3 + 4 + 3 + 0 = 10. */
	near((double)t[13], 16, 0);
	near((double)t[14], 10, 0);
}

static void test_iid_verdicts(void **state)
{
	uint8_t b[20000];
	struct assess_iid a = {};

	(void)state;
	/* Alternating bits: 2-bit blocks are all 01 (or 10), where IID bits of p = 1/2 would give
	 * each of 00 01 10 11 a quarter: the independence test fails; every tenth has half ones,
	 * so goodness of fit passes. The longest repeated substring is the whole less 2. */
	for (unsigned i = 0; i < sizeof(b); i++)
		b[i] = i & 1;
	assert_int_equal(assess_iid_chi_square(b, sizeof(b), 2, &a), 0);
	assert_true(a.chi_independence_p < 0.001);
	assert_true(a.chi_fit_p > 0.5);
	assert_false(a.chi_square);
	assert_int_equal(assess_iid_lrs(b, sizeof(b), 2, &a), 0);
	assert_int_equal(a.lrs_length, sizeof(b) - 2);
	assert_false(a.lrs);
}

static void test_restart_cutoff(void **state)
{
	unsigned u;

	(void)state;
	/* H_I = 1: two values of 1/2. Two draws: the most common count is 2 with probability 1/2,
	 * so at alpha 0.6 the cutoff is 1, at 0.4 it is 2. Three draws: 3 with probability 2/8. */
	assert_int_equal(assess_restart_cutoff(1.0, 2, 0.6, &u), 0);
	assert_int_equal(u, 1);
	assert_int_equal(assess_restart_cutoff(1.0, 2, 0.4, &u), 0);
	assert_int_equal(u, 2);
	assert_int_equal(assess_restart_cutoff(1.0, 3, 0.3, &u), 0);
	assert_int_equal(u, 2);
	assert_int_equal(assess_restart_cutoff(1.0, 3, 0.2, &u), 0);
	assert_int_equal(u, 3);
	/* p = 0.4: two values of 0.4 and one of 0.2; two draws agree with probability 0.16 + 0.16
	 * + 0.04 = 0.36. */
	assert_int_equal(assess_restart_cutoff(-log2(0.4), 2, 0.4, &u), 0);
	assert_int_equal(u, 1);
	assert_int_equal(assess_restart_cutoff(-log2(0.4), 2, 0.3, &u), 0);
	assert_int_equal(u, 2);
}

static void test_restart_counts(void **state)
{
	static uint8_t s[ASSESS_RESTARTS * ASSESS_RESTART_LENGTH];
	struct assess_restart rs;
	unsigned col_max = 0;

	(void)state;
	/* Restart i, sample j: (i + j) mod 250, but restart 0 is stuck at 7: its row counts 1000
	 * sevens, and a column's most common count is worked out here by hand, the slow way. */
	for (unsigned i = 0; i < ASSESS_RESTARTS; i++)
		for (unsigned j = 0; j < ASSESS_RESTART_LENGTH; j++)
			s[i * ASSESS_RESTART_LENGTH + j] = i == 0 ? 7 : (uint8_t)((i + j) % 250);
	for (unsigned j = 0; j < ASSESS_RESTART_LENGTH; j++)
		for (unsigned v = 0; v < 250; v++) {
			unsigned c = 0;

			for (unsigned i = 0; i < ASSESS_RESTARTS; i++)
				c += s[i * ASSESS_RESTART_LENGTH + j] == v;
			col_max = c > col_max ? c : col_max;
		}
	assert_int_equal(assess_restart_run(s, 8, 7.0, &rs), 0);
	assert_int_equal(rs.row_max, 1000);
	assert_int_equal(rs.col_max, col_max);
	assert_false(rs.sanity);
	assert_false(rs.validated);
}

static void test_restart_matrix(void **state)
{
	static uint8_t s[4 * 200];
	struct assess_restart rs;

	(void)state;
	/* 4 restarts of 200 samples (eb-assess esv --restarts 4 --samples-per-restart 200) at H_I =
	 * 8: 256 values of 1/256, alpha = 1 - 0.99^(1/204) = 4.93e-5. A column is 4 draws: some
	 * value comes up 3 times or more with probability 256 (4 x 255 + 1) / 256^4 = 6.09e-5, 4
	 * times with 256 / 256^4 = 6.0e-8, so the column cutoff is 3. A row is 200 draws, whose
	 * cutoff is far above that. Every restart gives 0, 1, ..., 199: each column is one value 4
	 * times, which only the column cutoff catches. */
	for (unsigned i = 0; i < 4; i++)
		for (unsigned j = 0; j < 200; j++)
			s[i * 200 + j] = (uint8_t)j;
	assert_int_equal(assess_restart_run_matrix(s, 4, 200, 8, 8.0, &rs), 0);
	assert_int_equal(rs.restarts, 4);
	assert_int_equal(rs.length, 200);
	assert_int_equal(rs.col_cutoff, 3);
	assert_true(rs.cutoff > 4);
	assert_int_equal(rs.row_max, 1);
	assert_int_equal(rs.col_max, 4);
	assert_false(rs.sanity);
	/* One restart shifted by one: each column holds its value 3 times, within the cutoff. */
	for (unsigned j = 0; j < 200; j++)
		s[3 * 200 + j] = (uint8_t)(j + 1);
	assert_int_equal(assess_restart_run_matrix(s, 4, 200, 8, 8.0, &rs), 0);
	assert_int_equal(rs.col_max, 3);
	assert_true(rs.sanity);
	assert_int_equal(assess_restart_run_matrix(s, 1, 800, 8, 8.0, &rs), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_upper_bound),      cmocka_unit_test(test_mcv),
	    cmocka_unit_test(test_collision),        cmocka_unit_test(test_markov),
	    cmocka_unit_test(test_tuple_lrs),        cmocka_unit_test(test_predictor_bounds),
	    cmocka_unit_test(test_compression_mean), cmocka_unit_test(test_lag),
	    cmocka_unit_test(test_noniid_constant),  cmocka_unit_test(test_noniid_binary_literal),
	    cmocka_unit_test(test_iid_statistics),   cmocka_unit_test(test_iid_verdicts),
	    cmocka_unit_test(test_restart_cutoff),   cmocka_unit_test(test_restart_counts),
	    cmocka_unit_test(test_restart_matrix),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
