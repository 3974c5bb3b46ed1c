/* SPDX-License-Identifier: MIT */
/* The EGD server's state, shared by its two halves: egd-server.c (the clients' requests, the
 * broker side, the server's life) and egd-peers.c (who a client is, and the limits on how many
 * each peer and all may have). Nothing outside them includes this. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "egd-proto.h"
#include "egd-server.h"
#include "list.h"

/* Input is read in chunks; a chunk holds at least one whole request. */
#define CLIENT_IN_MAX (2 * EGD_REQUEST_MAX)
/* One reply at a time: the largest is 0x01's count byte and 255 bytes. */
#define CLIENT_OUT_MAX (1 + EGD_COUNT_MAX)
/* Warnings a flood of clients causes come at most this often. */
#define WARN_INTERVAL_USEC (10 * 1000000ULL)

/* Who a client is, as far as limits go: a uid over a unix socket, an IPv4 address, an IPv6
 * /64 (what one host is usually given), or for any other family the family alone. */
struct peer_key {
	int family;
	uint32_t uid;
	uint8_t addr[8];
};

/* The clients of one peer_key. Peers live as long as they have clients. */
struct peer {
	struct eb_list_node node; /* in server->peers */
	struct peer_key key;
	unsigned n_clients;
};

struct client {
	struct egd_server *server;
	struct peer *peer;
	struct eb_list_node node;  /* in server->clients */
	struct eb_list_node wnode; /* in server->waiters while a blocking read is owed bytes */
	int fd;
	sd_event_source *io;
	uint32_t events;
	uint64_t id;
	uint8_t in[CLIENT_IN_MAX];
	size_t in_len;
	uint8_t out[CLIENT_OUT_MAX];
	size_t out_off, out_len;
	unsigned owed; /* bytes a 0x02 read has still to stream */
	bool eof;
	uint64_t active;        /* server->activity when the client last sent or was sent bytes */
	uint64_t stalled_since; /* CLOCK_MONOTONIC usec since output has waited, 0 when none */
};

struct stats {
	uint64_t accepted, refused, requests[_EGD_CMD_MAX];
	uint64_t served, served_blocking;
	uint64_t dropped_stalled, dropped_unknown, dropped_gone, dropped_idle;
};

struct egd_server {
	sd_event *event;
	struct egd_refill *refill;
	struct egd_server_options opts;
	sd_event_source *refill_src, *sweep_src;
	struct eb_list clients; /* of client.node */
	struct eb_list waiters; /* of client.wnode, oldest first */
	struct eb_list peers;   /* of peer.node */
	unsigned n_clients;
	uint64_t next_id;
	uint64_t activity; /* counts events on clients: orders them by how recently they acted */
	uint64_t last_refused_log, last_accept_log, last_evict_log, last_status;
	struct stats stats;
	char pid[16];
	size_t pid_len;
};

static inline uint64_t server_now(struct egd_server *s)
{
	uint64_t t = 0;

	(void)sd_event_now(s->event, CLOCK_MONOTONIC, &t);
	return t;
}

/* Drops the client, wiping its buffers, and its peer with its last client. */
void egd_client_free(struct client *c, const char *why);

/* The peer of a newcomer on fd, with room made for it among the clients (see egd-peers.c), and
 * created when it has none: its n_clients is not counted up yet. NULL, logged, when there is no
 * room or no memory. */
struct peer *egd_peer_admit(struct egd_server *s, int fd);
/* Frees p once it has no client left. */
void egd_peer_release(struct egd_server *s, struct peer *p);
