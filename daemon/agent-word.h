/* SPDX-License-Identifier: MIT */
/* What the broker tells a load balancer's agent check (HAProxy's agent-check): a weight from the
 * pool level, "drain" while the pool is empty or an admin drained the broker, "maint" while it
 * stops. Pure: the caller gives the level and keeps the hysteresis. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum agent_word {
	AGENT_READY, /* "N% ready": a weight, and out of DRAIN or MAINT */
	AGENT_DRAIN, /* "drain": no new clients */
	AGENT_MAINT, /* "maint": the broker is stopping */
	_AGENT_WORD_MAX,
	_AGENT_WORD_INVALID = -EINVAL,
};

struct agent_view {
	uint64_t level_bits, capacity_bits;
	uint64_t empty_bits;    /* below this the pool is empty: it cannot back a small request */
	uint64_t refilled_bits; /* an empty pool is refilled at this (the low water) */
	bool drained;           /* an admin drained the broker */
	bool stopping;
};

/* The hysteresis between empty and refilled: a pool that went empty says "drain" until it is
 * refilled, not as soon as it holds one block, so that an edge at the brink does not flap. */
struct agent_state {
	bool empty;
};

/* The word for v, moving *st; *ret_weight is the READY weight in percent, 1..100 (the level's
 * share of the capacity, at least 1: HAProxy counts 0% as a drain). */
enum agent_word agent_decide(struct agent_state *st, const struct agent_view *v,
                             unsigned *ret_weight);

/* The line the agent writes for word and weight ("37% ready\n", "drain\n", "maint\n") into buf;
 * returns its length, or -ENOBUFS. */
int agent_format(enum agent_word word, unsigned weight, char *buf, size_t size);
