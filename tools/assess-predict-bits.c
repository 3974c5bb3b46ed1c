/* SPDX-License-Identifier: MIT */
/* SP 800-90B's MultiMMC (6.3.9) and LZ78Y (6.3.10) predictors for bits, with their dictionaries as
 * direct tables: a context of d bits is a d-bit index (the latest bit lowest), and the table of
 * length d holds the counts of the 0s and the 1s that followed each. A context is in the
 * dictionary when either count is. */
#include "assess-predict-bits.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "assess-bound.h"
#include "macro.h"

/* Tables for contexts of 1..D bits: table[len - 1] has 2^len pairs of counts. */
struct tables {
	uint32_t *t[ASSESS_MMC_D];
};

static void tables_free(struct tables *t)
{
	for (unsigned j = 0; j < ASSESS_MMC_D; j++)
		free(t->t[j]);
}

static int tables_new(struct tables *t)
{
	*t = (struct tables){};
	for (unsigned j = 0; j < ASSESS_MMC_D; j++) {
		t->t[j] = calloc((size_t)2 << (j + 1), sizeof(uint32_t));
		if (!t->t[j]) {
			tables_free(t);
			return -ENOMEM;
		}
	}
	return 0;
}

/* The counts of the context of len bits whose latest bits are pattern. */
static uint32_t *entry(const struct tables *t, unsigned len, uint32_t pattern)
{
	return t->t[len - 1] + 2 * (pattern & ((1u << len) - 1));
}

/* A context's prediction: the bit that followed it more often, 1 of equals; and how often. */
static unsigned predict(const uint32_t *e, uint32_t *ret_count)
{
	unsigned y = e[0] > e[1] ? 0 : 1;

	*ret_count = e[y];
	return y;
}

struct mmc {
	struct tables t;
	uint64_t entries[ASSESS_MMC_D], board[ASSESS_MMC_D], correct, run, longest;
	unsigned winner;
};

static void mmc_step(struct mmc *m, const uint8_t *b, size_t i)
{
	unsigned cur_winner = m->winner;
	uint32_t pattern = 0, count = 0;
	bool found = false;

	for (unsigned d = 0; d < ASSESS_MMC_D && d + 2 <= i; d++) {
		unsigned y = 0;
		uint32_t *e;

		pattern |= (uint32_t)b[i - d - 1] << d;
		e = entry(&m->t, d + 1, pattern);
		if (d == 0 || found) {
			y = predict(e, &count);
			found = count > 0;
		}
		if (!found) {
			if (m->entries[d] < ASSESS_MMC_ENTRIES) {
				e[b[i]] = 1;
				m->entries[d]++;
			}
			continue;
		}
		if (y == b[i] && ++m->board[d] >= m->board[m->winner])
			m->winner = d;
		/* As in the symbol version: a winner with no prediction leaves the run alone. */
		if (d == cur_winner) {
			if (y == b[i]) {
				m->correct++;
				m->run++;
				m->longest = MAX(m->longest, m->run);
			} else
				m->run = 0;
		}
		if (e[b[i]] != 0)
			e[b[i]]++;
		else if (m->entries[d] < ASSESS_MMC_ENTRIES) {
			e[b[i]] = 1;
			m->entries[d]++;
		}
	}
}

int assess_multi_mmc_bits(const uint8_t *b, size_t n, double *ret)
{
	struct mmc m = {};
	uint32_t pattern = 0;
	int r;

	r = tables_new(&m.t);
	if (r < 0)
		return r;
	/* The first context of each length: b[0..d], followed by b[d + 1]. */
	for (unsigned d = 0; d < ASSESS_MMC_D && d + 2 < n; d++) {
		pattern = pattern << 1 | b[d];
		entry(&m.t, d + 1, pattern)[b[d + 1]] = 1;
		m.entries[d] = 1;
	}
	for (size_t i = 2; i < n; i++)
		mmc_step(&m, b, i);
	tables_free(&m.t);
	*ret = assess_predictor_h(m.correct, n - 2, m.longest, 2);
	return 0;
}

int assess_lz78y_bits(const uint8_t *b, size_t n, double *ret)
{
	const unsigned B = ASSESS_LZ78Y_B;
	uint64_t strings = 0, correct = 0, run = 0, longest = 0;
	uint32_t pattern = 0;
	struct tables t;
	int r;

	r = tables_new(&t);
	if (r < 0)
		return r;
	/* The strings ending at b[B - 1], each followed by b[B]. */
	for (unsigned j = 0; j < B; j++) {
		pattern |= (uint32_t)b[B - 1 - j] << j;
		entry(&t, j + 1, pattern)[b[B]] = 1;
		strings++;
	}
	for (size_t i = B + 1; i < n; i++) {
		uint32_t best = 0, count;
		unsigned pred = 2;

		pattern = 0;
		for (unsigned j = 0; j < B; j++)
			pattern |= (uint32_t)b[i - 1 - j] << j;
		/* The longest string first: a shorter one predicts only with a higher count. */
		for (unsigned j = B; j > 0; j--) {
			uint32_t *e = entry(&t, j, pattern);
			unsigned y = predict(e, &count);

			if (count > 0) {
				if (count > best) {
					best = count;
					pred = y;
				}
				e[b[i]]++;
			} else if (strings < ASSESS_LZ78Y_STRINGS) {
				e[b[i]] = 1;
				strings++;
			}
		}
		if (pred == b[i]) {
			correct++;
			run++;
			longest = MAX(longest, run);
		} else
			run = 0;
	}
	tables_free(&t);
	*ret = assess_predictor_h(correct, n - B - 1, longest, 2);
	return 0;
}

/* The lag predictor for bits, 128 subpredictors at once: bit d of a 128-bit mask is subpredictor
 * d's (it guesses b[i - d - 1]), and the scoreboard is bit-sliced, plane j of the masks holding
 * bit j of every score. The winner's score is the highest of all; a step changes the winner only
 * to a subpredictor that was right and now has that highest score, the latest of them. */
struct mask {
	uint64_t w[2];
};

static struct mask mask_and(struct mask a, struct mask b)
{
	return (struct mask){{a.w[0] & b.w[0], a.w[1] & b.w[1]}};
}

static bool mask_any(struct mask a)
{
	return (a.w[0] | a.w[1]) != 0;
}

/* The highest bit set; the mask is not empty. */
static unsigned mask_top(struct mask a)
{
	return a.w[1] ? 127 - (unsigned)__builtin_clzll(a.w[1])
	              : 63 - (unsigned)__builtin_clzll(a.w[0]);
}

#define LAG_PLANES 64u

/* The subpredictors whose score is v. */
static struct mask score_is(const struct mask *plane, unsigned planes, uint64_t v)
{
	struct mask eq = {{~0ull, ~0ull}};

	for (unsigned j = 0; j < planes; j++) {
		uint64_t flip = (v >> j & 1) ? 0 : ~0ull;

		eq.w[0] &= plane[j].w[0] ^ flip;
		eq.w[1] &= plane[j].w[1] ^ flip;
	}
	return eq;
}

static void score_add(struct mask *plane, unsigned planes, struct mask carry)
{
	for (unsigned j = 0; j < planes && mask_any(carry); j++) {
		struct mask c = mask_and(plane[j], carry);

		plane[j].w[0] ^= carry.w[0];
		plane[j].w[1] ^= carry.w[1];
		carry = c;
	}
}

double assess_lag_bits(const uint8_t *b, size_t n)
{
	struct mask plane[LAG_PLANES] = {}, hist = {}, valid = {};
	uint64_t top = 0, correct = 0, run = 0, longest = 0;
	unsigned winner = 0, planes = 1;

	/* Enough planes for a score of n. */
	while (planes < LAG_PLANES && (n >> planes) != 0)
		planes++;
	for (size_t i = 1; i < n; i++) {
		uint64_t fill = b[i] ? 0 : ~0ull;
		struct mask right, best;

		/* hist bit d is b[i - 1 - d]; valid marks the d < i that have a guess. */
		hist.w[1] = hist.w[1] << 1 | hist.w[0] >> 63;
		hist.w[0] = hist.w[0] << 1 | b[i - 1];
		valid.w[1] = valid.w[1] << 1 | valid.w[0] >> 63;
		valid.w[0] = valid.w[0] << 1 | 1;
		if (((winner < 64 ? hist.w[0] >> winner : hist.w[1] >> (winner - 64)) & 1) ==
		    b[i]) {
			correct++;
			run++;
			longest = MAX(longest, run);
		} else
			run = 0;
		right = mask_and((struct mask){{hist.w[0] ^ fill, hist.w[1] ^ fill}}, valid);
		best = mask_and(score_is(plane, planes, top), right);
		if (mask_any(best)) {
			winner = mask_top(best);
			top++;
		} else if (top > 0) {
			best = mask_and(score_is(plane, planes, top - 1), right);
			if (mask_any(best))
				winner = mask_top(best);
		}
		score_add(plane, planes, right);
	}
	return assess_predictor_h(correct, n - 1, longest, 2);
}
