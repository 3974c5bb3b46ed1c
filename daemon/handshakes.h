/* SPDX-License-Identifier: MIT */
/* The network sessions in their TLS handshake: in the order they came, and how many come from
 * each peer address, so that the limits at accept cost the same with 10 sessions or 10,000. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "list.h"

struct addr_count;

/* Where a network peer comes from, for the per-address limit on handshakes: an IPv4 address, an
 * IPv6 /64 (one subscriber's usual share), a vsock CID, or the pid of a unix+tls peer. */
struct peer_addr {
	int family; /* AF_INET, AF_INET6, AF_VSOCK, AF_UNIX; 0 when unknown */
	uint8_t bytes[8];
};

/* What the index keeps of one handshake; the registry embeds it in each of its entries. addr and
 * accepted_usec are the session's, written once at accept; the rest is this module's. */
struct handshake {
	struct peer_addr addr;
	uint64_t accepted_usec;
	struct eb_list_node node; /* in handshakes.list while under way */
	bool addr_counted;        /* its address counts towards a per-address limit */
};

/* A handshake that fails within this time of its accept stays charged to its address until this
 * time has passed: a peer that connects, sends a ClientHello and resets, again and again, meets
 * the per-address limit as a rate (max-handshakes-per-address a second), not never. */
#define HANDSHAKE_CHARGE_USEC (1000000ULL)
/* Addresses with charges left and no handshake under way, at most: past it the oldest charge is
 * forgotten (which errs towards admitting). */
#define HANDSHAKE_IDLE_MAX 4096

struct handshakes {
	struct eb_list list; /* of handshake.node, oldest first */
	struct addr_count **buckets;
	unsigned n_buckets, n_addrs;
	unsigned seed;       /* a peer must not choose which addresses share a bucket */
	struct eb_list idle; /* of addr_count.idle_node: charged, none under way; oldest first */
	unsigned n_idle;
};

/* hs begins. Its address is counted unless memory is short (the per-address limit
 * then misses it, which only errs towards admitting). */
void handshakes_add(struct handshakes *h, struct handshake *hs);
/* hs ended, however; failed: it did not authenticate (a reset, an error, a timeout,
 * made way for another), and is charged as above. now: the loop's monotonic clock. */
void handshakes_remove(struct handshakes *h, struct handshake *hs, bool failed, uint64_t now);
/* Handshakes under way from a's address (IPv4 address, IPv6 /64, vsock CID, process), and
 * failed ones still charged to it. */
unsigned handshakes_from(struct handshakes *h, const struct peer_addr *a, uint64_t now);
/* The one that began first, or NULL. */
struct handshake *handshakes_oldest(const struct handshakes *h);
/* The one that began last from the address with the most under way, if that address has more
 * than more_than; else NULL. */
struct handshake *handshakes_busiest(const struct handshakes *h, unsigned more_than);
void handshakes_free(struct handshakes *h);
