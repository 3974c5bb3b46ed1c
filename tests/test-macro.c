/* SPDX-License-Identifier: MIT */
/* Tests for shared/macro.h's MIN() and MAX(): each argument evaluated once, nested calls, and the
 * result's type the usual arithmetic conversions give. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "macro.h"

static unsigned calls;

static unsigned next(unsigned v)
{
	calls++;
	return v;
}

static void test_once(void **state)
{
	unsigned i = 1, j = 5;

	(void)state;
	assert_int_equal(MIN(i++, j++), 1);
	assert_int_equal(i, 2);
	assert_int_equal(j, 6);
	assert_int_equal(MAX(i++, j++), 6);
	assert_int_equal(i, 3);
	assert_int_equal(j, 7);

	calls = 0;
	assert_int_equal(MIN(next(9), next(4)), 4);
	assert_int_equal(calls, 2);
	calls = 0;
	assert_int_equal(MAX(next(9), next(4)), 9);
	assert_int_equal(calls, 2);
}

static void test_nested(void **state)
{
	unsigned pct = 250, low = 0;

	(void)state;
	/* A clamp, as agent-word.c writes one: the temporaries of each level shadow nothing. */
	assert_int_equal(MAX(MIN(pct, 100u), 1u), 100);
	assert_int_equal(MAX(MIN(low, 100u), 1u), 1);
	assert_int_equal(MIN(MIN(3, 2), MIN(5, MAX(1, 0))), 1);
	calls = 0;
	assert_int_equal(MIN(MAX(next(7), next(2)), next(5)), 5);
	assert_int_equal(calls, 3);
}

static void test_types(void **state)
{
	uint64_t big = UINT64_C(1) << 40;
	int neg = -1;

	(void)state;
	/* The result is as wide as the wider argument, as with a ?: b. */
	assert_true(MAX(big, (uint32_t)7) == big);
	assert_int_equal(sizeof(MIN((uint32_t)1, big)), sizeof(uint64_t));
	assert_int_equal(MIN(neg, 3), -1);
	assert_int_equal(MAX(neg, -7), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_once),
	    cmocka_unit_test(test_nested),
	    cmocka_unit_test(test_types),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
