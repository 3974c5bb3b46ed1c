/* SPDX-License-Identifier: MIT */
/* Shared by client.c (the messages over a connection) and client-connect.c (making a client and
 * connecting it to one of its brokers) alone. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "backoff.h"
#include "client.h"
#include "proto.h"
#include "uri.h"

struct eb_conn;
struct eb_srv;
struct ssl_ctx_st;

struct eb_client {
	struct eb_uri uris[EB_CLIENT_BROKERS_MAX];
	char uri_text[EB_CLIENT_BROKERS_MAX][300];
	unsigned n_uris;
	int current; /* index of the broker in use or last tried; -1 before the first */
	/* A srv: address's targets (srv.h), NULL for the others; the target in use or last tried,
	 * as a tcp: address, and the text naming it ("srv:NAME (HOST:PORT)"). */
	struct eb_srv *srv[EB_CLIENT_BROKERS_MAX];
	struct eb_uri target;
	char current_text[300];
	/* eb_client_leave(): the next pass begins at the address left when its srv: target left
	 * (left, a tcp: address) has another of its priority, trying that one after the others. */
	bool leaving;
	struct eb_uri left;
	char user[EB_KIND_MAX + 1];
	char kind[EB_KIND_MAX + 1];
	unsigned roles;
	uint32_t claim;
	uint8_t n_chain; /* a chained broker's ids for HELLO (eb_client_set_chain()) */
	uint64_t chain[EB_CHAIN_MAX];
	int timeout_ms;
	unsigned put_window;

	struct ssl_ctx_st *tls; /* NULL when no broker needs TLS */
	struct eb_conn *conn;
	unsigned puts_in_flight, gets_in_flight;
	uint32_t asked[EB_CLIENT_GETS_MAX]; /* the bytes each GET in flight asked, oldest first */
	bool asleep;
	uint64_t wake_deadline_ms;
	uint64_t connect_deadline_ms; /* while eb_client_connect_retry() runs with one; else 0 */
	uint64_t bits_credited;
	char last_error[EB_TEXT_MAX + 64];
	eb_client_watch_t watch;
	void *watch_userdata;
	uint64_t deadline_ms; /* eb_client_set_deadline(); 0: none */
	int cancel_fd;        /* eb_client_set_cancel(); -EBADF: none */
	short cancel_events;
	/* A connection that ended before the broker answered anything (an ERROR storm, a broker
	 * that closes at once) makes the next connect wait on this backoff, so that reconnecting
	 * is never a loop; an answer resets it. */
	struct eb_backoff backoff;
	bool served, unserved_end;
	/* eb_client_end_requests(): the session's requests are ended (until a disconnect), and the
	 * broker has shown it does not answer after that (for the client's whole life). */
	bool ended, no_end;
	/* The code of the broker's last ERROR, 0 for none since the last connect; and whether a
	 * broker refused STATUS_REQ's version (older than it), so that STATUS is asked for in the
	 * first layout from then on. */
	int error_code;
	bool status_v0;

	uint8_t buf[EB_FRAME_MAX];
};

/* client.c: what a wait of timeout_ms may last, given the caller's deadline and that of
 * eb_client_connect_retry(). */
int client_bounded(const struct eb_client *c, int timeout_ms);
/* client.c: disconnects, with what (NULL: the errno's text) as eb_client_last_error(); r. */
int client_fail(struct eb_client *c, int r, const char *what);
/* client.c: encodes and sends m; a failed write disconnects. */
int client_send(struct eb_client *c, const struct eb_msg *m);
/* client.c: the next message that is not SLEEP or WAKE, within timeout_ms in all. */
int client_read_answer(struct eb_client *c, int timeout_ms, struct eb_msg *ret);

/* client-connect.c: connects again to the broker last used (not the next, as
 * eb_client_connect() does). */
int client_reconnect(struct eb_client *c);
/* client-connect.c: leaves a srv: address's target once its records no longer put it first;
 * -ENOTCONN then. */
int client_srv_follow(struct eb_client *c);
