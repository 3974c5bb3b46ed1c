/* SPDX-License-Identifier: MIT */
/* A window-and-burst rate limit for log lines a peer can cause. Pure: the caller gives the time. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct eb_ratelimit {
	uint64_t interval_usec; /* the window */
	unsigned burst;         /* events let through per window */
	uint64_t begin_usec;    /* when the current window began; 0 before the first event */
	unsigned n;             /* events in the current window, let through or not */
};

#define EB_RATELIMIT_INIT(interval, b)                                                             \
	((struct eb_ratelimit){.interval_usec = (interval), .burst = (b)})

/* Counts an event at now_usec. Returns true when it may be logged. When a window with suppressed
 * events has ended, *ret_suppressed says how many were held back in it (else 0), so the caller
 * can log one summary line before this event's. */
bool eb_ratelimit_below(struct eb_ratelimit *rl, uint64_t now_usec, unsigned *ret_suppressed);

/* Ends the current window if its time is up: returns how many events it held back (0 if none or
 * if the window is still open). For a timer that summarises a burst no later event follows. */
unsigned eb_ratelimit_flush(struct eb_ratelimit *rl, uint64_t now_usec);
