/* SPDX-License-Identifier: MIT */
#include "time-util.h"

#include <errno.h>
#include <time.h>

uint64_t eb_now_ns(void)
{
	struct timespec ts;

	/* CLOCK_MONOTONIC cannot fail with a valid pointer on Linux. */
	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t eb_now_ms(void)
{
	return eb_now_ns() / 1000000u;
}

uint64_t eb_wall_ms(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t eb_ms_until(uint64_t deadline)
{
	uint64_t now = eb_now_ms();

	return deadline > now ? deadline - now : 0;
}

struct timespec eb_timespec_after_ms(clockid_t clock, uint64_t ms)
{
	struct timespec ts;

	(void)clock_gettime(clock, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	return ts;
}

int eb_sleep_ms(uint64_t ms)
{
	struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
	                      .tv_nsec = (long)(ms % 1000) * 1000000};

	/* Relative, not TIMER_ABSTIME: the tests fake clock_gettime(), and an absolute deadline
	 * computed from a fake clock would sleep for the difference between the two. */
	return nanosleep(&ts, NULL) < 0 ? -errno : 0;
}
