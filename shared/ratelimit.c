/* SPDX-License-Identifier: MIT */
#include "ratelimit.h"

#include <assert.h>
#include <limits.h>

unsigned eb_ratelimit_flush(struct eb_ratelimit *rl, uint64_t now_usec)
{
	unsigned suppressed;

	assert(rl);
	if (rl->n == 0 || now_usec < rl->begin_usec + rl->interval_usec)
		return 0;
	suppressed = rl->n > rl->burst ? rl->n - rl->burst : 0;
	rl->n = 0;
	return suppressed;
}

bool eb_ratelimit_below(struct eb_ratelimit *rl, uint64_t now_usec, unsigned *ret_suppressed)
{
	assert(rl);
	assert(ret_suppressed);
	*ret_suppressed = eb_ratelimit_flush(rl, now_usec);
	if (rl->n == 0)
		rl->begin_usec = now_usec;
	/* Saturate rather than wrap: a flood of UINT_MAX events in one window stays suppressed. */
	if (rl->n < UINT_MAX)
		rl->n++;
	return rl->n <= rl->burst;
}
