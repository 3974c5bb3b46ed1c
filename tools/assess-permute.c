/* SPDX-License-Identifier: MIT */
/* SP 800-90B section 5.1: the permutation tests' 19 statistics and the shuffles they are ranked
 * against. For binary data 5.1 asks for the statistics on bytes of 8 bits: summed (5.1.1's
 * conversion I) for the directional, periodicity and covariance statistics, packed (conversion
 * II) for the collision ones. */
#include <bzlib.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "assess-iid.h"
#include "macro.h"

enum {
	T_EXCURSION,
	T_DIR_RUNS,
	T_DIR_LONGEST,
	T_INC_DEC,
	T_MEDIAN_RUNS,
	T_MEDIAN_LONGEST,
	T_COLLISION_AVG,
	T_COLLISION_MAX,
	T_PERIOD,               /* 5 lags */
	T_COVAR = T_PERIOD + 5, /* 5 lags */
	T_COMPRESSION = T_COVAR + 5,
};

static const unsigned lags[5] = {1, 2, 8, 16, 32};

const char *assess_iid_test_to_string(unsigned test)
{
	static const char *const names[ASSESS_IID_TESTS] = {
	    "excursion",       "numDirectionalRuns", "lenDirectionalRuns", "numIncreasesDecreases",
	    "numRunsMedian",   "lenRunsMedian",      "avgCollision",       "maxCollision",
	    "periodicity(1)",  "periodicity(2)",     "periodicity(8)",     "periodicity(16)",
	    "periodicity(32)", "covariance(1)",      "covariance(2)",      "covariance(8)",
	    "covariance(16)",  "covariance(32)",     "compression",
	};

	return test < ASSESS_IID_TESTS ? names[test] : NULL;
}

/* Runs of equal signs in a sequence of +1/-1 (given as sign(i) by the caller's loop): how many
 * and the longest. */
struct runs {
	uint64_t n, longest, cur;
	int last;
};

static void runs_add(struct runs *r, int sign)
{
	if (r->n > 0 && sign == r->last)
		r->cur++;
	else {
		r->n++;
		r->cur = 1;
	}
	r->last = sign;
	r->longest = MAX(r->longest, r->cur);
}

static void directional(const uint8_t *d, size_t n, long double *ret)
{
	struct runs r = {};
	uint64_t up = 0;

	/* +1 where the sequence does not fall, -1 where it does. */
	for (size_t i = 0; i + 1 < n; i++) {
		int sign = d[i] > d[i + 1] ? -1 : 1;

		runs_add(&r, sign);
		up += sign > 0;
	}
	ret[T_DIR_RUNS] = r.n;
	ret[T_DIR_LONGEST] = r.longest;
	ret[T_INC_DEC] = MAX(up, (n - 1) - up);
}

static void median_runs(const uint8_t *d, size_t n, double median, long double *ret)
{
	struct runs r = {};

	for (size_t i = 0; i < n; i++)
		runs_add(&r, d[i] < median ? -1 : 1);
	ret[T_MEDIAN_RUNS] = r.n;
	ret[T_MEDIAN_LONGEST] = r.longest;
}

/* 5.1.7-5.1.8: walk the data, each time to the first value seen twice since the last stop;
 * the distances are the collision times. */
static void collisions(const uint8_t *d, size_t n, long double *ret)
{
	uint64_t sum = 0, count = 0, max = 0;
	size_t i = 0;

	while (i < n) {
		uint8_t seen[256] = {0};
		size_t j = 0;

		while (i + j < n && !seen[d[i + j]]) {
			seen[d[i + j]] = 1;
			j++;
		}
		if (i + j >= n)
			break;
		sum += j + 1;
		count++;
		max = MAX(max, (uint64_t)(j + 1));
		i += j + 1;
	}
	ret[T_COLLISION_AVG] = (double)sum / (double)count;
	ret[T_COLLISION_MAX] = max;
}

/* 5.1.12: the length of the data written as decimal numbers with spaces, compressed by bzip2
 * at block size 5 (the reference's setting; the spec names bzip2 without one). */
static int compressed_length(const uint8_t *raw, size_t n, long double *ret)
{
	_cleanup_free_ char *text = NULL, *out = NULL;
	unsigned text_len = 0, out_len;

	text = malloc(4 * n + 1);
	if (!text)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		unsigned v = raw[i];

		/* "%u " by hand: this runs once per shuffle, on every sample. */
		if (v >= 100)
			text[text_len++] = (char)('0' + v / 100);
		if (v >= 10)
			text[text_len++] = (char)('0' + v / 10 % 10);
		text[text_len++] = (char)('0' + v % 10);
		text[text_len++] = ' ';
	}
	/* No space after the last. */
	text_len -= n > 0;
	out_len = text_len + text_len / 100 + 601;
	out = malloc(out_len);
	if (!out)
		return -ENOMEM;
	if (BZ2_bzBuffToBuffCompress(out, &out_len, text, text_len, 5, 0, 0) != BZ_OK)
		return -ENOMEM;
	*ret = out_len;
	return 0;
}

/* 5.1.1's conversions of binary data: I sums each 8 bits, II packs them (first bit highest); a
 * last group of fewer counts as it is. */
static size_t convert(const uint8_t *b, size_t n, bool pack, uint8_t *ret)
{
	size_t m = (n + 7) / 8;

	memset(ret, 0, m);
	for (size_t i = 0; i < n; i++)
		ret[i / 8] += pack ? (uint8_t)(b[i] << (7 - i % 8)) : b[i];
	return m;
}

static void periodicity(const uint8_t *d, size_t n, long double *ret)
{
	for (unsigned l = 0; l < 5; l++) {
		uint64_t t = 0;

		for (size_t i = 0; i + lags[l] < n; i++)
			t += d[i] == d[i + lags[l]];
		ret[T_PERIOD + l] = t;
	}
}

static void covariance(const uint8_t *d, size_t n, long double *ret)
{
	for (unsigned l = 0; l < 5; l++) {
		uint64_t t = 0;

		for (size_t i = 0; i + lags[l] < n; i++)
			t += (uint64_t)d[i] * d[i + lags[l]];
		ret[T_COVAR + l] = t;
	}
}

static bool any(const bool *want, unsigned from, unsigned to)
{
	for (unsigned t = from; t <= to; t++)
		if (want[t])
			return true;
	return false;
}

int assess_iid_statistics(const uint8_t *data, const uint8_t *raw, size_t n, unsigned k,
                          uint8_t max_raw, double mean, double median, const bool *want,
                          long double *ret)
{
	_cleanup_free_ uint8_t *conv = NULL;
	const uint8_t *d = data;
	size_t m = n;

	(void)max_raw;
	if (k == 2) {
		conv = malloc((n + 7) / 8);
		if (!conv)
			return -ENOMEM;
	}
	if (want[T_EXCURSION]) {
		double sum = 0, max = 0;

		for (size_t i = 0; i < n; i++) {
			sum += raw[i];
			max = MAX(max, fabs(sum - (double)(i + 1) * mean));
		}
		ret[T_EXCURSION] = max;
	}
	if (k == 2 && (any(want, T_DIR_RUNS, T_INC_DEC) || any(want, T_PERIOD, T_COVAR + 4)))
		m = convert(data, n, false, conv), d = conv;
	if (any(want, T_DIR_RUNS, T_INC_DEC))
		directional(d, m, ret);
	if (any(want, T_PERIOD, T_PERIOD + 4))
		periodicity(d, m, ret);
	/* Covariance reads the samples themselves, or for bits the sums of 8. */
	if (any(want, T_COVAR, T_COVAR + 4))
		covariance(k == 2 ? d : raw, k == 2 ? m : n, ret);
	if (any(want, T_MEDIAN_RUNS, T_MEDIAN_LONGEST))
		median_runs(data, n, k == 2 ? 0.5 : median, ret);
	if (any(want, T_COLLISION_AVG, T_COLLISION_MAX)) {
		if (k == 2) {
			m = convert(data, n, true, conv);
			collisions(conv, m, ret);
		} else
			collisions(data, n, ret);
	}
	if (want[T_COMPRESSION])
		return compressed_length(raw, n, &ret[T_COMPRESSION]);
	return 0;
}

/* xoshiro256** (Blackman and Vigna), seeded through splitmix64: the shuffles' generator. */
struct rng {
	uint64_t s[4];
};

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(struct rng *r)
{
	uint64_t out = rotl(r->s[1] * 5, 7) * 9, t = r->s[1] << 17;

	r->s[2] ^= r->s[0];
	r->s[3] ^= r->s[1];
	r->s[1] ^= r->s[2];
	r->s[0] ^= r->s[3];
	r->s[2] ^= t;
	r->s[3] = rotl(r->s[3], 45);
	return out;
}

static void rng_seed(struct rng *r, uint64_t seed)
{
	for (unsigned i = 0; i < 4; i++) {
		uint64_t z = (seed += 0x9E3779B97F4A7C15ull);

		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
		z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
		r->s[i] = z ^ (z >> 31);
	}
}

/* Uniform in [0, bound), by rejection (Lemire's multiply-shift). */
static uint64_t rng_below(struct rng *r, uint64_t bound)
{
	unsigned __int128 m = (unsigned __int128)rng_next(r) * bound;
	uint64_t low = (uint64_t)m;

	if (low < bound) {
		uint64_t floor = -bound % bound;

		while (low < floor) {
			m = (unsigned __int128)rng_next(r) * bound;
			low = (uint64_t)m;
		}
	}
	return (uint64_t)(m >> 64);
}

/* Fisher-Yates over both arrays at once. */
static void shuffle(struct rng *r, uint8_t *d, uint8_t *raw, size_t n)
{
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = (size_t)rng_below(r, i + 1);
		uint8_t t = d[i];

		d[i] = d[j];
		d[j] = t;
		t = raw[i];
		raw[i] = raw[j];
		raw[j] = t;
	}
}

/* 5.1's median: of the symbols, sorted; of bits, 0.5 by definition. */
static double median_of(const uint8_t *d, size_t n)
{
	size_t count[256] = {0}, seen = 0;
	int lo = -1, hi = -1;

	for (size_t i = 0; i < n; i++)
		count[d[i]]++;
	/* The values at sorted positions (n - 1) / 2 and n / 2. */
	for (unsigned v = 0; v < 256 && hi < 0; v++) {
		seen += count[v];
		if (lo < 0 && seen > (n - 1) / 2)
			lo = (int)v;
		if (seen > n / 2)
			hi = (int)v;
	}
	return (lo + hi) / 2.0;
}

struct perm {
	const uint8_t *data, *raw;
	size_t n;
	unsigned k;
	uint8_t max_raw;
	double mean, median;
	long double t[ASSESS_IID_TESTS];
};

/* A statistic is settled once more than 5 shuffles came out at or above it and more than 5 at or
 * below it (5.1 step 4): it cannot be an outlier any more. */
static bool settled(const unsigned c[3])
{
	return c[0] + c[1] > 5 && c[1] + c[2] > 5;
}

/* Shuffles until every statistic in want is settled or ASSESS_PERMUTATIONS have been drawn. The
 * shuffles come from the seed alone, so two calls with the same seed see the same ones. */
static int rank(const struct perm *p, uint64_t seed, bool *want, struct assess_iid *a)
{
	_cleanup_free_ uint8_t *d = NULL, *raw = NULL;
	long double tp[ASSESS_IID_TESTS];
	struct rng r;
	int ret;

	d = malloc(p->n);
	raw = malloc(p->n);
	if (!d || !raw)
		return -ENOMEM;
	memcpy(d, p->data, p->n);
	memcpy(raw, p->raw, p->n);
	rng_seed(&r, seed);
	for (unsigned i = 0; i < ASSESS_PERMUTATIONS && any(want, 0, ASSESS_IID_TESTS - 1); i++) {
		shuffle(&r, d, raw, p->n);
		ret = assess_iid_statistics(d, raw, p->n, p->k, p->max_raw, p->mean, p->median,
		                            want, tp);
		if (ret < 0)
			return ret;
		a->shuffles = MAX(a->shuffles, i + 1);
		for (unsigned t = 0; t < ASSESS_IID_TESTS; t++) {
			if (!want[t])
				continue;
			a->count[t][tp[t] > p->t[t] ? 0 : tp[t] == p->t[t] ? 1 : 2]++;
			if (settled(a->count[t]))
				want[t] = false;
		}
	}
	return 0;
}

int assess_iid_permutation(const uint8_t *data, const uint8_t *raw, size_t n, unsigned k,
                           uint64_t seed, struct assess_iid *a)
{
	struct perm p = {.data = data, .raw = raw, .n = n, .k = k};
	bool want[ASSESS_IID_TESTS];
	uint64_t sum = 0;
	int r;

	for (size_t i = 0; i < n; i++) {
		sum += raw[i];
		p.max_raw = MAX(p.max_raw, raw[i]);
	}
	p.mean = (double)sum / (double)n;
	p.median = median_of(data, n);
	for (unsigned t = 0; t < ASSESS_IID_TESTS; t++)
		want[t] = true;
	r = assess_iid_statistics(data, raw, n, k, p.max_raw, p.mean, p.median, want, p.t);
	if (r < 0)
		return r;
	/* The cheap statistics first, the compression one after them over the same shuffles: when
	 * a cheap one fails, the data fail whatever compression says, and its 10,000 bzip2 runs
	 * are saved. The verdict is the one ranking all 19 together would give. */
	want[T_COMPRESSION] = false;
	r = rank(&p, seed, want, a);
	if (r < 0)
		return r;
	a->permutation = true;
	for (unsigned t = 0; t < T_COMPRESSION; t++) {
		a->ran[t] = true;
		a->permutation = a->permutation && settled(a->count[t]);
	}
	if (a->permutation) {
		for (unsigned t = 0; t < ASSESS_IID_TESTS; t++)
			want[t] = t == T_COMPRESSION;
		r = rank(&p, seed, want, a);
		if (r < 0)
			return r;
		a->ran[T_COMPRESSION] = true;
		a->permutation = settled(a->count[T_COMPRESSION]);
	}
	return 0;
}
