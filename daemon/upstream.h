/* SPDX-License-Identifier: MIT */
/* [upstream]: the broker draws from other brokers, as their sink, when its level is low. The
 * blocking client runs in a thread of its own; what it draws reaches the event loop through a
 * socket pair, so a slow or unreachable upstream never stalls the loop. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "key.h"
#include "proto.h"

struct broker;
struct eb_conf_upstream;
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

/* Whether two [upstream] sections name the same brokers and user: only then can a reload give
 * the running client another key; the rest waits for a restart. */
bool upstream_same_peer(const struct eb_conf_upstream *a, const struct eb_conf_upstream *b);

/* A reload's [upstream] key: what upstream_key_check() loaded, for upstream_key_stage(). */
struct upstream_key {
	bool change; /* another key or key id than the thread has */
	uint8_t key[EB_KEY_SIZE];
	char key_id[EB_KEY_ID_MAX + 1]; /* "": the user's default key there */
	char path[4096];
};
/* Before a reload switches to new: loads new's key when it is for the same brokers and user,
 * and says whether it is another one. A key file that does not load fails the reload, with a
 * message in *ret_error, as a [user]'s does. */
int upstream_key_check(const struct upstream *u, const struct eb_conf_upstream *old,
                       const struct eb_conf_upstream *new, struct upstream_key *ret,
                       char **ret_error);
/* After the switch: hands another key to the thread, for the next connection (the one in use
 * goes on with its key; if the upstream ends it, the next goes at once), and says so in text
 * ("" when nothing changed). Wipes k. */
void upstream_key_stage(struct upstream *u, struct upstream_key *k, char *text, size_t size);
