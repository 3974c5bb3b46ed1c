/* SPDX-License-Identifier: MIT */
/* struct eb_backoff: the schedule of ceilings, the range of every wait, reset, and the fallback
 * when getrandom() would block. getrandom() is a link seam. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>

#include <cmocka.h>

#include "backoff.h"
#include "macro.h"

static bool random_blocks; /* getrandom() fails with EAGAIN, as before the CRNG is ready */
static bool scripted;      /* getrandom() returns next_random */
static uint32_t next_random;

ssize_t __real_getrandom(void *buf, size_t n, unsigned flags);
ssize_t __wrap_getrandom(void *buf, size_t n, unsigned flags);
ssize_t __wrap_getrandom(void *buf, size_t n, unsigned flags)
{
	if (random_blocks) {
		errno = EAGAIN;
		return -1;
	}
	if (scripted && n == sizeof(next_random)) {
		memcpy(buf, &next_random, n);
		return (ssize_t)n;
	}
	return __real_getrandom(buf, n, flags);
}

static int reset_seam(void **state)
{
	(void)state;
	random_blocks = scripted = false;
	return 0;
}

/* The ceilings clients have always used: 100, 200, ... 25600 ms, then 30 s for good. */
static void test_schedule(void **state)
{
	static const uint32_t ceilings[] = {100,   200,   400,   800,   1600,  3200, 6400,
	                                    12800, 25600, 30000, 30000, 30000, 30000};
	struct eb_backoff b =
	    EB_BACKOFF_INIT(EB_BACKOFF_RECONNECT_MIN_MS, EB_BACKOFF_RECONNECT_MAX_MS);

	(void)state;
	scripted = true;
	for (size_t i = 0; i < ELEMENTSOF(ceilings); i++) {
		/* 0 draws the bottom of the range, ceiling/2 its top. */
		next_random = i % 2 == 0 ? 0 : ceilings[i] / 2;
		assert_int_equal(eb_backoff_next(&b), i % 2 == 0 ? ceilings[i] / 2 : ceilings[i]);
	}
	eb_backoff_reset(&b);
	next_random = 0;
	assert_int_equal(eb_backoff_next(&b), 50);
	assert_int_equal(b.ceiling_ms, 200);
}

/* Every wait lies in [ceiling/2, ceiling] whatever the random word, and over many draws both
 * ends of the range and the middle are reached: the jitter really spreads. */
static void test_range_random(void **state)
{
	bool low = false, high = false, middle = false;

	(void)state;
	for (unsigned run = 0; run < 2000; run++) {
		struct eb_backoff b = EB_BACKOFF_INIT(10, 1000);
		uint32_t ceiling = 10;

		for (unsigned k = 0; k < 9; k++) {
			uint32_t w = eb_backoff_next(&b);

			assert_true(w >= ceiling / 2 && w <= ceiling);
			if (ceiling == 80) {
				low |= w == 40;
				high |= w == 80;
				middle |= w > 50 && w < 70;
			}
			ceiling = MIN(ceiling * 2, 1000u);
		}
	}
	assert_true(low && high && middle);
}

/* Before the CRNG is ready getrandom(GRND_NONBLOCK) fails; the wait is still in range, and the
 * schedule goes on. */
static void test_random_blocks(void **state)
{
	struct eb_backoff b = EB_BACKOFF_INIT(100, 30000);
	uint32_t ceiling = 100;

	(void)state;
	random_blocks = true;
	for (unsigned k = 0; k < 12; k++) {
		uint32_t w = eb_backoff_next(&b);

		assert_true(w >= ceiling / 2 && w <= ceiling);
		ceiling = MIN(ceiling * 2, 30000u);
	}
	assert_int_equal(b.ceiling_ms, 30000);
}

/* No overflow near the top of the type: the ceiling stops at max. */
static void test_large_max(void **state)
{
	struct eb_backoff b = EB_BACKOFF_INIT(1u << 31, UINT32_MAX);

	(void)state;
	assert_true(eb_backoff_next(&b) >= 1u << 30);
	assert_int_equal(b.ceiling_ms, UINT32_MAX);
	assert_true(eb_backoff_next(&b) >= UINT32_MAX / 2);
	assert_int_equal(b.ceiling_ms, UINT32_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_schedule, reset_seam),
	    cmocka_unit_test_setup(test_range_random, reset_seam),
	    cmocka_unit_test_setup(test_random_blocks, reset_seam),
	    cmocka_unit_test_setup(test_large_max, reset_seam),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
