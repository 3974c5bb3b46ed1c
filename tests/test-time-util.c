/* SPDX-License-Identifier: MIT */
/* time-util: the monotonic clock in ms and ns, absolute deadlines, and a sleep that a signal
 * handler cuts short. Bounds are one-sided or generous: they hold on a loaded machine. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>

#include <cmocka.h>

#include "time-util.h"

static void test_clock(void **state)
{
	uint64_t ns0, ms, ns1, prev;

	(void)state;
	ns0 = eb_now_ns();
	ms = eb_now_ms();
	ns1 = eb_now_ns();
	/* The same clock in two units: ms read between two ns readings lies between them. */
	assert_true(ns0 / 1000000 <= ms && ms <= ns1 / 1000000);
	prev = eb_now_ns();
	for (int i = 0; i < 1000; i++) {
		uint64_t t = eb_now_ns();

		assert_true(t >= prev);
		prev = t;
	}
}

static void test_sleep(void **state)
{
	uint64_t t0, t1;

	(void)state;
	t0 = eb_now_ms();
	assert_int_equal(eb_sleep_ms(30), 0);
	t1 = eb_now_ms();
	assert_true(t1 - t0 >= 30);
	assert_int_equal(eb_sleep_ms(0), 0);
}

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

/* A handler that ran ends the sleep at once, so that a program sees its flag. */
static void test_sleep_interrupted(void **state)
{
	struct sigaction sa = {.sa_handler = on_alarm}, old;
	struct itimerval it = {.it_value = {.tv_usec = 20000}};
	uint64_t t0, t1;

	(void)state;
	assert_int_equal(sigaction(SIGALRM, &sa, &old), 0);
	assert_int_equal(setitimer(ITIMER_REAL, &it, NULL), 0);
	t0 = eb_now_ms();
	assert_int_equal(eb_sleep_ms(20000), -EINTR);
	t1 = eb_now_ms();
	assert_int_equal(alarms, 1);
	assert_true(t1 - t0 < 10000);
	assert_int_equal(sigaction(SIGALRM, &old, NULL), 0);
}

static void test_timespec_after(void **state)
{
	static const uint64_t steps[] = {0, 1, 999, 1000, 1001, 2500, 86400000};

	(void)state;
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		struct timespec before, at, after;
		int64_t lo, hi, t;

		clock_gettime(CLOCK_REALTIME, &before);
		at = eb_timespec_after_ms(CLOCK_REALTIME, steps[i]);
		clock_gettime(CLOCK_REALTIME, &after);
		/* Normalised, and ms after a moment between the two readings. */
		assert_true(at.tv_nsec >= 0 && at.tv_nsec < 1000000000);
		lo = (int64_t)before.tv_sec * 1000000000 + before.tv_nsec;
		hi = (int64_t)after.tv_sec * 1000000000 + after.tv_nsec;
		t = (int64_t)at.tv_sec * 1000000000 + at.tv_nsec - (int64_t)steps[i] * 1000000;
		assert_true(t >= lo && t <= hi);
	}
}

/* A deadline ahead counts down from at most its distance; one passed, or now, is 0, never a
 * wrapped-around huge wait. */
static void test_ms_until(void **state)
{
	uint64_t now = eb_now_ms(), left = eb_ms_until(now + 60000);

	(void)state;
	assert_true(left <= 60000 && left > 59000);
	assert_int_equal(eb_ms_until(now - 1), 0);
	assert_int_equal(eb_ms_until(0), 0);
	assert_true(eb_ms_until(UINT64_MAX) > UINT64_MAX - now - 1000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_clock),
	    cmocka_unit_test(test_sleep),
	    cmocka_unit_test(test_sleep_interrupted),
	    cmocka_unit_test(test_timespec_after),
	    cmocka_unit_test(test_ms_until),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
