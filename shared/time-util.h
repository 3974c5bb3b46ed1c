/* SPDX-License-Identifier: MIT */
/* The monotonic clock in the units the programs count in, and a sleep on it. */
#pragma once

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in milliseconds: for deadlines and intervals, never for dates. It stops while
 * the system is suspended; eb-sink-kernel compares it with CLOCK_BOOTTIME for that reason. */
uint64_t eb_now_ms(void);

/* Milliseconds from now until deadline (an eb_now_ms() value); 0 once it has passed. */
uint64_t eb_ms_until(uint64_t deadline);

/* CLOCK_REALTIME in milliseconds since the epoch: a date to show, never a deadline. */
uint64_t eb_wall_ms(void);

/* The same in nanoseconds. */
uint64_t eb_now_ns(void);

/* The moment ms from now on clock, as the absolute deadline pthread_cond_timedwait() (on the
 * clock its condattr names) and pthread_timedjoin_np() (CLOCK_REALTIME) take. */
struct timespec eb_timespec_after_ms(clockid_t clock, uint64_t ms);

/* Sleeps ms milliseconds. Returns 0, or -EINTR as soon as a signal handler has run, so that a
 * program whose handler sets a flag sees it at once instead of after the sleep. */
int eb_sleep_ms(uint64_t ms);
