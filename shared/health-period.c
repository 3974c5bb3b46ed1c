/* SPDX-License-Identifier: MIT */
/* The periodic health test: any sequence that repeats with a period of up to EB_HEALTH_PERIOD_MAX
 * samples, sample by sample and over a block. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "health-internal.h"
#include "macro.h"

/* Writes x into the history ring. */
static void period_push(struct eb_health_period *p, uint8_t x)
{
	p->hist[p->pos] = p->hist[p->pos + EB_HEALTH_PERIOD_MAX] = x;
	p->pos = (p->pos + 1) % EB_HEALTH_PERIOD_MAX;
	p->seen = MIN(p->seen + 1, EB_HEALTH_PERIOD_MAX);
}

/* The periodic test on one more sample x: every lag's run grows where x equals the sample that
 * many before it and drops to 0 elsewhere; true when one reaches the cutoff. Lanes whose lag
 * reaches back past the restart are not matches. */
bool eb_health_period_step(const struct eb_health *h, struct eb_health_period *p, uint8_t x)
{
	const uint8_t *past = p->hist + p->pos; /* past[k] is x's lag EB_HEALTH_PERIOD_MAX - k */
	vec_u8 vx = vec_splat(x), top = vec_splat((uint8_t)(h->period_cutoff - 1)), hit = {};
	/* Lane k is valid when its lag, EB_HEALTH_PERIOD_MAX - k, is at most seen. */
	vec_u8 floor = vec_splat((uint8_t)(EB_HEALTH_PERIOD_MAX - 1 - p->seen)), lane = {};

	if (h->period_cutoff == 0)
		return false;
	for (unsigned k = 0; k < VEC_LEN; k++)
		lane[k] = (uint8_t)k;
	for (unsigned v = 0; v < PERIOD_VECS; v++) {
		vec_u8 e = (vec_u8)(vec_load(past + v * VEC_LEN) == vx), r;

		if (p->seen < EB_HEALTH_PERIOD_MAX)
			e &= (vec_u8)(lane + (uint8_t)(v * VEC_LEN) > floor);
		r = (vec_load(p->run + v * VEC_LEN) + 1) & e;
		memcpy(p->run + v * VEC_LEN, &r, sizeof(r));
		hit |= (vec_u8)(r > top);
	}
	period_push(p, x);
	return vec_any(hit);
}

/* The length of the run at lane k (lag d) through buf[t], a match: back within the block, which
 * starts at buf[EB_HEALTH_PERIOD_MAX], plus the run carried in when it reaches the block's start,
 * and forward to buf[n - 1]. */
static unsigned period_run_through(const struct eb_health_period *p, const uint8_t *buf, size_t n,
                                   size_t t, unsigned k)
{
	const size_t d = EB_HEALTH_PERIOD_MAX - k, start = EB_HEALTH_PERIOD_MAX;
	size_t a = t, b = t + 1;

	while (a > start && buf[a - 1] == buf[a - 1 - d])
		a--;
	while (b < n && buf[b] == buf[b - d])
		b++;
	return (unsigned)(b - a) + (a == start ? p->run[k] : 0u);
}

/* r is at most ceil(8 / bits) <= 8. */
#define PERIOD_R_MAX 8u

/* The lanes, one bit each, at which the r samples buf[t..t + r) each equal the one that lane's lag
 * before them. */
static inline __attribute__((always_inline)) void period_lanes(const uint8_t *buf, size_t t,
                                                               unsigned r, uint64_t ret[static 4])
{
	const uint8_t *past = buf + t - EB_HEALTH_PERIOD_MAX;
	vec_u8 x[PERIOD_R_MAX];

	for (unsigned j = 0; j < r; j++)
		x[j] = vec_splat(buf[t + j]);
	for (unsigned w = 0; w < 4; w++) {
		uint64_t m = 0;

		for (unsigned u = 0; u < 4; u++) {
			const uint8_t *q = past + (4 * w + u) * VEC_LEN;
			vec_u8 all = (vec_u8)(vec_load(q) == x[0]);

			for (unsigned j = 1; j < r; j++)
				all &= (vec_u8)(vec_load(q + j) == x[j]);
			m |= (uint64_t)vec_mask(all) << (16 * u);
		}
		ret[w] = m;
	}
}

/* The periodic test over s[0..m) without touching h: true, with the runs it ends with in
 * ret_run, when it does not fire. Runs carried in from before the block are measured one by one
 * (on good data about one lane in 2^bits has one). A run of Cp matches inside the block holds
 * r matches in a row starting at every one of its first Cp - r + 1 samples, so looking every
 * Cp - r + 1 samples for lanes with r matches in a row finds a sample of each; r is chosen so
 * that good data shows about one such lane a look (256 lanes x 2^-(bits r), bits r >= 8), and
 * each is measured whole. Needs a full history (seen = EB_HEALTH_PERIOD_MAX); step() handles the
 * samples right after a restart. */
bool eb_health_period_scan(const struct eb_health *h, const uint8_t *s, size_t m,
                           uint8_t ret_run[static EB_HEALTH_PERIOD_MAX])
{
	const struct eb_health_period *p = &h->period;
	const unsigned cut = h->period_cutoff;
	uint8_t buf[EB_HEALTH_PERIOD_MAX + EB_HEALTH_APT_WINDOW_BINARY];
	const size_t n = EB_HEALTH_PERIOD_MAX + m;
	unsigned r, stride;

	if (cut == 0) {
		memcpy(ret_run, p->run, EB_HEALTH_PERIOD_MAX);
		return true;
	}
	if (p->seen < EB_HEALTH_PERIOD_MAX || m > EB_HEALTH_APT_WINDOW_BINARY)
		return false;
	memcpy(buf, p->hist + p->pos, EB_HEALTH_PERIOD_MAX);
	memcpy(buf + EB_HEALTH_PERIOD_MAX, s, m);

	for (unsigned k = 0; k < EB_HEALTH_PERIOD_MAX; k++)
		if (p->run[k] > 0 && buf[EB_HEALTH_PERIOD_MAX] == buf[k] &&
		    period_run_through(p, buf, n, EB_HEALTH_PERIOD_MAX, k) >= cut)
			return false;

	r = MIN(cut, (PERIOD_R_MAX + h->bits - 1) / h->bits);
	stride = cut - r + 1;
	for (size_t t = EB_HEALTH_PERIOD_MAX; t + r <= n; t += stride) {
		uint64_t lanes[4];

		/* A bitmap of the lanes, then one pass over its set bits: no branch per vector.
		 * 8-bit samples (r = 1) get a loop of their own, the common case. */
		if (r == 1)
			period_lanes(buf, t, 1, lanes);
		else
			period_lanes(buf, t, r, lanes);
		for (unsigned w = 0; w < ELEMENTSOF(lanes); w++)
			for (; lanes[w] != 0; lanes[w] &= lanes[w] - 1) {
				unsigned k = 64 * w + (unsigned)__builtin_ctzll(lanes[w]);

				if (period_run_through(p, buf, n, t, k) >= cut)
					return false;
			}
	}

	/* No alarm: every run ending at the block's last sample is shorter than cut, so its
	 * length is found within the last cut samples (plus the carried run when the block is
	 * shorter and matched all along). */
	for (unsigned v = 0; v < PERIOD_VECS; v++) {
		vec_u8 alive = vec_splat(0xff), acc = {}, carried;
		size_t j = 0;

		for (; j < MIN(m, (size_t)cut) && vec_any(alive); j++) {
			size_t q = n - 1 - j;

			alive &= (vec_u8)(vec_load(buf + q - EB_HEALTH_PERIOD_MAX + v * VEC_LEN) ==
			                  vec_splat(buf[q]));
			acc -= alive;
		}
		if (j == m) {
			carried = vec_load(p->run + v * VEC_LEN) & alive;
			acc += carried;
		}
		memcpy(ret_run + v * VEC_LEN, &acc, sizeof(acc));
	}
	return true;
}

/* Commits what period_scan() found for s[0..m): its runs, and the last samples as the history. */
void eb_health_period_commit(struct eb_health_period *p, const uint8_t *s, size_t m,
                             const uint8_t run[static EB_HEALTH_PERIOD_MAX])
{
	memcpy(p->run, run, EB_HEALTH_PERIOD_MAX);
	if (m >= EB_HEALTH_PERIOD_MAX) {
		memcpy(p->hist, s + m - EB_HEALTH_PERIOD_MAX, EB_HEALTH_PERIOD_MAX);
		memcpy(p->hist + EB_HEALTH_PERIOD_MAX, s + m - EB_HEALTH_PERIOD_MAX,
		       EB_HEALTH_PERIOD_MAX);
		p->pos = 0;
		p->seen = EB_HEALTH_PERIOD_MAX;
	} else
		for (size_t i = 0; i < m; i++)
			period_push(p, s[i]);
}
