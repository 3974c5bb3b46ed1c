/* SPDX-License-Identifier: MIT */
/* Tests for shared/shuffle.c: Algorithms M and B on known sequences worked by hand from Knuth's
 * steps, and on long random ones that the output is exactly the input reordered (nothing made up,
 * nothing lost but what the table still holds). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "macro.h"
#include "shuffle.h"
#include "splitmix64.h"

static void test_init(void **state)
{
	struct eb_shuffle s;

	(void)state;
	assert_int_equal(eb_shuffle_init(&s, EB_SHUFFLE_M, 0), -EINVAL);
	assert_int_equal(eb_shuffle_init(&s, EB_SHUFFLE_M, EB_SHUFFLE_TABLE_MAX + 1), -EINVAL);
	assert_int_equal(eb_shuffle_init(&s, _EB_SHUFFLE_ALGORITHM_MAX, 4), -EINVAL);
	assert_int_equal(eb_shuffle_init(&s, EB_SHUFFLE_M, 4), 0);
	assert_int_equal(eb_shuffle_fill_left(&s), 4);
	assert_int_equal(eb_shuffle_init(&s, EB_SHUFFLE_B, 4), 0);
	/* B also loads the register Y. */
	assert_int_equal(eb_shuffle_fill_left(&s), 5);
	assert_int_equal(eb_shuffle_algorithm_from_string("m"), EB_SHUFFLE_M);
	assert_int_equal(eb_shuffle_algorithm_from_string("b"), EB_SHUFFLE_B);
	assert_int_equal(eb_shuffle_algorithm_from_string("M"), _EB_SHUFFLE_ALGORITHM_INVALID);
	assert_string_equal(eb_shuffle_algorithm_to_string(EB_SHUFFLE_B), "b");
}

/* k = 4, so j = floor(4y / 256) is the top two bits of y. Worked by hand:
 *   V = [10 11 12 13]
 *   x 14, y 192: j 3, out 13, V = [10 11 12 14]
 *   x 15, y   0: j 0, out 10, V = [15 11 12 14]
 *   x 16, y 192: j 3, out 14, V = [15 11 12 16]
 *   x 17, y 100: j 1, out 11, V = [15 17 12 16]
 *   x 18, y 255: j 3, out 16, V = [15 17 12 18] */
static void test_m_known(void **state)
{
	static const uint8_t x[] = {14, 15, 16, 17, 18}, y[] = {192, 0, 192, 100, 255},
			     expect[] = {13, 10, 14, 11, 16}, table[] = {15, 17, 12, 18};
	struct eb_shuffle s;

	(void)state;
	assert_int_equal(eb_shuffle_init(&s, EB_SHUFFLE_M, 4), 0);
	for (uint8_t v = 10; v < 14; v++)
		eb_shuffle_fill(&s, v);
	assert_int_equal(eb_shuffle_fill_left(&s), 0);
	for (size_t i = 0; i < ELEMENTSOF(x); i++)
		assert_int_equal(eb_shuffle_next_m(&s, x[i], y[i]), expect[i]);
	assert_memory_equal(s.v, table, sizeof(table));
}

/* k = 4; the table gets 0x10 0x50 0x90 0xd0 and Y = 0xff. Worked by hand:
 *   x 0x20: j = 4*0xff/256 = 3, Y = 0xd0 out, V = [10 50 90 20]
 *   x 0x60: j = 4*0xd0/256 = 3, Y = 0x20 out, V = [10 50 90 60]
 *   x 0xa0: j = 4*0x20/256 = 0, Y = 0x10 out, V = [a0 50 90 60]
 *   x 0xe0: j = 4*0x10/256 = 0, Y = 0xa0 out, V = [e0 50 90 60]
 *   x 0x00: j = 4*0xa0/256 = 2, Y = 0x90 out, V = [e0 50 00 60]
 *   x 0x01: j = 4*0x90/256 = 2, Y = 0x00 out, V = [e0 50 01 60] */
static void test_b_known(void **state)
{
	static const uint8_t fill[] = {0x10, 0x50, 0x90, 0xd0, 0xff},
			     x[] = {0x20, 0x60, 0xa0, 0xe0, 0x00, 0x01},
			     expect[] = {0xd0, 0x20, 0x10, 0xa0, 0x90, 0x00},
			     table[] = {0xe0, 0x50, 0x01, 0x60};
	struct eb_shuffle s;

	(void)state;
	assert_int_equal(eb_shuffle_init(&s, EB_SHUFFLE_B, 4), 0);
	for (size_t i = 0; i < ELEMENTSOF(fill); i++)
		eb_shuffle_fill(&s, fill[i]);
	assert_int_equal(eb_shuffle_fill_left(&s), 0);
	for (size_t i = 0; i < ELEMENTSOF(x); i++)
		assert_int_equal(eb_shuffle_next_b(&s, x[i]), expect[i]);
	assert_memory_equal(s.v, table, sizeof(table));
	assert_int_equal(s.y, 0x00);
}

/* A table of one entry is a delay line: M outputs X one step late whatever Y is. */
static void test_k1_delay(void **state)
{
	struct eb_shuffle s;

	(void)state;
	assert_int_equal(eb_shuffle_init(&s, EB_SHUFFLE_M, 1), 0);
	eb_shuffle_fill(&s, 0);
	for (unsigned i = 1; i < 300; i++)
		assert_int_equal(eb_shuffle_next_m(&s, (uint8_t)i, (uint8_t)(i * 37)),
		                 (uint8_t)(i - 1));
}

/* Over a long run the output and what is left in the table (plus, for B, the initial Y, which
 * only ever selects) are exactly the input: a shuffle makes up no bytes, so it cannot make up
 * entropy. And the order does change: a counter does not come out as a counter. */
static void check_permutation(enum eb_shuffle_algorithm a, unsigned k)
{
	size_t in_count[256] = {0}, out_count[256] = {0}, in_order = 0;
	uint64_t st = 42 + k;
	struct eb_shuffle s;
	uint8_t prev = 0;

	assert_int_equal(eb_shuffle_init(&s, a, k), 0);
	for (unsigned i = 0; eb_shuffle_fill_left(&s) > 0; i++) {
		in_count[(uint8_t)i]++;
		eb_shuffle_fill(&s, (uint8_t)i);
	}
	if (a == EB_SHUFFLE_B)
		out_count[s.y]++;
	for (unsigned i = 0; i < 100000; i++) {
		uint8_t x = (uint8_t)(i * 7 + 3), out;

		in_count[x]++;
		out = a == EB_SHUFFLE_M ? eb_shuffle_next_m(&s, x, (uint8_t)splitmix64(&st))
		                        : eb_shuffle_next_b(&s, x);
		out_count[out]++;
		in_order += out == (uint8_t)(prev + 7);
		prev = out;
	}
	for (unsigned j = 0; j < k; j++)
		out_count[s.v[j]]++;
	assert_memory_equal(in_count, out_count, sizeof(in_count));
	/* The input is an arithmetic progression; shuffled, few neighbours keep their step. */
	assert_true(in_order < 100000 / 10);

	eb_shuffle_wipe(&s);
	for (unsigned j = 0; j < k; j++)
		assert_int_equal(s.v[j], 0);
	assert_int_equal(eb_shuffle_fill_left(&s), a == EB_SHUFFLE_M ? k : k + 1);
}

static void test_permutation(void **state)
{
	(void)state;
	check_permutation(EB_SHUFFLE_M, 256);
	check_permutation(EB_SHUFFLE_M, 64);
	check_permutation(EB_SHUFFLE_B, 256);
	check_permutation(EB_SHUFFLE_B, 64);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_init),        cmocka_unit_test(test_m_known),
	    cmocka_unit_test(test_b_known),     cmocka_unit_test(test_k1_delay),
	    cmocka_unit_test(test_permutation),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
