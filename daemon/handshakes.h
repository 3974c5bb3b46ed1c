/* SPDX-License-Identifier: MIT */
/* The network sessions in their TLS handshake: in the order they came, and how many come from
 * each peer address, so that the limits at accept cost the same with 10 sessions or 10,000. */
#pragma once

#include <stdbool.h>

#include "list.h"

struct session;
struct peer_addr;
struct addr_count;

struct handshakes {
	struct eb_list list; /* of session.handshake_node, oldest first */
	struct addr_count **buckets;
	unsigned n_buckets, n_addrs;
	unsigned seed; /* a peer must not choose which addresses share a bucket */
};

/* s begins its handshake. Its address is counted unless memory is short (the per-address limit
 * then misses it, which only errs towards admitting). */
void handshakes_add(struct handshakes *h, struct session *s);
/* s's handshake ended, however. */
void handshakes_remove(struct handshakes *h, struct session *s);
/* Handshakes under way from a's address (IPv4 address, IPv6 /64, vsock CID, process). */
unsigned handshakes_from(const struct handshakes *h, const struct peer_addr *a);
/* The one that began first, or NULL. */
struct session *handshakes_oldest(const struct handshakes *h);
void handshakes_free(struct handshakes *h);
