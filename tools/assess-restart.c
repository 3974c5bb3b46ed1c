/* SPDX-License-Identifier: MIT */
/* SP 800-90B section 3.1.4.3: the restart sanity check and the row and column assessments. */
#include "assess-restart.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

/* a = a x b, both of degree n at most, the product cut at degree n. */
static void poly_mul(long double *a, const long double *b, unsigned n, long double *tmp)
{
	for (unsigned i = 0; i <= n; i++) {
		long double sum = 0;

		for (unsigned j = 0; j <= i; j++)
			sum += a[j] * b[i - j];
		tmp[i] = sum;
	}
	memcpy(a, tmp, (n + 1) * sizeof(*a));
}

/* P(no value comes up more than u times in n draws) for m values of probability p and one of
 * probability rest: n! [x^n] e_u(p x)^m e_u(rest x), e_u(y) = sum_{j <= u} y^j / j!, in long
 * double, whose range holds n! for n up to 1754. */
static long double no_count_above(unsigned u, unsigned n, long double p, unsigned m,
                                  long double rest, long double *buf)
{
	long double *acc = buf, *pw = buf + (n + 1), *e = buf + 2 * (n + 1),
		    *tmp = buf + 3 * (n + 1);
	long double fact = 1;

	for (unsigned i = 0; i <= n; i++)
		acc[i] = pw[i] = 0;
	acc[0] = 1;
	/* pw = e_u(p x), raised to the m-th power by squaring into acc. */
	for (unsigned j = 0; j <= MIN(u, n); j++) {
		fact *= j ? j : 1;
		pw[j] = powl(p, j) / fact;
	}
	for (unsigned k = m; k > 0; k >>= 1) {
		if (k & 1)
			poly_mul(acc, pw, n, tmp);
		if (k > 1) {
			memcpy(e, pw, (n + 1) * sizeof(*e));
			poly_mul(pw, e, n, tmp);
		}
	}
	if (rest > 0) {
		fact = 1;
		for (unsigned j = 0; j <= n; j++) {
			fact *= j ? j : 1;
			e[j] = j <= u ? powl(rest, j) / fact : 0;
		}
		poly_mul(acc, e, n, tmp);
	}
	fact = 1;
	for (unsigned i = 2; i <= n; i++)
		fact *= i;
	return fact * acc[n];
}

int assess_restart_cutoff(double h_i, unsigned n, double alpha, unsigned *ret)
{
	long double p = powl(2.0L, -(long double)h_i), rest;
	unsigned m = (unsigned)floorl(1.0L / p), lo, hi;
	long double *buf;

	rest = 1.0L - m * p;
	/* A remainder too small to be a value of its own (1/p a whole number but for rounding). */
	if (rest < 1e-12L)
		rest = 0;
	buf = malloc(4 * (n + 1) * sizeof(*buf));
	if (!buf)
		return -ENOMEM;
	/* The least u with P(more than u) <= alpha: P falls as u grows. */
	lo = 0;
	hi = n;
	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;

		if (1.0L - no_count_above(mid, n, p, m, rest, buf) <= alpha)
			hi = mid;
		else
			lo = mid + 1;
	}
	free(buf);
	*ret = lo;
	return 0;
}

/* The count of the most common value in each of the matrix's rows (by_row) or columns, the
 * highest of them. */
static unsigned most_common(const uint8_t *s, unsigned restarts, unsigned length, bool by_row)
{
	unsigned outer = by_row ? restarts : length, inner = by_row ? length : restarts;
	unsigned best = 0;

	for (unsigned a = 0; a < outer; a++) {
		unsigned count[256] = {0};

		for (unsigned b = 0; b < inner; b++) {
			uint8_t v = by_row ? s[(size_t)a * length + b] : s[(size_t)b * length + a];

			count[v]++;
			best = MAX(best, count[v]);
		}
	}
	return best;
}

/* One sequence's assessment; a sequence of one value has 0 bits. */
static int assess_one(const uint8_t *s, size_t n, unsigned bits, struct assess_noniid *ret)
{
	int r = assess_noniid_literal(s, n, bits, ret);

	if (r == -EDOM) {
		ret->h_original = ret->min_entropy = 0;
		r = 0;
	}
	return r;
}

int assess_restart_run_matrix(const uint8_t *s, unsigned restarts, unsigned length, unsigned bits,
                              double h_i, struct assess_restart *ret)
{
	const size_t n = (size_t)restarts * length;
	_cleanup_free_ uint8_t *cols = NULL;
	struct assess_restart a = {.h_i = h_i, .restarts = restarts, .length = length};
	/* 0.01 over all the rows and columns together. */
	double alpha = 1.0 - exp(log(0.99) / ((double)restarts + length));
	int r;

	if (!(h_i > 0) || h_i > bits || restarts < 2 || length < 2)
		return -EINVAL;
	r = assess_restart_cutoff(h_i, length, alpha, &a.cutoff);
	if (r < 0)
		return r;
	a.col_cutoff = a.cutoff;
	if (restarts != length) {
		r = assess_restart_cutoff(h_i, restarts, alpha, &a.col_cutoff);
		if (r < 0)
			return r;
	}
	a.row_max = most_common(s, restarts, length, true);
	a.col_max = most_common(s, restarts, length, false);
	a.sanity = a.row_max <= a.cutoff && a.col_max <= a.col_cutoff;
	if (a.sanity) {
		cols = malloc(n);
		if (!cols)
			return -ENOMEM;
		for (size_t i = 0; i < restarts; i++)
			for (size_t j = 0; j < length; j++)
				cols[j * restarts + i] = s[i * length + j];
		r = assess_one(s, n, bits, &a.rows);
		if (r >= 0)
			r = assess_one(cols, n, bits, &a.cols);
		if (r < 0)
			return r;
		a.validated = MIN(a.rows.min_entropy, a.cols.min_entropy) >= h_i / 2;
	}
	*ret = a;
	return 0;
}

int assess_restart_run(const uint8_t *s, unsigned bits, double h_i, struct assess_restart *ret)
{
	return assess_restart_run_matrix(s, ASSESS_RESTARTS, ASSESS_RESTART_LENGTH, bits, h_i, ret);
}
