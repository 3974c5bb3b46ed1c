/* SPDX-License-Identifier: MIT */
#include "backoff.h"

#include <sys/random.h>

#include "macro.h"
#include "time-util.h"

uint32_t eb_backoff_next(struct eb_backoff *b)
{
	uint32_t jitter, half = b->ceiling_ms / 2, wait;

	/* Jitter only needs to differ between clients, not to be secret: before the CRNG is
	 * ready (early boot, where sinks run) the clock's nanoseconds do. */
	if (getrandom(&jitter, sizeof(jitter), GRND_NONBLOCK) != (ssize_t)sizeof(jitter))
		jitter = (uint32_t)eb_now_ns();
	wait = half + jitter % (b->ceiling_ms - half + 1);
	b->ceiling_ms = b->ceiling_ms > b->max_ms / 2 ? b->max_ms : b->ceiling_ms * 2;
	return wait;
}

void eb_backoff_reset(struct eb_backoff *b)
{
	b->ceiling_ms = b->min_ms;
}
