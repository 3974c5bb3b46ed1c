/* SPDX-License-Identifier: MIT */
/* The non-IID track: which estimator runs on which data, and the final figure. */
#include "assess-noniid.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>

#include "assess-estimators.h"
#include "macro.h"

const char *assess_estimator_to_string(enum assess_estimator e)
{
	switch (e) {
	case ASSESS_MCV:
		return "most common value";
	case ASSESS_COLLISION:
		return "collision";
	case ASSESS_MARKOV:
		return "Markov";
	case ASSESS_COMPRESSION:
		return "compression";
	case ASSESS_TUPLE:
		return "t-tuple";
	case ASSESS_LRS:
		return "LRS";
	case ASSESS_MULTI_MCW:
		return "MultiMCW";
	case ASSESS_LAG:
		return "lag";
	case ASSESS_MULTI_MMC:
		return "MultiMMC";
	case ASSESS_LZ78Y:
		return "LZ78Y";
	case _ASSESS_ESTIMATOR_MAX:
	case _ASSESS_ESTIMATOR_INVALID:
		break;
	}
	return NULL;
}

const char *assess_estimator_to_key(enum assess_estimator e)
{
	static const char *const keys[_ASSESS_ESTIMATOR_MAX] = {
	    [ASSESS_MCV] = "mcv",
	    [ASSESS_COLLISION] = "collision",
	    [ASSESS_MARKOV] = "markov",
	    [ASSESS_COMPRESSION] = "compression",
	    [ASSESS_TUPLE] = "t_tuple",
	    [ASSESS_LRS] = "lrs",
	    [ASSESS_MULTI_MCW] = "multi_mcw",
	    [ASSESS_LAG] = "lag",
	    [ASSESS_MULTI_MMC] = "multi_mmc",
	    [ASSESS_LZ78Y] = "lz78y",
	};

	return e >= 0 && e < _ASSESS_ESTIMATOR_MAX ? keys[e] : NULL;
}

/* Every estimator that applies to data of k values (k = 2: bits) into h[]. */
static int run_all(const uint8_t *s, size_t n, unsigned k, double h[_ASSESS_ESTIMATOR_MAX])
{
	int r;

	for (unsigned e = 0; e < _ASSESS_ESTIMATOR_MAX; e++)
		h[e] = NAN;
	h[ASSESS_MCV] = assess_mcv(s, n);
	/* Sections 6.3.2-6.3.4 are for bit strings only. */
	if (k == 2) {
		h[ASSESS_COLLISION] = assess_collision(s, n);
		h[ASSESS_MARKOV] = assess_markov(s, n);
		h[ASSESS_COMPRESSION] = assess_compression(s, n);
	}
	r = assess_tuple_lrs(s, n, &h[ASSESS_TUPLE], &h[ASSESS_LRS]);
	if (r < 0)
		return r;
	h[ASSESS_MULTI_MCW] = assess_multi_mcw(s, n, k);
	h[ASSESS_LAG] = assess_lag(s, n, k);
	r = assess_multi_mmc(s, n, k, &h[ASSESS_MULTI_MMC]);
	if (r < 0)
		return r;
	return assess_lz78y(s, n, k, &h[ASSESS_LZ78Y]);
}

/* The lowest of the estimates that said something, at most cap. */
static double lowest(const double h[_ASSESS_ESTIMATOR_MAX], double cap)
{
	for (unsigned e = 0; e < _ASSESS_ESTIMATOR_MAX; e++)
		if (!isnan(h[e]))
			cap = MIN(cap, h[e]);
	return cap;
}

static int noniid(const uint8_t *s, size_t n, unsigned bits, bool with_bits,
                  struct assess_noniid *ret);

/* The samples' own alphabet: value v becomes its rank among the values that occur. */
static unsigned map_down(const uint8_t *s, size_t n, uint8_t *ret)
{
	uint8_t rank[256] = {0};
	bool seen[256] = {false};
	unsigned k = 0;

	for (size_t i = 0; i < n; i++)
		seen[s[i]] = true;
	for (unsigned v = 0; v < 256; v++)
		if (seen[v])
			rank[v] = (uint8_t)k++;
	for (size_t i = 0; i < n; i++)
		ret[i] = rank[s[i]];
	return k;
}

unsigned assess_sample_bits(const uint8_t *s, size_t n)
{
	uint8_t all = 0;
	unsigned bits = 1;

	for (size_t i = 0; i < n; i++)
		all |= s[i];
	while (bits < 8 && (all >> bits) != 0)
		bits++;
	return bits;
}

int assess_noniid_run(const uint8_t *s, size_t n, unsigned bits, struct assess_noniid *ret)
{
	return noniid(s, n, bits, true, ret);
}

int assess_noniid_literal(const uint8_t *s, size_t n, unsigned bits, struct assess_noniid *ret)
{
	return noniid(s, n, bits, false, ret);
}

static int noniid(const uint8_t *s, size_t n, unsigned bits, bool with_bits,
                  struct assess_noniid *ret)
{
	_cleanup_free_ uint8_t *lit = NULL, *b = NULL;
	struct assess_noniid a = {.samples = n, .bits = bits};
	int r;

	assert(bits >= 1 && bits <= 8);
	if (n < 2)
		return -ERANGE;
	lit = malloc(n);
	if (!lit)
		return -ENOMEM;
	a.alphabet = map_down(s, n, lit);
	for (unsigned e = 0; e < _ASSESS_ESTIMATOR_MAX; e++)
		a.literal[e] = a.bitstring_h[e] = NAN;
	if (a.alphabet < 2) {
		*ret = a;
		return -EDOM;
	}
	r = run_all(lit, n, a.alphabet, a.literal);
	if (r < 0)
		return r;
	a.h_original = lowest(a.literal, bits);
	a.h_bitstring = 1.0;
	a.min_entropy = a.h_original;
	if (a.alphabet > 2 && with_bits) {
		/* n <= SIZE_MAX / 8 holds for anything that fit in memory. */
		a.bitstring = n * bits;
		b = malloc(a.bitstring);
		if (!b)
			return -ENOMEM;
		for (size_t i = 0; i < a.bitstring; i++)
			b[i] = (s[i / bits] >> (bits - 1 - i % bits)) & 1;
		r = run_all(b, a.bitstring, 2, a.bitstring_h);
		if (r < 0)
			return r;
		a.h_bitstring = lowest(a.bitstring_h, 1.0);
		a.min_entropy = MIN(a.h_original, bits * a.h_bitstring);
	}
	*ret = a;
	return 0;
}
