/* SPDX-License-Identifier: MIT */
/* SP 800-90B section 5.2 (the chi-square tests and the LRS test) and the IID track as a whole. */
#include "assess-iid.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "assess-estimators.h"
#include "macro.h"

/* Q(a, x), the regularised upper incomplete gamma function: P(chi-square with 2a degrees of
 * freedom > 2x). The series for P below a + 1, the continued fraction for Q above (Lentz's
 * method), each to double precision. */
static double gamma_q(double a, double x)
{
	double lg, sum, term, b, c, d, h;

	if (a <= 0 || x <= 0)
		return 1.0;
	lg = lgamma(a);
	if (x < a + 1) {
		sum = term = 1.0 / a;
		for (unsigned n = 1; n < 10000 && fabs(term) > fabs(sum) * DBL_EPSILON; n++) {
			term *= x / (a + n);
			sum += term;
		}
		return 1.0 - sum * exp(-x + a * log(x) - lg);
	}
	b = x + 1 - a;
	c = 1 / DBL_MIN;
	d = 1 / b;
	h = d;
	for (unsigned i = 1; i < 10000; i++) {
		double an = -(double)i * (i - a), del;

		b += 2;
		d = an * d + b;
		d = fabs(d) < DBL_MIN ? DBL_MIN : d;
		c = b + an / c;
		c = fabs(c) < DBL_MIN ? DBL_MIN : c;
		d = 1 / d;
		del = d * c;
		h *= del;
		if (fabs(del - 1) < DBL_EPSILON)
			break;
	}
	return exp(-x + a * log(x) - lg) * h;
}

/* The proportion of each value, as a sum of 1/n per sample: the reference sums it so, and the
 * binning below sorts by products of these, whose last bits then decide ties and the bins. */
static void proportions(const uint8_t *s, size_t n, double *ret)
{
	for (unsigned v = 0; v < 256; v++)
		ret[v] = 0;
	for (size_t i = 0; i < n; i++)
		ret[s[i]] += 1.0 / (double)n;
}

static double chi_p(double t, double df)
{
	return gamma_q(df / 2, t / 2);
}

struct bin_entry {
	uint32_t tuple;
	double e;
	int bin;
};

static int by_expectation(const void *pa, const void *pb)
{
	const struct bin_entry *a = pa, *b = pb;

	if (a->e != b->e)
		return a->e < b->e ? -1 : 1;
	return a->tuple < b->tuple ? -1 : a->tuple > b->tuple;
}

static int by_tuple(const void *pa, const void *pb)
{
	const struct bin_entry *a = pa, *b = pb;

	return a->tuple < b->tuple ? -1 : a->tuple > b->tuple;
}

/* 5.2.1 step 3 and 5.2.2's binning: the entries, least expected first, fill bins of at least 5
 * expected each; a last bin short of 5 joins the one before. Returns the bins' expectations (at
 * most m of them) and leaves e[] in tuple order, each with its bin. */
static size_t allocate_bins(struct bin_entry *e, size_t m, double *bins)
{
	size_t nb = 0;
	double cur = 0;

	qsort(e, m, sizeof(*e), by_expectation);
	for (size_t i = 0; i < m; i++) {
		if (cur >= 5.0) {
			bins[nb++] = cur;
			cur = 0;
		}
		e[i].bin = (int)nb;
		cur += e[i].e;
	}
	if (nb != 0 && cur < 5.0) {
		for (size_t i = m; i-- > 0 && e[i].bin == (int)nb;)
			e[i].bin = (int)nb - 1;
		bins[nb - 1] += cur;
	} else
		bins[nb++] = cur;
	qsort(e, m, sizeof(*e), by_tuple);
	return nb;
}

static double chi_t(const double *bins, const uint64_t *o, size_t nb)
{
	double t = 0;

	for (size_t i = 0; i < nb; i++)
		t += ((double)o[i] - bins[i]) * ((double)o[i] - bins[i]) / bins[i];
	return t;
}

/* 5.2.1 for bits: m-bit blocks, m the largest (up to 11) at which the least likely block is
 * expected at least 5 times; their counts against the IID expectation, 2^m - 2 degrees. */
static double independence_bits(const uint8_t *b, size_t n)
{
	uint64_t occ[1u << 11] = {0}, ones = 0;
	double p1, p0, t = 0;
	size_t blocks;
	unsigned m = 11;

	for (size_t i = 0; i < n; i++)
		ones += b[i];
	p1 = (double)ones / (double)n;
	p0 = 1.0 - p1;
	while (m > 1 && pow(MIN(p0, p1), m) * (double)(n / m) < 5)
		m--;
	if (m < 2)
		return 1.0;
	blocks = n / m;
	for (size_t i = 0; i < blocks; i++) {
		unsigned v = 0;

		for (unsigned j = 0; j < m; j++)
			v = v << 1 | b[i * m + j];
		occ[v]++;
	}
	for (unsigned v = 0; v < 1u << m; v++) {
		unsigned w = (unsigned)__builtin_popcount(v);
		double e = pow(p1, w) * pow(p0, m - w) * (double)blocks;

		t += ((double)occ[v] - e) * ((double)occ[v] - e) / e;
	}
	return chi_p(t, (double)((1u << m) - 2));
}

/* 5.2.2 for bits: the ones in each tenth against the whole's proportion, 9 degrees. */
static double fit_bits(const uint8_t *b, size_t n)
{
	size_t sub = n / 10;
	uint64_t ones = 0;
	double p, e0, e1, t = 0;

	for (size_t i = 0; i < n; i++)
		ones += b[i];
	p = (double)ones / (double)n;
	e0 = (1.0 - p) * (double)sub;
	e1 = p * (double)sub;
	for (unsigned i = 0; i < 10; i++) {
		uint64_t o1 = 0;
		double o0;

		for (size_t j = 0; j < sub; j++)
			o1 += b[i * sub + j];
		o0 = (double)(sub - o1);
		t += (o0 - e0) * (o0 - e0) / e0 + ((double)o1 - e1) * ((double)o1 - e1) / e1;
	}
	return chi_p(t, 9);
}

/* 5.2.1: the pairs (s[2i], s[2i + 1]) against p_a p_b floor(n / 2) each, binned. */
static int independence(const uint8_t *s, size_t n, unsigned k, double *ret)
{
	_cleanup_free_ struct bin_entry *e = NULL;
	_cleanup_free_ double *bins = NULL;
	_cleanup_free_ uint64_t *o = NULL;
	double p[256];
	size_t m = (size_t)k * k, nb;

	e = calloc(m, sizeof(*e));
	bins = calloc(m, sizeof(*bins));
	o = calloc(m, sizeof(*o));
	if (!e || !bins || !o)
		return -ENOMEM;
	proportions(s, n, p);
	for (unsigned a = 0; a < k; a++)
		for (unsigned b = 0; b < k; b++)
			e[a * k + b] = (struct bin_entry){
			    .tuple = a * k + b,
			    .e = p[a] * p[b] * floor((double)n * 0.5),
			};
	nb = allocate_bins(e, m, bins);
	for (size_t j = 0; j + 1 < n; j += 2)
		o[e[s[j] * k + s[j + 1]].bin]++;
	*ret = chi_p(chi_t(bins, o, nb), (double)nb - k);
	return 0;
}

/* 5.2.2: the counts of each value in each tenth against p_v floor(n / 10), binned. */
static double fit(const uint8_t *s, size_t n, unsigned k)
{
	struct bin_entry e[256];
	uint64_t o[256];
	double bins[256], p[256], t = 0;
	size_t nb, block = n / 10;

	proportions(s, n, p);
	for (unsigned v = 0; v < k; v++)
		e[v] = (struct bin_entry){.tuple = v, .e = p[v] * floor((double)n / 10.0)};
	nb = allocate_bins(e, k, bins);
	for (unsigned j = 0; j < 10; j++) {
		memset(o, 0, sizeof(o));
		for (size_t i = 0; i < block; i++)
			o[e[s[j * block + i]].bin]++;
		t += chi_t(bins, o, nb);
	}
	return chi_p(t, 9.0 * (double)(nb - 1));
}

int assess_iid_chi_square(const uint8_t *data, size_t n, unsigned k, struct assess_iid *a)
{
	int r = 0;

	if (k == 2) {
		a->chi_independence_p = independence_bits(data, n);
		a->chi_fit_p = fit_bits(data, n);
	} else {
		r = independence(data, n, k, &a->chi_independence_p);
		a->chi_fit_p = fit(data, n, k);
	}
	a->chi_square = a->chi_independence_p >= 0.001 && a->chi_fit_p >= 0.001;
	return r;
}

/* 5.2.3: with p_col the chance that two samples are equal, the longest repeated substring W is
 * too long when P(no two of the C(n - W + 1, 2) W-substrings are equal) < 0.001. */
int assess_iid_lrs(const uint8_t *data, size_t n, unsigned k, struct assess_iid *a)
{
	long double p_col = 0, log_none;
	double p[256];
	size_t w;
	int r;

	proportions(data, n, p);
	for (unsigned v = 0; v < k; v++)
		p_col += (long double)p[v] * (long double)p[v];
	if (p_col > 1.0L - LDBL_EPSILON) {
		a->lrs = true;
		return 0;
	}
	r = assess_lrs_length(data, n, &w);
	if (r < 0)
		return r;
	a->lrs_length = w;
	log_none = log1pl(-powl(p_col, (long double)w));
	a->lrs = logl(0.999L) >= (long double)((n - w + 1) * (n - w) / 2) * log_none;
	return 0;
}

int assess_iid_run(const uint8_t *s, size_t n, uint64_t seed, struct assess_iid *ret)
{
	_cleanup_free_ uint8_t *data = NULL;
	struct assess_iid a = {};
	uint8_t rank[256] = {0};
	bool seen[256] = {false};
	unsigned k = 0;
	int r;

	if (n < 64)
		return -ERANGE;
	data = malloc(n);
	if (!data)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		seen[s[i]] = true;
	for (unsigned v = 0; v < 256; v++)
		if (seen[v])
			rank[v] = (uint8_t)k++;
	if (k < 2)
		return -EDOM;
	for (size_t i = 0; i < n; i++)
		data[i] = rank[s[i]];
	r = assess_iid_chi_square(data, n, k, &a);
	if (r >= 0)
		r = assess_iid_lrs(data, n, k, &a);
	if (r >= 0)
		r = assess_iid_permutation(data, s, n, k, seed, &a);
	if (r < 0)
		return r;
	a.iid = a.permutation && a.chi_square && a.lrs;
	*ret = a;
	return 0;
}
