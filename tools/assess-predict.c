/* SPDX-License-Identifier: MIT */
/* SP 800-90B sections 6.3.7-6.3.10: the predictors (MultiMCW, lag, MultiMMC, LZ78Y). Each keeps
 * subpredictors with a scoreboard; the one with the best score so far (ties to the later one)
 * makes the prediction, and 6.3.7's bounds turn the count and the longest run of correct
 * predictions into an estimate (assess_predictor_h()). */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#include "assess-bound.h"
#include "assess-dict.h"
#include "assess-estimators.h"
#include "assess-predict-bits.h"
#include "macro.h"

/* The count of correct predictions and their longest run. */
struct score {
	uint64_t correct, run, longest;
};

static void score(struct score *sc, bool correct)
{
	if (correct) {
		sc->correct++;
		sc->run++;
		sc->longest = MAX(sc->longest, sc->run);
	} else
		sc->run = 0;
}

static const unsigned mcw_w[ASSESS_MCW_WINDOWS] = {63, 255, 1023, 4095};

/* One window's most common value, kept as the window slides: ties go to the value seen last. */
struct mcw {
	uint32_t count[256], last[256], max;
	uint8_t frequent;
};

static void mcw_slide(struct mcw *m, const uint8_t *s, size_t i, unsigned w, unsigned k)
{
	uint8_t out = s[i - w], in = s[i];

	m->count[out]--;
	m->count[in]++;
	m->last[in] = (uint32_t)i;
	if (out != m->frequent) {
		/* The leader kept its count; the newcomer, the latest value, wins a tie. */
		if (m->count[in] >= m->max) {
			m->max = m->count[in];
			m->frequent = in;
		}
		return;
	}
	/* The leader lost one: look again, the latest of the most common winning. */
	m->max = 0;
	for (unsigned v = 0; v < k; v++) {
		if (m->count[v] > m->max || (m->count[v] == m->max && m->count[v] > 0 &&
		                             m->last[v] > m->last[m->frequent])) {
			m->max = m->count[v];
			m->frequent = (uint8_t)v;
		}
	}
}

double assess_multi_mcw(const uint8_t *s, size_t n, unsigned k)
{
	struct mcw m[ASSESS_MCW_WINDOWS] = {};
	uint64_t board[ASSESS_MCW_WINDOWS] = {0};
	struct score sc = {};
	unsigned winner = 0;

	if (n < mcw_w[ASSESS_MCW_WINDOWS - 1] + 1)
		return NAN;
	/* Each window starts full: the first w samples. */
	for (unsigned j = 0; j < ASSESS_MCW_WINDOWS; j++)
		for (size_t i = 0; i < mcw_w[j]; i++) {
			m[j].count[s[i]]++;
			m[j].last[s[i]] = (uint32_t)i;
			if (m[j].count[s[i]] >= m[j].max) {
				m[j].max = m[j].count[s[i]];
				m[j].frequent = s[i];
			}
		}
	for (size_t i = mcw_w[0]; i < n; i++) {
		score(&sc, m[winner].frequent == s[i]);
		for (unsigned j = 0; j < ASSESS_MCW_WINDOWS; j++)
			if (i >= mcw_w[j] && m[j].frequent == s[i] && ++board[j] >= board[winner])
				winner = j;
		for (unsigned j = 0; j < ASSESS_MCW_WINDOWS; j++)
			if (i >= mcw_w[j])
				mcw_slide(&m[j], s, i, mcw_w[j], k);
	}
	return assess_predictor_h(sc.correct, n - mcw_w[0], sc.longest, k);
}

double assess_lag(const uint8_t *s, size_t n, unsigned k)
{
	uint64_t board[ASSESS_LAG_D] = {0};
	struct score sc = {};
	size_t winner = 0;

	if (n < 3)
		return NAN;
	if (k == 2)
		return assess_lag_bits(s, n);
	/* Subpredictor d guesses s[i - d - 1]. */
	for (size_t i = 1; i < n; i++) {
		size_t d_max = MIN(i, (size_t)ASSESS_LAG_D);

		score(&sc, s[i - winner - 1] == s[i]);
		for (size_t d = 0; d < d_max; d++)
			if (s[i - d - 1] == s[i] && ++board[d] >= board[winner])
				winner = d;
	}
	return assess_predictor_h(sc.correct, n - 1, sc.longest, k);
}

/* One dictionary per context length: the short ones, which every step looks up, stay small and in
 * the cache. */
struct mmc {
	struct assess_dict dict[ASSESS_MMC_D];
	uint64_t entries[ASSESS_MMC_D], board[ASSESS_MMC_D];
	unsigned winner;
	struct score sc;
};

/* The order-(d + 1) context ending at i - 1 was seen (slot x): its prediction is scored, and s[i]
 * counted after it while the order has room for a new (x, y). */
static int mmc_seen(struct mmc *m, const uint8_t *s, size_t i, unsigned d, long x,
                    unsigned cur_winner)
{
	bool correct = m->dict[d].xs[x].pred == s[i];
	int r;

	if (correct && ++m->board[d] >= m->board[m->winner])
		m->winner = d;
	/* A winner without a prediction (its context unseen) neither scores nor breaks the run;
	 * the reference implementation counts so, and the agreement test holds eb-assess to it. */
	if (d == cur_winner)
		score(&m->sc, correct);
	r = assess_dict_bump(&m->dict[d], x, s[i], m->entries[d] < ASSESS_MMC_ENTRIES);
	if (r < 0)
		return r;
	m->entries[d] += (unsigned)r;
	return 0;
}

/* One prediction: the contexts of 1..D samples before s[i], shortest first; a context not seen
 * means no longer one was, and each is added while its order has room. */
static int mmc_step(struct mmc *m, const uint8_t *s, size_t i)
{
	unsigned cur_winner = m->winner;
	uint64_t h = 0;
	bool found = false;
	long x;
	int r;

	for (unsigned d = 0; d < ASSESS_MMC_D && d + 2 <= i; d++) {
		uint32_t pos = (uint32_t)(i - d - 1);

		h = assess_dict_hash(h, s[pos]);
		if (d == 0 || found) {
			x = assess_dict_find(&m->dict[d], pos, (uint8_t)(d + 1), h);
			found = x >= 0;
		}
		if (found) {
			r = mmc_seen(m, s, i, d, x, cur_winner);
			if (r < 0)
				return r;
		} else if (m->entries[d] < ASSESS_MMC_ENTRIES) {
			x = assess_dict_get(&m->dict[d], pos, (uint8_t)(d + 1), h);
			if (x < 0)
				return (int)x;
			r = assess_dict_bump(&m->dict[d], x, s[i], true);
			if (r < 0)
				return r;
			m->entries[d]++;
		}
	}
	return 0;
}

/* The first context of each order: s[0..d] followed by s[d + 1]. */
static int mmc_start(struct mmc *m, const uint8_t *s, size_t n)
{
	for (unsigned d = 0; d < ASSESS_MMC_D && d < n - 2; d++) {
		uint64_t h = 0;
		long x;
		int r;

		for (unsigned j = d + 1; j-- > 0;)
			h = assess_dict_hash(h, s[j]);
		x = assess_dict_get(&m->dict[d], 0, (uint8_t)(d + 1), h);
		if (x < 0)
			return (int)x;
		r = assess_dict_bump(&m->dict[d], x, s[d + 1], true);
		if (r < 0)
			return r;
		m->entries[d] = 1;
	}
	return 0;
}

int assess_multi_mmc(const uint8_t *s, size_t n, unsigned k, double *ret)
{
	struct mmc m = {};
	int r;

	if (n < 3 || n > UINT32_MAX) {
		*ret = NAN;
		return 0;
	}
	if (k == 2 && n >= ASSESS_LZ78Y_B + 2)
		return assess_multi_mmc_bits(s, n, ret);
	for (unsigned d = 0; d < ASSESS_MMC_D; d++) {
		r = assess_dict_init(&m.dict[d], s);
		if (r < 0)
			goto done;
	}
	r = mmc_start(&m, s, n);
	for (size_t i = 2; r >= 0 && i < n; i++)
		r = mmc_step(&m, s, i);
done:
	for (unsigned d = 0; d < ASSESS_MMC_D; d++)
		assess_dict_done(&m.dict[d]);
	if (r < 0)
		return r;
	*ret = assess_predictor_h(m.sc.correct, n - 2, m.sc.longest, k);
	return 0;
}

struct lz78y {
	struct assess_dict dict[ASSESS_LZ78Y_B]; /* [j - 1]: the strings of length j */
	uint64_t strings;
	struct score sc;
};

/* One prediction: of the strings of 1..B samples before s[i] in the dictionary, the one whose
 * prediction was seen most often (the longest of equals) predicts; each string then counts
 * s[i], and those not yet in the dictionary join it while it has room. */
static int lz78y_step(struct lz78y *z, const uint8_t *s, size_t i)
{
	uint64_t h[ASSESS_LZ78Y_B + 1], best = 0;
	bool have = false;
	uint8_t pred = 0;
	int r;

	h[0] = 0;
	for (unsigned j = 1; j <= ASSESS_LZ78Y_B; j++)
		h[j] = assess_dict_hash(h[j - 1], s[i - j]);
	for (unsigned j = ASSESS_LZ78Y_B; j > 0; j--) {
		struct assess_dict *dict = &z->dict[j - 1];
		long x = assess_dict_find(dict, (uint32_t)(i - j), (uint8_t)j, h[j]);

		if (x >= 0) {
			if (dict->xs[x].best > best) {
				best = dict->xs[x].best;
				pred = dict->xs[x].pred;
				have = true;
			}
		} else if (z->strings < ASSESS_LZ78Y_STRINGS) {
			x = assess_dict_get(dict, (uint32_t)(i - j), (uint8_t)j, h[j]);
			if (x < 0)
				return (int)x;
			z->strings++;
		} else
			continue;
		r = assess_dict_bump(dict, x, s[i], true);
		if (r < 0)
			return r;
	}
	score(&z->sc, have && pred == s[i]);
	return 0;
}

int assess_lz78y(const uint8_t *s, size_t n, unsigned k, double *ret)
{
	struct lz78y z = {};
	int r;

	if (n < ASSESS_LZ78Y_B + 2 || n > UINT32_MAX) {
		*ret = NAN;
		return 0;
	}
	if (k == 2)
		return assess_lz78y_bits(s, n, ret);
	for (unsigned j = 0; j < ASSESS_LZ78Y_B; j++) {
		r = assess_dict_init(&z.dict[j], s);
		if (r < 0)
			goto done;
	}
	/* The dictionary starts with the strings ending at s[B - 1], each followed by s[B]. */
	for (unsigned j = 1; r >= 0 && j <= ASSESS_LZ78Y_B; j++) {
		uint64_t h = 0;
		long x;

		for (unsigned t = 1; t <= j; t++)
			h = assess_dict_hash(h, s[ASSESS_LZ78Y_B - t]);
		x = assess_dict_get(&z.dict[j - 1], ASSESS_LZ78Y_B - j, (uint8_t)j, h);
		r = x < 0 ? (int)x : assess_dict_bump(&z.dict[j - 1], x, s[ASSESS_LZ78Y_B], true);
		z.strings++;
	}
	for (size_t i = ASSESS_LZ78Y_B + 1; r >= 0 && i < n; i++)
		r = lz78y_step(&z, s, i);
done:
	for (unsigned j = 0; j < ASSESS_LZ78Y_B; j++)
		assess_dict_done(&z.dict[j]);
	if (r < 0)
		return r;
	*ret = assess_predictor_h(z.sc.correct, n - ASSESS_LZ78Y_B - 1, z.sc.longest, k);
	return 0;
}
