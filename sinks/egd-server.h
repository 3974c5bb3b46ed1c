/* SPDX-License-Identifier: MIT */
/* The EGD server: clients accepted on the listeners, their requests answered from the refill
 * buffer, blocking reads served oldest first as bytes arrive, clients that stop reading dropped,
 * and past the limits (in all, per peer) idle clients dropped for newcomers.
 * The program around it (eb-sink-egd.c) owns the options, the sockets' intake and the loop. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-event.h>

struct egd_refill;
struct eb_listeners;
struct egd_server;

struct egd_server_options {
	unsigned max_clients;          /* clients served at once; see egd-peers.c past that */
	unsigned max_clients_per_peer; /* of those, one uid's (unix) or address's (TCP) */
	uint64_t client_timeout_usec;  /* a client that leaves an answer unread this long goes */
};

/* Creates the server on event, answering from refill's buffer; nothing is watched yet. */
int egd_server_new(sd_event *event, struct egd_refill *refill, const struct egd_server_options *o,
                   struct egd_server **ret);
/* Accepts on ls (which stays the caller's), and watches the refill thread's eventfd and the
 * once-a-second sweep. The loop exits with 1 when the refill thread fails for good. */
int egd_server_start(struct egd_server *s, struct eb_listeners *ls);
/* Sets the STATUS line; when final, also logs what was served, requested and dropped. */
void egd_server_log_stats(struct egd_server *s, bool final);
/* Drops every client (wiping its buffers) and the event sources; returns NULL. */
struct egd_server *egd_server_free(struct egd_server *s);
