/* SPDX-License-Identifier: MIT */
/* Tests for shared/vonneumann.c: known bit strings to known bytes, state carried across calls
 * (an odd bit, a partial byte), packed and one-bit-per-byte input agreeing however they are
 * split, and the bias actually going away. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "macro.h"
#include "splitmix64.h"
#include "vonneumann.h"

/* "0110 11..." as one-bit samples; spaces and anything else are skipped. */
static size_t bits_of(const char *s, uint8_t *bits)
{
	size_t n = 0;

	for (; *s; s++)
		if (*s == '0' || *s == '1')
			bits[n++] = (uint8_t)(*s - '0');
	return n;
}

static void check_bits(const char *in, const uint8_t *expect, size_t expect_len)
{
	struct eb_vonneumann vn;
	uint8_t bits[256], out[32];
	size_t n = bits_of(in, bits), len = 99;

	eb_vonneumann_init(&vn);
	assert_int_equal(eb_vonneumann_feed_bits(&vn, bits, n, out, sizeof(out), &len), 0);
	assert_int_equal(len, expect_len);
	assert_memory_equal(out, expect, expect_len);
}

static void test_known_bits(void **state)
{
	(void)state;

	/* 10 -> 1, 01 -> 0. */
	check_bits("10 10 10 10 01 01 01 01", (const uint8_t[]){0xf0}, 1);
	check_bits("01 10 01 10 01 10 01 10", (const uint8_t[]){0x55}, 1);
	/* 00 and 11 are dropped wherever they fall. */
	check_bits("00 10 11 10 00 11 10 10 01 01 01 11 11 00 01", (const uint8_t[]){0xf0}, 1);
	check_bits("00 11 00 11 11 00", NULL, 0);
	/* Seven output bits are not a byte yet. */
	check_bits("10 10 10 10 10 10 10", NULL, 0);
	check_bits("10 10 10 10 10 10 10 10 01 01 01 01 01 01 01 01 10",
	           (const uint8_t[]){0xff, 0x00}, 2);
}

static void test_known_bytes(void **state)
{
	struct eb_vonneumann vn;
	uint8_t out[8];
	size_t len;

	(void)state;

	eb_vonneumann_init(&vn);
	/* 0xaa = 10 10 10 10 -> 1111, 0x55 -> 0000. */
	assert_int_equal(
	    eb_vonneumann_feed_bytes(&vn, (const uint8_t[]){0xaa, 0x55}, 2, out, sizeof(out), &len),
	    0);
	assert_int_equal(len, 1);
	assert_int_equal(out[0], 0xf0);

	/* 0x96 = 10 01 01 10 -> 1001, 0x69 = 01 10 10 01 -> 0110; 0x00 and 0xff give nothing. */
	assert_int_equal(eb_vonneumann_feed_bytes(&vn, (const uint8_t[]){0x96, 0x00, 0xff, 0x69}, 4,
	                                          out, sizeof(out), &len),
	                 0);
	assert_int_equal(len, 1);
	assert_int_equal(out[0], 0x96);

	/* 0x9c = 10 01 11 00 -> 10: a partial byte waits for the next call. */
	assert_int_equal(eb_vonneumann_feed_bytes(&vn, (const uint8_t[]){0x9c, 0x9c, 0x9c}, 3, out,
	                                          sizeof(out), &len),
	                 0);
	assert_int_equal(len, 0);
	assert_int_equal(vn.n_acc, 6);
	assert_int_equal(
	    eb_vonneumann_feed_bytes(&vn, (const uint8_t[]){0x9c}, 1, out, sizeof(out), &len), 0);
	assert_int_equal(len, 1);
	assert_int_equal(out[0], 0xaa);
}

static void test_carry_across_calls(void **state)
{
	struct eb_vonneumann vn;
	uint8_t bits[64], out[8];
	size_t n, len;

	(void)state;

	/* An odd bit waits: "1" then "0" is the pair 10. */
	eb_vonneumann_init(&vn);
	n = bits_of("10 10 10 10 10 10 10 1", bits);
	assert_int_equal(eb_vonneumann_feed_bits(&vn, bits, n, out, sizeof(out), &len), 0);
	assert_int_equal(len, 0);
	assert_true(vn.has_pending);
	n = bits_of("0", bits);
	assert_int_equal(eb_vonneumann_feed_bits(&vn, bits, n, out, sizeof(out), &len), 0);
	assert_int_equal(len, 1);
	assert_int_equal(out[0], 0xff);
	assert_false(vn.has_pending);

	/* An odd bit before packed bytes shifts their pairing: 1 + 0x2a (0010 1010) + 0xd5
	 * (1101 0101) is 10 01 01 01 01 10 10 10 + an odd 1 -> 1000 0111. */
	eb_vonneumann_init(&vn);
	n = bits_of("1", bits);
	assert_int_equal(eb_vonneumann_feed_bits(&vn, bits, n, out, sizeof(out), &len), 0);
	assert_int_equal(
	    eb_vonneumann_feed_bytes(&vn, (const uint8_t[]){0x2a, 0xd5}, 2, out, sizeof(out), &len),
	    0);
	assert_int_equal(len, 1);
	assert_int_equal(out[0], 0x87);
	assert_true(vn.has_pending);
	assert_int_equal(vn.pending, 1);
}

static void assert_same_state(const struct eb_vonneumann *a, const struct eb_vonneumann *b)
{
	assert_int_equal(a->has_pending, b->has_pending);
	if (a->has_pending)
		assert_int_equal(a->pending, b->pending);
	assert_int_equal(a->n_acc, b->n_acc);
	assert_int_equal(a->acc, b->acc);
}

static void test_errors_leave_state(void **state)
{
	struct eb_vonneumann vn, before;
	uint8_t bits[64], out[8];
	size_t n, len = 99;

	(void)state;

	eb_vonneumann_init(&vn);
	n = bits_of("10 10 10 1", bits);
	assert_int_equal(eb_vonneumann_feed_bits(&vn, bits, n, out, sizeof(out), &len), 0);
	before = vn;
	len = 99;

	bits[3] = 2;
	assert_int_equal(eb_vonneumann_feed_bits(&vn, bits, n, out, sizeof(out), &len), -EDOM);
	assert_same_state(&vn, &before);
	assert_int_equal(len, 99);

	/* Three pending output bits and one pending input bit: 9 more bits make 5 pairs, so 8
	 * output bits at most, one byte; out must hold it even if the data would not fill it. */
	memset(bits, 0, sizeof(bits));
	assert_int_equal(eb_vonneumann_out_max(&vn, 9), 1);
	assert_int_equal(eb_vonneumann_out_max(&vn, 8), 0);
	assert_int_equal(eb_vonneumann_feed_bits(&vn, bits, 9, out, 0, &len), -ENOBUFS);
	assert_same_state(&vn, &before);
	assert_int_equal(eb_vonneumann_feed_bytes(&vn, bits, 2, out, 0, &len), -ENOBUFS);
	assert_int_equal(eb_vonneumann_feed_bits(&vn, bits, 8, NULL, 0, &len), 0);
	assert_int_equal(len, 0);
	/* No overflow near the top of size_t: 2^63 pairs with the odd bit, plus 4 bits held. */
	assert_true(vn.has_pending);
	assert_int_equal(vn.n_acc, 4);
	assert_int_equal(eb_vonneumann_out_max(&vn, SIZE_MAX), (SIZE_MAX / 2 + 1 + 4) / 8);
}

/* out_max is tight: alternating bits make one output bit per pair. */
static void test_out_max_tight(void **state)
{
	struct eb_vonneumann vn;
	uint8_t bits[1001], out[128];
	size_t len;

	(void)state;

	for (size_t i = 0; i < sizeof(bits); i++)
		bits[i] = i % 2 == 0;
	eb_vonneumann_init(&vn);
	assert_int_equal(eb_vonneumann_out_max(&vn, sizeof(bits)), 500 / 8);
	assert_int_equal(eb_vonneumann_feed_bits(&vn, bits, sizeof(bits), out, 500 / 8, &len), 0);
	assert_int_equal(len, 500 / 8);
	for (size_t i = 0; i < len; i++)
		assert_int_equal(out[i], 0xff);
}

/* Packed bytes and the same bits one per byte, each split into random calls (odd lengths
 * included), give the same output stream. */
static void test_bits_and_bytes_agree(void **state)
{
	static uint8_t data[4096], bits[4096 * 8], a[4096], b[4096];
	struct eb_vonneumann va, vb;
	uint64_t seed = 7;
	size_t na = 0, nb = 0, len;

	(void)state;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)splitmix64(&seed);
	for (size_t i = 0; i < sizeof(bits); i++)
		bits[i] = data[i / 8] >> (7 - i % 8) & 1;

	eb_vonneumann_init(&va);
	for (size_t i = 0; i < sizeof(data);) {
		/* MIN() evaluates its arguments twice: draw first. */
		size_t r = (size_t)(splitmix64(&seed) % 50), m = MIN(sizeof(data) - i, r);

		assert_int_equal(
		    eb_vonneumann_feed_bytes(&va, data + i, m, a + na, sizeof(a) - na, &len), 0);
		na += len;
		i += m;
	}
	eb_vonneumann_init(&vb);
	for (size_t i = 0; i < sizeof(bits);) {
		/* MIN() evaluates its arguments twice: draw first. */
		size_t r = (size_t)(splitmix64(&seed) % 77), m = MIN(sizeof(bits) - i, r);

		assert_int_equal(
		    eb_vonneumann_feed_bits(&vb, bits + i, m, b + nb, sizeof(b) - nb, &len), 0);
		nb += len;
		i += m;
	}
	assert_int_equal(na, nb);
	assert_memory_equal(a, b, na);
	assert_same_state(&va, &vb);
	/* A quarter of the pairs of uniform bits survive, one bit each. */
	assert_true(na > sizeof(data) * 8 / 4 / 8 * 9 / 10);
}

/* Independent bits that are 1 four times in five come out balanced. */
static void test_removes_bias(void **state)
{
	static uint8_t bits[1000000], out[1000000 / 16 + 1];
	struct eb_vonneumann vn;
	uint64_t seed = 8;
	size_t len, ones = 0;

	(void)state;

	for (size_t i = 0; i < sizeof(bits); i++)
		bits[i] = splitmix64(&seed) % 5 != 0;
	eb_vonneumann_init(&vn);
	assert_int_equal(eb_vonneumann_feed_bits(&vn, bits, sizeof(bits), out, sizeof(out), &len),
	                 0);
	/* 2 p (1 - p) = 0.32 of the 500000 pairs survive. */
	assert_true(len * 8 > 150000 && len * 8 < 170000);
	for (size_t i = 0; i < len; i++)
		ones += (size_t)__builtin_popcount(out[i]);
	/* The fraction of ones has a standard deviation of 0.0013 here; allow four. */
	assert_true(ones * 1000 > len * 8 * 495 && ones * 1000 < len * 8 * 505);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_known_bits),         cmocka_unit_test(test_known_bytes),
	    cmocka_unit_test(test_carry_across_calls), cmocka_unit_test(test_errors_leave_state),
	    cmocka_unit_test(test_out_max_tight),      cmocka_unit_test(test_bits_and_bytes_agree),
	    cmocka_unit_test(test_removes_bias),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
