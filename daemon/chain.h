/* SPDX-License-Identifier: MIT */
/* Broker chaining's loop protection: this broker's id, the ids its own upstream HELLO carries,
 * and the check of a HELLO from a broker that draws from this one. docs/decisions.md says why a
 * cycle is found this way. */
#pragma once

#include <stdint.h>

#include "list.h"
#include "proto.h"

struct broker;

/* A broker drawing from this one, as the chain knows it: the ids its HELLO carried. Its session
 * holds it; chain_join() and chain_leave() put it in and out of the broker's chain_links while
 * the session is READY. */
struct chain_link {
	struct eb_list_node node;
	int user; /* the [user] it authenticated as, an index into conf->users */
	uint8_t n;
	uint64_t ids[EB_CHAIN_MAX];
};

/* Draws this run's broker id at random and logs it, so that a refusal's ids can be read. */
int chain_init(struct broker *b);

/* The ids this broker's HELLO to its upstream carries: its own first, then every id of the links
 * joined now, each once. Returns how many, or -E2BIG when they are more than EB_CHAIN_MAX (too
 * deep a chain to vouch for). */
int chain_path(const struct broker *b, uint64_t ret[EB_CHAIN_MAX]);

/* The verdict on a HELLO that carries ids (h->n_chain > 0), from user (an index into conf->users)
 * at peer: the peer is a broker drawing from this one. Returns 0 and keeps the ids in *link (for
 * chain_join()), or logs why and returns, with the text of the ERROR(FORBIDDEN) the session is to
 * send in *ret_why: -EPERM when the user is not configured as a downstream broker; -E2BIG when
 * this broker draws from an upstream and its path would then hold more than EB_CHAIN_MAX ids;
 * -ELOOP when this broker's id is among them (logged once per user and chain while the refusals
 * repeat): serving it would have this broker draw from itself. */
int chain_accept(struct broker *b, int user, const char *peer, const struct eb_msg_hello *h,
                 struct chain_link *link, const char **ret_why);
/* Before chain_accept(), when this broker draws from an upstream and h's ids would not fit its
 * path: the budget of EB_CHAIN_MAX ids is not first come, first served. The user whose links
 * hold the most ids, if that is more than user would hold with h's, makes way: returns that
 * user's link with the most ids, to be ended (chain_leave() through its session's state), and
 * is called again until the ids fit or NULL says the newcomer's user holds the most itself (then
 * chain_accept() refuses it, "chain too deep"). So one downstream's ids, made up or not, can
 * never keep out another that would hold fewer. */
struct chain_link *chain_make_way(const struct broker *b, int user, const struct eb_msg_hello *h);

/* The link's broker is READY, and draws through this one until chain_leave(). */
void chain_join(struct broker *b, struct chain_link *link);
void chain_leave(struct broker *b, struct chain_link *link);

/* "0123456789abcdef" for an id, into buf[17]. */
const char *chain_id_to_string(uint64_t id, char buf[static 17]);
