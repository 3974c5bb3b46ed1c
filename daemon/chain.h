/* SPDX-License-Identifier: MIT */
/* Broker chaining's loop protection: this broker's id, the ids its own upstream HELLO carries,
 * and the check of a HELLO from a broker that draws from this one. docs/decisions.md says why a
 * cycle is found this way. */
#pragma once

#include <stdint.h>

#include "proto.h"

struct broker;
struct session;

/* Draws this run's broker id at random and logs it, so that a refusal's ids can be read. */
int chain_init(struct broker *b);

/* The ids this broker's HELLO to its upstream carries: its own first, then every id in the
 * HELLOs of the brokers drawing from it now, each once. Returns how many, or -E2BIG when they
 * are more than EB_CHAIN_MAX (too deep a chain to vouch for). */
int chain_path(const struct broker *b, uint64_t ret[EB_CHAIN_MAX]);

/* A HELLO that carries ids (h->n_chain > 0): the peer is a broker drawing from this one. Returns
 * 0 and keeps the ids in the session (once it is ready, upstream_path_changed() passes them on;
 * they leave with the session), or sends ERROR(FORBIDDEN), logs why and returns: -EPERM when the
 * user is not configured as a downstream broker; -E2BIG when this broker draws from an upstream
 * and its path would then hold more than EB_CHAIN_MAX ids; -ELOOP when this broker's id is among
 * them (logged once per user and chain while the refusals repeat): serving it would have this
 * broker draw from itself. */
int chain_accept(struct session *s, const struct eb_msg_hello *h);

/* "0123456789abcdef" for an id, into buf[17]. */
const char *chain_id_to_string(uint64_t id, char buf[static 17]);
