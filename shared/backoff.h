/* SPDX-License-Identifier: MIT */
/* Exponential backoff with jitter, for clients that retry a broker. */
#pragma once

#include <stdint.h>

/* What a client waits between attempts to reach a broker: from 100 ms, doubling up to 30 s. */
#define EB_BACKOFF_RECONNECT_MIN_MS 100
#define EB_BACKOFF_RECONNECT_MAX_MS 30000

/* Each wait is drawn uniformly from [ceiling/2, ceiling] ("equal jitter"), then the ceiling
 * doubles up to max_ms. The random half spreads out clients that lost the same broker at the
 * same moment, so they do not come back in step; the fixed half keeps any one of them from
 * retrying faster than the schedule. */
struct eb_backoff {
	uint32_t min_ms, max_ms; /* 1 <= min_ms <= max_ms */
	uint32_t ceiling_ms;     /* of the next wait */
};

#define EB_BACKOFF_INIT(min, max)                                                                  \
	((struct eb_backoff){.min_ms = (min), .max_ms = (max), .ceiling_ms = (min)})

/* The next wait in ms, in [ceiling/2, ceiling]; the ceiling then doubles, up to max_ms. The jitter
 * comes from getrandom(), or from the clock when that would block. */
uint32_t eb_backoff_next(struct eb_backoff *b);

/* Starts again from min_ms, after an attempt succeeded. */
void eb_backoff_reset(struct eb_backoff *b);
