/* SPDX-License-Identifier: MIT */
/* Tests for shared/ratelimit.c: a burst per window let through, the rest counted and reported
 * once when the window ends, whether the next event or a timer ends it. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ratelimit.h"

#define SEC 1000000ULL

static void test_burst_then_summary(void **state)
{
	struct eb_ratelimit rl = EB_RATELIMIT_INIT(10 * SEC, 3);
	unsigned suppressed = 99;

	(void)state;
	/* The first three in a window pass, the next ones do not. */
	for (unsigned i = 0; i < 3; i++) {
		assert_true(eb_ratelimit_below(&rl, 100 * SEC + i, &suppressed));
		assert_int_equal(suppressed, 0);
	}
	for (unsigned i = 0; i < 5; i++) {
		assert_false(eb_ratelimit_below(&rl, 105 * SEC, &suppressed));
		assert_int_equal(suppressed, 0);
	}
	/* Still the same window just before its end. */
	assert_false(eb_ratelimit_below(&rl, 110 * SEC - 1, &suppressed));
	assert_int_equal(suppressed, 0);
	/* The first event after it passes, and learns that 6 were held back. */
	assert_true(eb_ratelimit_below(&rl, 110 * SEC, &suppressed));
	assert_int_equal(suppressed, 6);
	/* A window that held nothing back reports nothing. */
	assert_true(eb_ratelimit_below(&rl, 200 * SEC, &suppressed));
	assert_int_equal(suppressed, 0);
}

static void test_flush(void **state)
{
	struct eb_ratelimit rl = EB_RATELIMIT_INIT(10 * SEC, 1);
	unsigned suppressed;

	(void)state;
	assert_int_equal(eb_ratelimit_flush(&rl, 5 * SEC), 0); /* nothing yet */
	assert_true(eb_ratelimit_below(&rl, 50 * SEC, &suppressed));
	assert_false(eb_ratelimit_below(&rl, 51 * SEC, &suppressed));
	assert_false(eb_ratelimit_below(&rl, 52 * SEC, &suppressed));
	/* Too early: the window is open. */
	assert_int_equal(eb_ratelimit_flush(&rl, 59 * SEC), 0);
	/* The timer ends it and gets the count, once. */
	assert_int_equal(eb_ratelimit_flush(&rl, 60 * SEC), 2);
	assert_int_equal(eb_ratelimit_flush(&rl, 61 * SEC), 0);
	/* And the next event starts afresh. */
	assert_true(eb_ratelimit_below(&rl, 62 * SEC, &suppressed));
	assert_int_equal(suppressed, 0);
}

static void test_saturates(void **state)
{
	struct eb_ratelimit rl = EB_RATELIMIT_INIT(10 * SEC, 2);
	unsigned suppressed;

	(void)state;
	/* A counter at its ceiling stays there rather than wrapping round into the burst. */
	assert_true(eb_ratelimit_below(&rl, SEC, &suppressed));
	rl.n = UINT_MAX - 1;
	assert_false(eb_ratelimit_below(&rl, SEC, &suppressed));
	assert_false(eb_ratelimit_below(&rl, SEC, &suppressed));
	assert_int_equal(rl.n, UINT_MAX);
	assert_int_equal(eb_ratelimit_flush(&rl, 11 * SEC), UINT_MAX - 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_burst_then_summary),
	    cmocka_unit_test(test_flush),
	    cmocka_unit_test(test_saturates),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
