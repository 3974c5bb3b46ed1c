/* SPDX-License-Identifier: MIT */
/* One peer of the broker: its connection, buffers, identity and the request it waits on. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "chain.h"
#include "list.h"
#include "proto.h"
#include "registry.h"
#include "scheduler.h"
#include "serve.h"
#include "workers.h"

struct broker;
struct eb_conn;
struct eb_user;
struct eb_conf;

#define SESSION_RBUF_SIZE (EB_FRAME_MAX + 16384)
#define SESSION_WBUF_SIZE (EB_FRAME_MAX + 4096)
/* What the buffers start at, allocated at their first use: every frame but PUT and DATA fits.
 * They grow to the sizes above for a big frame and go back when empty, so that a session that
 * waits (a sink between refills, a source told to SLEEP) holds a few hundred bytes, not 150 KiB. */
#define SESSION_BUF_SMALL 1024

/* Every field is the session's (session*.c) and the loop's, but reg, which the registry writes
 * (its state, user, roles and address: registry.h), and handshake_work while in_worker. */
struct session {
	struct broker *broker;
	struct registry_entry reg;
	/* A handshake step on a worker thread (broker->workers): until it comes back the
	 * connection is the worker's, and the loop neither reads it nor frees it. A session
	 * ended meanwhile (a timeout, make-way, shutdown) is counted out at once; its step is
	 * taken back if no worker has started it, else the session is freed when it returns. */
	struct work handshake_work;
	int handshake_result;
	bool in_worker, ended;
	/* The socket said it was ready while a worker had the connection: the loop looks again
	 * when the step is back (the socket stays in the epoll set meanwhile, and edge-triggered,
	 * it does not say twice). */
	bool io_missed;
	/* Changed since it last came to rest: the settle rule's mark (session-internal.h). */
	bool unsettled;

	struct eb_conn *conn;
	sd_event_source *timer, *frame_timer;
	/* session-poll.c's: the socket in the broker's epoll set (polled) with io_events; on the
	 * come-back list (come_back), or, freed during a batch (dead), on the graveyard, both
	 * through poll_node. */
	bool polled, come_back, dead;
	uint32_t io_events;
	struct eb_list_node poll_node;
	bool frame_started;   /* frame_timer runs for the partial frame at rbuf's head */
	bool lingering;       /* CLOSING: our side is shut, what the peer still sends is dropped */
	bool peer_done;       /* the peer ended its side with requests still to answer */
	size_t lingered;      /* bytes dropped so far, up to SESSION_LINGER_BYTES */
	char peer[128];       /* "tcp [::1]:40000", "unix pid=12 uid=1000" */
	const char *listener; /* the listener's name */
	char kind[EB_KIND_MAX + 1];
	/* A broker drawing from this one: the ids its HELLO carried (chain.c's while READY). */
	struct chain_link chain;

	/* Bytes outside [start, end) are always wiped (consumed frames, sent bytes, what a
	 * compaction vacated), so an empty buffer is freed as it is. cap: its allocated size. */
	uint8_t *rbuf, *wbuf;
	size_t rstart, rend, wstart, wend;
	size_t rcap, wcap;

	/* The GET being served, while in the broker's queue (serve_waiting()); further frames
	 * wait in rbuf until it is answered. */
	struct serve_request get;

	uint64_t empty_answers; /* GETs answered EMPTY */
	uint64_t quota_answers; /* GETs answered QUOTA */
	bool quota_spent;       /* the latest of those answers was QUOTA */
	uint64_t
	    starving_since_usec;    /* the first GET answered EMPTY since the last DATA; 0: none */
	bool asleep;                /* SLEEP sent, WAKE not yet */
	uint64_t woken_usec;        /* the last WAKE; 0: none */
	uint64_t asleep_until_usec; /* when that SLEEP's retry_ms runs out */
	uint8_t last_put[32];
	bool have_last_put;
	bool stuck_logged;

	/* What an admin sees (admin.c): counted at HELLO, PUT and DATA. */
	uint64_t id; /* numbered at HELLO, from 1, never reused */
	uint32_t claim_mbits_per_byte;
	uint64_t last_usec; /* the last HELLO, PUT or GET */
	bool put_claimed;   /* the latest PUT claimed credit, after the user's cap */
	bool put_stuck;     /* the broker's own test withheld the latest PUT's credit */
	uint64_t bytes_in, bits_in, bits_out, bytes_drbg;
	/* session-clones.c's, for a guest: it has drawn (a GET), and it was found drawing while
	 * another session of its user and key drew too. */
	bool drawing, clone;
};

/* Creates a session for an accepted fd (ownership taken). tls: wrap in the broker's TLS; without
 * it the peer is local (plain unix), identified by its ucred and counted apart. A peer over a
 * limit is refused here: a local one with an ERROR (busy), a network one by closing the
 * connection before the handshake. *ret is NULL then, and also when the session ended at once. */
/* The broker's epoll set of the sessions' sockets and its come-back list (session-poll.c): made
 * with the loop, freed after the last session. */
int session_poll_new(struct broker *b);
void session_poll_free(struct broker *b);
/* peer (peer_len bytes) is the address accept4() gave, or NULL to ask the socket. */
int session_new(struct broker *b, int fd, const struct sockaddr *peer, socklen_t peer_len, bool tls,
                const char *listener, struct session **ret);
/* The same for a TLS connection whose PROXY header (proxied.c) named its client (NULL: a LOCAL
 * header, the balancer's own connection): the client is the peer for every limit and log line,
 * and the balancer is named after it. */
int session_new_proxied(struct broker *b, int fd, const char *listener,
                        const struct sockaddr_storage *client,
                        const struct sockaddr_storage *balancer, struct session **ret);
void session_free(struct session *s);

static inline struct session *session_of(const struct registry_entry *e)
{
	return (struct session *)((char *)e - offsetof(struct session, reg));
}

/* Flow control (the broker's set_asleep hook): SLEEP (asleep) or WAKE, to a ready source that was
 * not told so yet. It only buffers a frame and schedules the session's own pump, so it runs no
 * peer's handler and frees no session. */
void session_tell_asleep(struct registry_entry *e, bool asleep);
/* Whether a source rests at now: told SLEEP, and neither woken nor past the SLEEP's retry_ms. */
bool session_is_asleep(const struct session *s, uint64_t now);
/* The broker stops: an ERROR to a ready peer, written at once, and close_notify. */
void session_goodbye(struct session *s);
/* An admin closes a ready session: ERROR(SHUTDOWN) with why, as a stopping broker says it, so that
 * the client goes to its next broker. Frees nothing. */
void session_disconnect(struct session *s, const char *why);

/* A configuration reload, for registry_rebind() (the broker's conf is already new): returns the
 * index in new of the session's user, or -1 having sent it an ERROR and closed it when that user
 * is gone, lost a role the session uses, has another key (TLS) or no longer matches the peer's
 * uid/gid (unix). A TLS handshake still in progress carries on, and is judged by the new file
 * when it is done (-1: no user yet). Frees nothing. */
int session_rebind(struct session *s, const struct eb_conf *old, const struct eb_conf *new);
/* The number of the key a TLS session logged in with (struct eb_user_key), else 0. */
uint64_t session_key_serial(const struct session *s);
