/* SPDX-License-Identifier: MIT */
/* What health.c and health-period.c share: the vector helpers both tests' fast paths use, and the
 * periodic test's three steps, which eb_health_feed() calls (health.h says what the test is). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "health.h"

/* Sixteen samples at a time in portable vector code (GCC and clang lower it to SSE2, NEON, or
 * scalar code); memcpy() is an unaligned load. */
typedef uint8_t vec_u8 __attribute__((vector_size(16)));
#define VEC_LEN     sizeof(vec_u8)
#define PERIOD_VECS (EB_HEALTH_PERIOD_MAX / VEC_LEN)

static inline vec_u8 vec_load(const uint8_t *p)
{
	vec_u8 v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline vec_u8 vec_splat(uint8_t x)
{
	vec_u8 v;

	memset(&v, x, sizeof(v));
	return v;
}

static inline bool vec_any(vec_u8 v)
{
	uint64_t w[2];

	memcpy(w, &v, sizeof(w));
	return (w[0] | w[1]) != 0;
}

/* One bit per lane, set where the lane is 0xff (a compare's true). */
static inline uint16_t vec_mask(vec_u8 v)
{
#ifdef __SSE2__
	__m128i x;

	memcpy(&x, &v, sizeof(x));
	return (uint16_t)_mm_movemask_epi8(x);
#else
	uint16_t m = 0;

	for (unsigned k = 0; k < VEC_LEN; k++)
		m |= (uint16_t)((v[k] >> 7) << k);
	return m;
#endif
}

/* The periodic test on one more sample x, which it then records: true when a lag's run reaches
 * the cutoff. Lanes whose lag reaches back past the restart are not matches. */
bool eb_health_period_step(const struct eb_health *h, struct eb_health_period *p, uint8_t x);

/* The periodic test over s[0..m) (m <= EB_HEALTH_APT_WINDOW_BINARY) without touching h: true, with
 * the runs it ends with in ret_run, when it does not fire; false also when it cannot tell without
 * going sample by sample (right after a restart), for eb_health_period_step() to decide. */
bool eb_health_period_scan(const struct eb_health *h, const uint8_t *s, size_t m,
                           uint8_t ret_run[static EB_HEALTH_PERIOD_MAX]);

/* Commits what eb_health_period_scan() found for s[0..m): its runs, and the history. */
void eb_health_period_commit(struct eb_health_period *p, const uint8_t *s, size_t m,
                             const uint8_t run[static EB_HEALTH_PERIOD_MAX]);
