/* SPDX-License-Identifier: MIT */
/* Tests for sinks/clock-jump.c, the clock trigger's decision: a resume from a saved state (the
 * RTC ahead of CLOCK_BOOTTIME) starts one reseed; a suspend, a clock step and the RTC's whole
 * seconds start none, or at most one; the kernel's fork line answers a jump that waits for it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../sinks/clock-jump.h"

#define S  ((int64_t)1000000000)
#define MS ((int64_t)1000000)

/* The base of the runs: an RTC at an arbitrary date, a guest booted a minute ago. */
#define RTC0  ((int64_t)1796525653)
#define BOOT0 (60 * S)

/* A sample at guest time boot_ns, the RTC read in 1 ms. */
static enum clock_jump_verdict sample(struct clock_jump *c, int64_t rtc_s, int64_t boot_ns,
                                      int64_t *jump_ms)
{
	return clock_jump_sample(c, rtc_s, boot_ns, boot_ns + MS, jump_ms);
}

/* Samples every 5 s over a minute of both clocks running together: never a reseed, whatever the
 * phase of the RTC's second against the samples. */
static void test_steady(void **state)
{
	(void)state;
	for (int64_t phase = 0; phase < S; phase += 50 * MS) {
		struct clock_jump c;
		int64_t j;

		clock_jump_init(&c, 0);
		for (int i = 0; i < 13; i++) {
			int64_t t = i * 5 * S + phase;
			/* The RTC's whole seconds at that instant. */
			int64_t rtc = RTC0 + t / S;

			assert_int_equal(sample(&c, rtc, BOOT0 + t, &j), CLOCK_JUMP_NONE);
			assert_true(j < 1000 && j > -1000);
		}
	}
}

/* A copy resumed 60 s after its state was saved: one reseed, at the first sample after the
 * resume, then none. */
static void test_resume(void **state)
{
	struct clock_jump c;
	int64_t j;

	(void)state;
	clock_jump_init(&c, 0);
	assert_int_equal(sample(&c, RTC0, BOOT0, &j), CLOCK_JUMP_NONE);
	assert_int_equal(j, 0);
	assert_int_equal(sample(&c, RTC0 + 5, BOOT0 + 5 * S, &j), CLOCK_JUMP_NONE);
	/* Saved 2 s after that sample, resumed 60 s later: 5 s of guest time, 65 of the host's. */
	assert_int_equal(sample(&c, RTC0 + 70, BOOT0 + 10 * S, &j), CLOCK_JUMP_RESEED);
	assert_int_equal(j, 60000);
	for (int i = 3; i < 10; i++)
		assert_int_equal(sample(&c, RTC0 + 60 + 5 * i, BOOT0 + 5 * i * S, &j),
		                 CLOCK_JUMP_NONE);
}

/* The bound the docs state: with the worst rounding of the RTC's seconds, a gap of 1.9 s is never
 * a jump, one of 4.1 s always is. */
static void test_threshold(void **state)
{
	(void)state;
	for (int64_t phase = 0; phase < S; phase += 10 * MS) {
		struct clock_jump c;
		int64_t j, t1 = 5 * S + phase;

		/* 1.9 s: the RTC at t1 + 1.9 s, rounded down, against the base's. */
		clock_jump_init(&c, 0);
		sample(&c, RTC0 + phase / S, BOOT0 + phase, &j);
		assert_int_equal(sample(&c, RTC0 + (t1 + 1900 * MS) / S, BOOT0 + t1, &j),
		                 CLOCK_JUMP_NONE);
		clock_jump_init(&c, 0);
		sample(&c, RTC0 + phase / S, BOOT0 + phase, &j);
		assert_int_equal(sample(&c, RTC0 + (t1 + 4100 * MS) / S, BOOT0 + t1, &j),
		                 CLOCK_JUMP_RESEED);
	}
}

/* A suspend moves CLOCK_BOOTTIME with the RTC: no reseed (the kernel reseeds on resume by
 * itself). A step of the wall clock (NTP, date -s) moves neither; the RTC written from it
 * afterwards (the kernel's 11-minute sync, hwclock --systohc) is one jump: one reseed at most,
 * and none when it sets the RTC back. */
static void test_suspend_and_steps(void **state)
{
	struct clock_jump c;
	int64_t j;

	(void)state;
	clock_jump_init(&c, 0);
	sample(&c, RTC0, BOOT0, &j);
	assert_int_equal(sample(&c, RTC0 + 3605, BOOT0 + 3605 * S, &j), CLOCK_JUMP_NONE);
	/* The RTC set an hour ahead: one reseed, and the next samples are calm. */
	assert_int_equal(sample(&c, RTC0 + 7210, BOOT0 + 3610 * S, &j), CLOCK_JUMP_RESEED);
	assert_int_equal(sample(&c, RTC0 + 7215, BOOT0 + 3615 * S, &j), CLOCK_JUMP_NONE);
	assert_int_equal(sample(&c, RTC0 + 7220, BOOT0 + 3620 * S, &j), CLOCK_JUMP_NONE);
	/* And set back: none. */
	assert_int_equal(sample(&c, RTC0 + 3625, BOOT0 + 3625 * S, &j), CLOCK_JUMP_NONE);
	assert_int_equal(j, -3600000);
	assert_int_equal(sample(&c, RTC0 + 3630, BOOT0 + 3630 * S, &j), CLOCK_JUMP_NONE);
}

/* A read that took too long says nothing, and the next sample is measured from none; a failed
 * read likewise. */
static void test_loose_samples(void **state)
{
	struct clock_jump c;
	int64_t j;

	(void)state;
	clock_jump_init(&c, 0);
	sample(&c, RTC0, BOOT0, &j);
	assert_int_equal(
	    clock_jump_sample(&c, RTC0 + 100, BOOT0 + 5 * S, BOOT0 + 5 * S + 600 * MS, &j),
	    CLOCK_JUMP_NONE);
	assert_int_equal(j, 0);
	assert_int_equal(sample(&c, RTC0 + 110, BOOT0 + 10 * S, &j), CLOCK_JUMP_NONE);
	assert_int_equal(j, 0);
	clock_jump_forget(&c);
	assert_int_equal(sample(&c, RTC0 + 200, BOOT0 + 15 * S, &j), CLOCK_JUMP_NONE);
	assert_int_equal(sample(&c, RTC0 + 205, BOOT0 + 20 * S, &j), CLOCK_JUMP_NONE);
	/* An RTC out of all reason is no base either. */
	assert_int_equal(sample(&c, -1, BOOT0 + 25 * S, &j), CLOCK_JUMP_NONE);
	assert_int_equal(sample(&c, RTC0 + 300, BOOT0 + 30 * S, &j), CLOCK_JUMP_NONE);
}

/* With a generation ID device, the kernel's line comes after the resume, before or after the
 * clock's sample sees the jump: either way one reseed, the line's. */
static void test_grace_line_after_jump(void **state)
{
	struct clock_jump c;
	int64_t j;

	(void)state;
	clock_jump_init(&c, 10 * S);
	sample(&c, RTC0, BOOT0, &j);
	assert_int_equal(sample(&c, RTC0 + 65, BOOT0 + 5 * S, &j), CLOCK_JUMP_WAIT);
	assert_int_equal(clock_jump_deadline(&c), BOOT0 + 5 * S + MS / 2 + 10 * S);
	assert_int_equal(clock_jump_tick(&c, BOOT0 + 7 * S), CLOCK_JUMP_NONE);
	/* The line, 3 s later: the watcher started the reseed; the wait is over. */
	clock_jump_fork_line(&c, true, RTC0 + 68, BOOT0 + 8 * S, BOOT0 + 8 * S + MS, &j);
	assert_true(j < 1000 && j > -1000);
	assert_int_equal(clock_jump_deadline(&c), INT64_MAX);
	for (int i = 2; i < 8; i++) {
		assert_int_equal(sample(&c, RTC0 + 60 + 5 * i, BOOT0 + 5 * i * S, &j),
		                 CLOCK_JUMP_NONE);
		assert_int_equal(clock_jump_tick(&c, BOOT0 + 5 * i * S), CLOCK_JUMP_NONE);
	}
}

static void test_grace_line_before_jump(void **state)
{
	struct clock_jump c;
	int64_t j;

	(void)state;
	clock_jump_init(&c, 10 * S);
	sample(&c, RTC0, BOOT0, &j);
	/* Resumed at BOOT0 + 2 s, 60 s after the save; the line at 2.5 s, before the next sample:
	 * the jump is measured with the line and is its. */
	clock_jump_fork_line(&c, true, RTC0 + 62, BOOT0 + 2500 * MS, BOOT0 + 2500 * MS + MS, &j);
	assert_true(j > 59000);
	assert_int_equal(sample(&c, RTC0 + 65, BOOT0 + 5 * S, &j), CLOCK_JUMP_NONE);
	assert_int_equal(clock_jump_tick(&c, BOOT0 + 30 * S), CLOCK_JUMP_NONE);
}

/* No line comes (a loadvm in the same QEMU process keeps its generation ID): the reseed starts
 * once the grace runs out, once, and a second jump while it waits does not put it off. */
static void test_grace_no_line(void **state)
{
	struct clock_jump c;
	int64_t j;

	(void)state;
	clock_jump_init(&c, 10 * S);
	sample(&c, RTC0, BOOT0, &j);
	assert_int_equal(sample(&c, RTC0 + 65, BOOT0 + 5 * S, &j), CLOCK_JUMP_WAIT);
	assert_int_equal(sample(&c, RTC0 + 130, BOOT0 + 10 * S, &j), CLOCK_JUMP_WAIT);
	assert_int_equal(clock_jump_tick(&c, BOOT0 + 15 * S), CLOCK_JUMP_NONE);
	assert_int_equal(clock_jump_tick(&c, BOOT0 + 15 * S + MS), CLOCK_JUMP_RESEED);
	assert_int_equal(clock_jump_tick(&c, BOOT0 + 16 * S), CLOCK_JUMP_NONE);
	assert_int_equal(sample(&c, RTC0 + 135, BOOT0 + 15 * S, &j), CLOCK_JUMP_NONE);
	assert_int_equal(clock_jump_deadline(&c), INT64_MAX);
}

/* A fork line read before the state was saved (the original's own fork, just before a snapshot
 * of it) does not answer the jump of a later resume: measured from the line, the copy's jump is
 * a fork of its own. */
static void test_stale_line(void **state)
{
	struct clock_jump c;
	int64_t j;

	(void)state;
	clock_jump_init(&c, 10 * S);
	sample(&c, RTC0, BOOT0, &j);
	clock_jump_fork_line(&c, true, RTC0 + 2, BOOT0 + 2 * S, BOOT0 + 2 * S + MS, &j);
	/* Saved at 3 s, resumed 60 s later, no new line (same generation ID). */
	assert_int_equal(sample(&c, RTC0 + 65, BOOT0 + 5 * S, &j), CLOCK_JUMP_WAIT);
	assert_int_equal(clock_jump_tick(&c, BOOT0 + 16 * S), CLOCK_JUMP_RESEED);
	/* A line whose RTC could not be read answers a waiting jump and leaves no base. */
	assert_int_equal(sample(&c, RTC0 + 200, BOOT0 + 20 * S, &j), CLOCK_JUMP_WAIT);
	clock_jump_fork_line(&c, false, 0, 0, 0, &j);
	assert_int_equal(clock_jump_deadline(&c), INT64_MAX);
	assert_int_equal(sample(&c, RTC0 + 400, BOOT0 + 25 * S, &j), CLOCK_JUMP_NONE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_steady),
	    cmocka_unit_test(test_resume),
	    cmocka_unit_test(test_threshold),
	    cmocka_unit_test(test_suspend_and_steps),
	    cmocka_unit_test(test_loose_samples),
	    cmocka_unit_test(test_grace_line_after_jump),
	    cmocka_unit_test(test_grace_line_before_jump),
	    cmocka_unit_test(test_grace_no_line),
	    cmocka_unit_test(test_stale_line),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
