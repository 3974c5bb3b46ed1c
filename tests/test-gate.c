/* SPDX-License-Identifier: MIT */
/* Tests for shared/gate.c: the credit arithmetic (H in millibits, fractions carried, caps), the
 * health gating (nothing credited or sent in start-up or quarantine, one alarm per episode, the
 * samples before a false alarm forfeited, re-admission), packing of narrow samples, Von Neumann
 * debiasing, and refusals that leave the gate untouched. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gate.h"
#include "macro.h"
#include "splitmix64.h"
#include "vonneumann.h"

#define BLOCK EB_GATE_BLOCK_DEFAULT

static void test_credit_arithmetic(void **state)
{
	uint64_t carry = 0;

	(void)state;

	/* ok x H, in whole bits. */
	assert_int_equal(eb_gate_credit(4096, 4000, 4096, 8000, &carry), 16384);
	assert_int_equal(carry, 0);
	/* Fractions of a bit carry over: 3 x 0.5 = 1.5 -> 1, then 1 x 0.5 + 0.5 -> 1. */
	assert_int_equal(eb_gate_credit(3, 500, 3, 8000, &carry), 1);
	assert_int_equal(carry, 500);
	assert_int_equal(eb_gate_credit(1, 500, 1, 8000, &carry), 1);
	assert_int_equal(carry, 0);
	/* 0.125 bits per sample: eight samples make one bit, seven make none yet. */
	assert_int_equal(eb_gate_credit(7, 125, 1, 8000, &carry), 0);
	assert_int_equal(carry, 875);
	assert_int_equal(eb_gate_credit(1, 125, 1, 8000, &carry), 1);
	assert_int_equal(carry, 0);

	/* The cap per byte binds, and the earnings beyond it are not saved. */
	assert_int_equal(eb_gate_credit(4096, 8000, 4096, 1000, &carry), 4096);
	assert_int_equal(carry, 0);
	assert_int_equal(eb_gate_credit(4096, 7500, 4096, 2500, &carry), 10240);
	assert_int_equal(carry, 0);
	/* So does 8 bits per byte sent: 1-bit samples packed 8 to a byte at H = 1 fill it
	 * exactly, and a claim can never exceed what the bytes can carry. */
	assert_int_equal(eb_gate_credit(4096, 1000, 512, 8000, &carry), 4096);
	assert_int_equal(eb_gate_credit(4096, 1000, 100, 8000, &carry), 800);
	/* Nothing admitted, nothing credited; nothing claimed likewise. */
	assert_int_equal(eb_gate_credit(0, 8000, 4096, 8000, &carry), 0);
	assert_int_equal(eb_gate_credit(4096, 0, 4096, 8000, &carry), 0);
	/* The largest block at the largest claim stays exact. */
	assert_int_equal(eb_gate_credit(EB_GATE_BLOCK_MAX, 8000, EB_GATE_BLOCK_MAX, 8000, &carry),
	                 EB_GATE_BLOCK_MAX * 8);
}

/* Over many blocks with no cap binding, the total credit is exactly floor(total ok x H): the
 * carry loses nothing and invents nothing. */
static void test_credit_sums(void **state)
{
	uint64_t seed = 42;

	(void)state;

	for (int round = 0; round < 200; round++) {
		uint32_t h = (uint32_t)(splitmix64(&seed) % 8000) + 1;
		uint64_t carry = 0, total_ok = 0, total = 0;

		for (int i = 0; i < 100; i++) {
			uint64_t ok = splitmix64(&seed) % 5000;

			total_ok += ok;
			total += eb_gate_credit(ok, h, 8192, 8000, &carry);
		}
		assert_int_equal(total, total_ok * h / 1000);
	}
}

static void init(struct eb_gate *g, unsigned bits, uint32_t h, uint32_t cap, bool vn)
{
	struct eb_gate_params p = {
	    .bits = bits, .h_mbits = h, .cap_mbits_per_byte = cap, .vonneumann = vn};

	assert_int_equal(eb_gate_init(g, &p), 0);
}

static void test_startup_and_good_data(void **state)
{
	static uint8_t samples[BLOCK], out[BLOCK + 1];
	struct eb_gate g;
	struct eb_gate_block b;
	uint64_t seed = 1;

	(void)state;

	init(&g, 8, 4000, 8000, false);
	assert_true(g.tested);

	/* The first block holds the 1024-sample start-up test: only the rest is credited. */
	splitmix64_samples(&seed, samples, BLOCK, 8);
	assert_int_equal(eb_gate_feed(&g, samples, BLOCK, out, sizeof(out), &b), 0);
	assert_int_equal(b.ok, BLOCK - 1024);
	assert_int_equal(b.credit, (BLOCK - 1024) * 4);
	assert_int_equal(b.len, BLOCK);
	assert_memory_equal(out, samples, BLOCK);
	assert_true(b.send);
	assert_true(b.startup_done);
	assert_false(b.alarm);
	assert_false(b.readmitted);

	/* Then every sample. */
	for (int i = 0; i < 20; i++) {
		splitmix64_samples(&seed, samples, BLOCK, 8);
		assert_int_equal(eb_gate_feed(&g, samples, BLOCK, out, sizeof(out), &b), 0);
		assert_int_equal(b.ok, BLOCK);
		assert_int_equal(b.credit, BLOCK * 4);
		assert_false(b.startup_done);
	}
}

/* 8-bit samples tested in place, out == samples, as the source runtime does: the same verdicts
 * and credit as from a separate buffer, and the bytes left as they were. */
static void test_in_place(void **state)
{
	static uint8_t samples[BLOCK], copy[BLOCK], out[BLOCK + 1];
	struct eb_gate g, h;
	struct eb_gate_block b, c;
	uint64_t seed = 5;

	(void)state;

	init(&g, 8, 6000, 8000, false);
	init(&h, 8, 6000, 8000, false);
	for (int i = 0; i < 10; i++) {
		splitmix64_samples(&seed, samples, BLOCK, 8);
		if (i == 4)
			memset(samples + 100, 0x17, 50); /* an alarm in the middle */
		memcpy(copy, samples, BLOCK);
		assert_int_equal(eb_gate_feed(&g, samples, BLOCK, out, sizeof(out), &b), 0);
		assert_int_equal(eb_gate_feed(&h, copy, BLOCK, copy, BLOCK, &c), 0);
		assert_int_equal(c.len, b.len);
		assert_int_equal(c.ok, b.ok);
		assert_int_equal(c.credit, b.credit);
		assert_int_equal(c.send, b.send);
		assert_int_equal(c.alarm, b.alarm);
		assert_memory_equal(copy, samples, BLOCK);
	}
	assert_int_equal(h.health.episodes, 1);
}

static void test_startup_short_blocks(void **state)
{
	uint8_t samples[256], out[257];
	struct eb_gate g;
	struct eb_gate_block b;
	uint64_t seed = 2;

	(void)state;

	/* Blocks that fall wholly within the start-up test earn nothing and are not sent. */
	init(&g, 8, 2000, 8000, false);
	for (int i = 0; i < 4; i++) {
		splitmix64_samples(&seed, samples, sizeof(samples), 8);
		assert_int_equal(eb_gate_feed(&g, samples, sizeof(samples), out, sizeof(out), &b),
		                 0);
		assert_int_equal(b.ok, 0);
		assert_int_equal(b.credit, 0);
		assert_false(b.send);
		assert_int_equal(b.startup_done, i == 3);
	}
	splitmix64_samples(&seed, samples, sizeof(samples), 8);
	assert_int_equal(eb_gate_feed(&g, samples, sizeof(samples), out, sizeof(out), &b), 0);
	assert_int_equal(b.credit, 256 * 2);
	assert_true(b.send);
}

static void test_stuck_then_recovered(void **state)
{
	static uint8_t samples[BLOCK], out[BLOCK + 1];
	struct eb_gate g;
	struct eb_gate_block b;
	uint64_t seed = 3;
	unsigned alarms = 0, clean;

	(void)state;

	init(&g, 8, 4000, 8000, false);
	splitmix64_samples(&seed, samples, BLOCK, 8);
	assert_int_equal(eb_gate_feed(&g, samples, BLOCK, out, sizeof(out), &b), 0);
	assert_true(b.send);

	/* A stuck source: one alarm opens the episode, then silence; nothing credited or sent. */
	memset(samples, 0, sizeof(samples));
	for (int i = 0; i < 10; i++) {
		assert_int_equal(eb_gate_feed(&g, samples, BLOCK, out, sizeof(out), &b), 0);
		alarms += b.alarm;
		assert_int_equal(b.ok, 0);
		assert_int_equal(b.credit, 0);
		assert_false(b.send);
		assert_false(b.readmitted);
	}
	assert_int_equal(alarms, 1);
	assert_int_equal(g.health.episodes, 1);
	assert_int_equal(g.health.failure.test, EB_HEALTH_TEST_RCT);
	assert_int_equal(g.health.failure.cutoff, 6); /* RCT at H = 4 */
	assert_int_equal(g.health.failure.count, 6);
	assert_int_equal(g.health.failure.value, 0);
	/* The first zero is sample 4096; the sixth in a row fires. */
	assert_int_equal(g.health.failure.sample, BLOCK + 5);

	/* Good data again: re-admitted after 1024 clean samples, credited after that. The stuck
	 * samples after its last alarm (fewer than the cutoff) were clean already. */
	clean = g.health.clean;
	assert_true(clean < 6);
	splitmix64_samples(&seed, samples, BLOCK, 8);
	assert_int_equal(eb_gate_feed(&g, samples, BLOCK, out, sizeof(out), &b), 0);
	assert_true(b.readmitted);
	assert_false(b.alarm);
	assert_false(b.startup_done);
	assert_int_equal(b.ok, BLOCK - (1024 - clean));
	assert_int_equal(b.credit, (BLOCK - (1024 - clean)) * 4);
	assert_true(b.send);
}

static void test_alarm_forfeits_block(void **state)
{
	static uint8_t samples[BLOCK], out[BLOCK + 1];
	struct eb_gate g;
	struct eb_gate_block b;
	uint64_t seed = 4;
	const size_t at = 2000;

	(void)state;

	init(&g, 8, 4000, 8000, false);
	splitmix64_samples(&seed, samples, BLOCK, 8);
	assert_int_equal(eb_gate_feed(&g, samples, BLOCK, out, sizeof(out), &b), 0);

	/* A run of six equal samples ends at index at: the 2000 good samples before it forfeit
	 * their credit, the 1024 after it re-admit the source, and only the rest are credited. */
	splitmix64_samples(&seed, samples, BLOCK, 8);
	for (size_t i = at - 5; i <= at; i++)
		samples[i] = 0xa5;
	samples[at - 6] = 0x5a;
	samples[at + 1] = 0x5a;
	assert_int_equal(eb_gate_feed(&g, samples, BLOCK, out, sizeof(out), &b), 0);
	assert_true(b.alarm);
	assert_true(b.readmitted);
	assert_int_equal(b.ok, BLOCK - (at + 1) - 1024);
	assert_int_equal(b.credit, (BLOCK - (at + 1) - 1024) * 4);
	assert_int_equal(g.health.failure.sample, BLOCK + at);
}

static void test_cap_and_claim(void **state)
{
	static uint8_t samples[BLOCK], out[BLOCK + 1];
	struct eb_gate g;
	struct eb_gate_block b;
	uint64_t seed = 5;

	(void)state;

	/* A low-trust source claiming 7 bits per byte under a 1-bit cap earns 1 bit per byte. */
	init(&g, 8, 7000, 1000, false);
	for (int i = 0; i < 3; i++) {
		splitmix64_samples(&seed, samples, BLOCK, 8);
		assert_int_equal(eb_gate_feed(&g, samples, BLOCK, out, sizeof(out), &b), 0);
	}
	assert_int_equal(b.credit, BLOCK);

	/* A source that claims nothing is not tested, sends everything, earns nothing, even when
	 * it is stuck. */
	init(&g, 8, 0, 8000, false);
	assert_false(g.tested);
	memset(samples, 0, sizeof(samples));
	assert_int_equal(eb_gate_feed(&g, samples, BLOCK, out, sizeof(out), &b), 0);
	assert_true(b.send);
	assert_false(b.alarm);
	assert_int_equal(b.len, BLOCK);
	assert_int_equal(b.credit, 0);
}

static void test_packing(void **state)
{
	const uint8_t four[] = {0x1, 0x2, 0x3, 0xf, 0x0};
	const uint8_t ones[] = {1, 0, 1, 1, 0, 0, 0, 1, 1, 1};
	const uint8_t threes[] = {7, 0, 5, 1, 2, 3, 4, 6};
	uint8_t out[16];
	struct eb_gate g;
	struct eb_gate_block b;

	(void)state;

	init(&g, 4, 0, 8000, false);
	assert_int_equal(eb_gate_out_max(&g, 5), 3);
	assert_int_equal(eb_gate_feed(&g, four, sizeof(four), out, sizeof(out), &b), 0);
	assert_int_equal(b.len, 3);
	assert_memory_equal(out, ((const uint8_t[]){0x12, 0x3f, 0x00}), 3);

	init(&g, 1, 0, 8000, false);
	assert_int_equal(eb_gate_feed(&g, ones, sizeof(ones), out, sizeof(out), &b), 0);
	assert_int_equal(b.len, 2);
	assert_memory_equal(out, ((const uint8_t[]){0xb1, 0xc0}), 2);

	/* 111 000 101 001 010 011 100 110 = 1110 0010 1001 0100 1110 0110 */
	init(&g, 3, 0, 8000, false);
	assert_int_equal(eb_gate_feed(&g, threes, sizeof(threes), out, sizeof(out), &b), 0);
	assert_int_equal(b.len, 3);
	assert_memory_equal(out, ((const uint8_t[]){0xe2, 0x94, 0xe6}), 3);
}

static void test_vonneumann(void **state)
{
	static uint8_t bits[8192], out[8192], expect[8192];
	struct eb_vonneumann vn;
	struct eb_gate g;
	struct eb_gate_block b;
	uint64_t seed = 6;
	size_t expect_len;

	(void)state;

	/* The gate's output is the debiaser's, byte for byte. */
	init(&g, 1, 500, 8000, true);
	eb_vonneumann_init(&vn);
	for (int i = 0; i < 4; i++) {
		splitmix64_samples(&seed, bits, sizeof(bits), 1);
		assert_int_equal(eb_gate_feed(&g, bits, sizeof(bits), out, sizeof(out), &b), 0);
		assert_int_equal(eb_vonneumann_feed_bits(&vn, bits, sizeof(bits), expect,
		                                         sizeof(expect), &expect_len),
		                 0);
		assert_int_equal(b.len, expect_len);
		assert_memory_equal(out, expect, expect_len);
		/* Credit follows the raw samples' H, within what the debiased bytes carry. */
		assert_int_equal(b.credit, MIN(b.ok * 500 / 1000, b.len * 8));
	}
	assert_true(b.credit > 0);

	/* Known pairs: 10 -> 1, 01 -> 0, 00 and 11 dropped. */
	init(&g, 1, 0, 8000, true);
	assert_int_equal(eb_gate_feed(&g, (const uint8_t[]){1, 0, 1, 0, 0, 0, 1, 0, 1, 1,
	                                                    1, 0, 0, 1, 0, 1, 1, 0, 1, 0},
	                              20, out, sizeof(out), &b),
	                 0);
	assert_int_equal(b.len, 1);
	assert_int_equal(out[0], 0xf3); /* 1 1 - 1 - 1 0 0 1 1 */
}

static void test_refusals(void **state)
{
	struct eb_gate_params p = {.bits = 8, .h_mbits = 4000, .cap_mbits_per_byte = 8000};
	uint8_t samples[64] = {}, out[64];
	struct eb_gate g, copy;
	struct eb_gate_block b;

	(void)state;

	p.vonneumann = true;
	assert_int_equal(eb_gate_init(&g, &p), -EINVAL);
	p.vonneumann = false;
	p.h_mbits = 8001;
	assert_int_equal(eb_gate_init(&g, &p), -EINVAL);
	p.h_mbits = 4000;
	p.cap_mbits_per_byte = 8001;
	assert_int_equal(eb_gate_init(&g, &p), -EINVAL);
	p.cap_mbits_per_byte = 8000;
	p.bits = 0;
	assert_int_equal(eb_gate_init(&g, &p), -EINVAL);
	p.bits = 2;
	p.h_mbits = 2001;
	assert_int_equal(eb_gate_init(&g, &p), -EINVAL);
	/* An H so small the tests have no cutoff. */
	p.h_mbits = 1;
	assert_int_equal(eb_gate_init(&g, &p), -ERANGE);

	/* Refused blocks leave no trace. */
	init(&g, 2, 1000, 8000, false);
	copy = g;
	samples[10] = 4;
	assert_int_equal(eb_gate_feed(&g, samples, sizeof(samples), out, sizeof(out), &b), -EDOM);
	assert_memory_equal(&g, &copy, sizeof(g));
	assert_int_equal(eb_gate_feed(&g, samples, sizeof(samples), out, 15, &b), -ENOBUFS);
	assert_int_equal(eb_gate_feed(&g, samples, EB_GATE_BLOCK_MAX + 1, out, SIZE_MAX, &b),
	                 -E2BIG);
	assert_memory_equal(&g, &copy, sizeof(g));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_credit_arithmetic),
	    cmocka_unit_test(test_credit_sums),
	    cmocka_unit_test(test_startup_and_good_data),
	    cmocka_unit_test(test_in_place),
	    cmocka_unit_test(test_startup_short_blocks),
	    cmocka_unit_test(test_stuck_then_recovered),
	    cmocka_unit_test(test_alarm_forfeits_block),
	    cmocka_unit_test(test_cap_and_claim),
	    cmocka_unit_test(test_packing),
	    cmocka_unit_test(test_vonneumann),
	    cmocka_unit_test(test_refusals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
