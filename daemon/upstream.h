/* SPDX-License-Identifier: MIT */
/* [upstream]: the broker draws from other brokers, as their sink, when its level is low. The
 * blocking client runs in a thread of its own; what it draws reaches the event loop through a
 * socket pair, so a slow or unreachable upstream never stalls the loop. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "proto.h"

struct broker;
struct upstream;

/* Starts drawing per b->conf->upstream, or does nothing (*ret = NULL) without that section.
 * Validates the brokers, user and key file first, and logs what is wrong. */
int upstream_new(struct broker *b, struct upstream **ret);
/* Stops the thread (waiting for its current step, at most a few seconds) and frees. */
struct upstream *upstream_free(struct upstream *u);

/* The level changed: below the upstream low water, ask for draw-bits. */
void upstream_level_changed(struct broker *b);
/* The ids this broker draws for changed (chain.c): the upstream hears at once. */
void upstream_path_changed(struct broker *b);

/* What an admin sees of the upstream (admin.c, admin-actions.c): the broker last connected to
 * ("" before the first), whether the latest attempt failed and why, since when (CLOCK_REALTIME
 * ms), its last DATA (0: none yet), and what came in since start. */
struct upstream_view {
	const char *broker;
	bool failing;
	enum eb_upstream_state state;
	const char *reason; /* failing: why */
	uint64_t since_ms, data_ms;
	uint64_t bytes_in, bits_in;
};
void upstream_get_view(const struct upstream *u, struct upstream_view *ret);
