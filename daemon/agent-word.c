/* SPDX-License-Identifier: MIT */
#include "agent-word.h"

#include <stdio.h>

#include "macro.h"

enum agent_word agent_decide(struct agent_state *st, const struct agent_view *v,
                             unsigned *ret_weight)
{
	uint64_t pct;

	/* Every level moves the hysteresis, whatever is answered: a drain or a stop that ends
	 * finds it where the level left it. */
	if (v->level_bits < v->empty_bits)
		st->empty = true;
	else if (v->level_bits >= v->refilled_bits)
		st->empty = false;
	*ret_weight = 0;
	if (v->stopping)
		return AGENT_MAINT;
	if (v->drained || st->empty)
		return AGENT_DRAIN;
	pct = v->capacity_bits ? v->level_bits * 100 / v->capacity_bits : 0;
	*ret_weight = (unsigned)MAX(MIN(pct, 100u), 1u);
	return AGENT_READY;
}

int agent_format(enum agent_word word, unsigned weight, char *buf, size_t size)
{
	int n = -1;

	switch (word) {
	case AGENT_READY:
		/* "ready" in every answer that is not a drain: HAProxy leaves DRAIN and MAINT on
		 * "ready" alone, whatever the weight says. */
		n = snprintf(buf, size, "%u%% ready\n", weight);
		break;
	case AGENT_DRAIN:
		n = snprintf(buf, size, "drain\n");
		break;
	case AGENT_MAINT:
		n = snprintf(buf, size, "maint\n");
		break;
	case _AGENT_WORD_MAX:
	case _AGENT_WORD_INVALID:
		break;
	}
	if (n < 0 || (size_t)n >= size)
		return -ENOBUFS;
	return n;
}
