/* SPDX-License-Identifier: MIT */
/* SP 800-90B sections 6.3.5 (t-tuple) and 6.3.6 (longest repeated substring), from one suffix
 * array. Every tuple of length W that occurs c times is a run of c suffixes, side by side in
 * the suffix array, that share a prefix of at least W: the runs are the LCP intervals, which one
 * pass over the LCP array with a stack visits. An interval of lcp l under a parent of lcp l'
 * stands for one tuple of each length in (l', l], so what both estimators need of each length W
 * (the count of its most common tuple, the sum over its tuples of C(c, 2)) comes from the
 * intervals in O(n). */
#include <divsufsort.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "assess-bound.h"
#include "assess-estimators.h"
#include "macro.h"

struct tuples {
	size_t v;        /* the longest repeated substring's length */
	uint64_t *best;  /* [l]: the most suffixes an interval of lcp exactly l holds */
	uint64_t *pairs; /* [W]: differences, then sums, of C(c, 2) over the tuples of length W */
};

/* The permuted LCP array in place of phi (Kärkkäinen, Manzini and Puglisi's Phi algorithm):
 * phi[i] is the suffix before suffix i in the suffix array (-1 for the first), and becomes
 * PLCP[i], the length of the prefix the two share; LCP[r] is then PLCP[sa[r]]. Text order lets
 * each length start from the one before less one, so the pass is O(n). */
static void plcp_array(const uint8_t *s, size_t n, const saidx_t *sa, saidx_t *phi)
{
	size_t h = 0;

	phi[sa[0]] = -1;
	for (size_t r = 1; r < n; r++)
		phi[sa[r]] = sa[r - 1];
	for (size_t i = 0; i < n; i++) {
		if (phi[i] < 0) {
			phi[i] = 0;
			h = 0;
			continue;
		}
		while (i + h < n && (size_t)phi[i] + h < n && s[i + h] == s[(size_t)phi[i] + h])
			h++;
		phi[i] = (saidx_t)h;
		if (h > 0)
			h--;
	}
}

static void interval(struct tuples *t, size_t l, size_t parent, uint64_t size)
{
	uint64_t pairs = size * (size - 1) / 2;

	t->best[l] = MAX(t->best[l], size);
	/* Unsigned differences wrap, and their running sums come back in range. */
	t->pairs[parent + 1] += pairs;
	t->pairs[l + 1] -= pairs;
}

/* The bottom-up walk over the LCP intervals (Abouelhoda, Kurtz and Ohlebusch). The stack's lcps
 * rise strictly, so it holds at most v + 1 intervals. */
static int walk(const saidx_t *sa, const saidx_t *plcp, size_t n, struct tuples *t)
{
	_cleanup_free_ size_t *stack_l = NULL, *stack_lb = NULL;
	size_t top = 0;

	stack_l = malloc((t->v + 2) * sizeof(*stack_l));
	stack_lb = malloc((t->v + 2) * sizeof(*stack_lb));
	if (!stack_l || !stack_lb)
		return -ENOMEM;
	stack_l[0] = 0;
	stack_lb[0] = 0;
	for (size_t i = 1; i <= n; i++) {
		size_t li = i < n ? (size_t)plcp[sa[i]] : 0, lb = i - 1;

		while (stack_l[top] > li) {
			size_t l = stack_l[top], parent;

			lb = stack_lb[top--];
			parent = MAX(li, stack_l[top]);
			interval(t, l, parent, i - lb);
		}
		if (stack_l[top] < li) {
			stack_l[++top] = li;
			stack_lb[top] = lb;
		}
	}
	return 0;
}

/* p plus its 99 % bound, as bits; long double as the powers near 1 need it. */
static double tuple_h(long double p, size_t n)
{
	return 0.0 - log2(assess_upper_bound((double)p, (double)n));
}

static void estimates(const struct tuples *t, size_t n, double *ret_tuple, double *ret_lrs)
{
	long double p = -1;
	uint64_t q = 1, pairs = 0;
	size_t u;

	/* Q[W], the most common W-tuple's count, is the largest interval of lcp >= W: a running
	 * maximum from the longest down. t-tuple takes the W up to the last with Q[W] >= 35;
	 * they are a prefix, since Q falls as W grows. */
	for (u = t->v; u >= 1; u--) {
		q = MAX(q, t->best[u]);
		if (q >= ASSESS_TUPLE_MIN_COUNT)
			break;
	}
	/* u is now the longest length with Q >= 35 (0: none), so LRS starts at u + 1. */
	q = 1;
	for (size_t w = t->v; w >= 1; w--) {
		q = MAX(q, t->best[w]);
		if (w <= u)
			p = MAX(p, powl((long double)q / (long double)(n - w + 1), 1.0L / w));
	}
	*ret_tuple = u >= 1 ? tuple_h(p, n) : NAN;

	p = -1;
	for (size_t w = 1; w <= t->v; w++) {
		pairs += t->pairs[w];
		if (w > u) {
			long double all = (long double)(n - w + 1) * (long double)(n - w) / 2;

			p = MAX(p, powl((long double)pairs / all, 1.0L / w));
		}
	}
	*ret_lrs = u < t->v ? tuple_h(p, n) : NAN;
}

int assess_tuple_lrs(const uint8_t *s, size_t n, double *ret_tuple, double *ret_lrs)
{
	_cleanup_free_ saidx_t *sa = NULL, *plcp = NULL;
	_cleanup_free_ uint64_t *best = NULL, *pairs = NULL;
	struct tuples t = {};
	int r;

	if (n < 2 || n > INT32_MAX)
		return -ERANGE;
	sa = malloc(n * sizeof(*sa));
	plcp = malloc(n * sizeof(*plcp));
	if (!sa || !plcp)
		return -ENOMEM;
	if (divsufsort(s, sa, (saidx_t)n) != 0)
		return -ENOMEM;
	plcp_array(s, n, sa, plcp);
	for (size_t i = 0; i < n; i++)
		t.v = MAX(t.v, (size_t)plcp[i]);
	best = calloc(t.v + 2, sizeof(*best));
	pairs = calloc(t.v + 2, sizeof(*pairs));
	if (!best || !pairs)
		return -ENOMEM;
	t.best = best;
	t.pairs = pairs;
	r = walk(sa, plcp, n, &t);
	if (r < 0)
		return r;
	estimates(&t, n, ret_tuple, ret_lrs);
	return 0;
}

int assess_lrs_length(const uint8_t *s, size_t n, size_t *ret)
{
	_cleanup_free_ saidx_t *sa = NULL, *plcp = NULL;
	size_t v = 0;

	if (n < 2 || n > INT32_MAX)
		return -ERANGE;
	sa = malloc(n * sizeof(*sa));
	plcp = malloc(n * sizeof(*plcp));
	if (!sa || !plcp)
		return -ENOMEM;
	if (divsufsort(s, sa, (saidx_t)n) != 0)
		return -ENOMEM;
	plcp_array(s, n, sa, plcp);
	for (size_t i = 0; i < n; i++)
		v = MAX(v, (size_t)plcp[i]);
	*ret = v;
	return 0;
}
