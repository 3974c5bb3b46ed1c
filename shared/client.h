/* SPDX-License-Identifier: MIT */
/* A broker client with failover: connect, HELLO, PUT, GET, STATUS over any transport. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

#define EB_CLIENT_BROKERS_MAX 16
#define EB_CLIENT_TIMEOUT_MS  10000
#define EB_CLIENT_GETS_MAX    8 /* GETs in flight at most (eb_client_request()) */

struct eb_client;

struct eb_client_options {
	const char *brokers[EB_CLIENT_BROKERS_MAX]; /* URIs, tried in order */
	unsigned n_brokers;
	const char *user;     /* TLS identity; not needed over unix: */
	const char *key_file; /* NULL: $CREDENTIALS_DIRECTORY/eb.key */
	const char *key_id;   /* the key's id at the broker (docs/protocol.md 1.1); NULL: none */
	unsigned roles;       /* enum eb_role bits asked for at HELLO */
	const char *kind;     /* free text for the broker's log, e.g. "file /dev/stdin" */
	uint32_t claim_mbits_per_byte;
	int timeout_ms;      /* per operation; 0: EB_CLIENT_TIMEOUT_MS */
	unsigned put_window; /* PUTs in flight before waiting for an ACK; 0: 4 */
};

/* Validates the options and loads the key when a TLS broker is listed. The error text for a
 * failure is in *ret_error (malloc()ed) and names the broker URI or key file. */
int eb_client_new(const struct eb_client_options *o, struct eb_client **ret, char **ret_error);
struct eb_client *eb_client_free(struct eb_client *c);
static inline void eb_client_freep(struct eb_client **c)
{
	if (*c)
		eb_client_free(*c);
}

/* Told the outcome of every eb_client_connect() pass: r is 0 once connected, else the error, with
 * eb_client_last_error() naming the broker and the reason. libeb logs nothing above debug: this
 * is how a program hears of attempts that eb_client_connect_retry() makes on its behalf
 * (eb_cli_client_watch() in cli.c logs them and sets the unit's STATUS=). */
typedef void (*eb_client_watch_t)(struct eb_client *c, int r, void *userdata);
void eb_client_set_watch(struct eb_client *c, eb_client_watch_t watch, void *userdata);

/* Connects to the first broker that answers, starting after the one last used, with
 * HELLO/WELCOME done. One pass over the list. */
int eb_client_connect(struct eb_client *c);
/* Keeps calling eb_client_connect() with exponential backoff and jitter (100 ms doubling to
 * 30 s) until it succeeds, an authentication error makes retrying pointless, or deadline_ms
 * (0: forever) passes. */
int eb_client_connect_retry(struct eb_client *c, int deadline_ms);
void eb_client_disconnect(struct eb_client *c);
/* Whether the list holds another target than the one in use: another address, or another target
 * of the same priority of the srv: address in use. */
bool eb_client_has_other(const struct eb_client *c);
/* Disconnects, with why as eb_client_last_error(), so that the next eb_client_connect() tries the
 * other targets first: the next target of the srv: address in use of the same priority, else the
 * next address; the one left comes last in that pass. For a sink whose broker has only EMPTY to
 * give while another may have entropy (sink.h). */
void eb_client_leave(struct eb_client *c, const char *why);
bool eb_client_connected(const struct eb_client *c);
/* The connection's socket, to watch for the broker going away while idle (poll POLLRDHUP);
 * -EBADF when not connected. Not to read or write: TLS owns it. */
int eb_client_fd(const struct eb_client *c);

/* Sends data with its claimed credit. Waits only when put_window PUTs await their ACK. While
 * the broker says SLEEP, *asleep (eb_client_asleep()) is true: the caller should stop sampling
 * and call eb_client_wait_wake(). */
int eb_client_put(struct eb_client *c, const void *data, size_t len, uint32_t credit_bits);
/* Waits for every outstanding PUT_ACK. */
int eb_client_flush(struct eb_client *c);
bool eb_client_asleep(const struct eb_client *c);
/* Waits until WAKE or the SLEEP's time is up; 0 then. */
int eb_client_wait_wake(struct eb_client *c);
/* Takes in the SLEEP and WAKE frames that have already arrived, without waiting for more: for a
 * source that goes on sampling while the broker is full (--dump-raw). eb_client_asleep() then
 * says whether to send. */
int eb_client_poll_wake(struct eb_client *c);

/* Says that the requests sent so far are the session's last (docs/protocol.md 1.1, "A session
 * the broker ends"): the client ends its side (close_notify over TLS, a shutdown of its writing
 * over plain unix), and the broker answers them, then ends the session, closing first, so that a
 * balancer between the two sees an orderly close. Nothing more can be sent on this session.
 * -EOPNOTSUPP when a broker has shown it does not know the rule (it ended a session before its
 * answers), and the side stays open; -ENOTCONN when not connected. */
int eb_client_end_requests(struct eb_client *c);
/* Whether eb_client_end_requests() ended this session's requests. */
bool eb_client_ended(const struct eb_client *c);

/* Sends a GET for len bytes (8..EB_DATA_MAX); -EBUSY with EB_CLIENT_GETS_MAX in flight. */
int eb_client_request(struct eb_client *c, size_t len, enum eb_get_mode mode);
/* Receives the answer to the oldest request: 0 with DATA in buf (*ret_len bytes, 1 to what was
 * asked, carrying *ret_bits <= 8 x *ret_len), -EAGAIN for EMPTY (and for a DATA of 0 bytes, with
 * a retry of 1 s) or -EDQUOT for QUOTA with *ret_retry_ms set. DATA longer than asked is a
 * protocol violation: -EPROTO, disconnected, nothing of it taken. buf holds at least the
 * requested length. */
int eb_client_receive(struct eb_client *c, void *buf, size_t size, size_t *ret_len,
                      uint32_t *ret_bits, uint32_t *ret_retry_ms);

/* STATUS in the latest layout the broker speaks: ret->version says which (0: no carried or
 * dropped credit). A broker that refuses the versioned request (older than it) is connected to
 * again and asked for the first layout, and so for the rest of the client's life. */
int eb_client_status(struct eb_client *c, struct eb_msg_status *ret);

/* A new key for the connections made from now on: key (wiped by the caller) under id key_id
 * (NULL: the user's default key), for the same user. The connection in use, if any, keeps the
 * key it logged in with. -EOPNOTSUPP when no broker of this client needs TLS; -EINVAL for a bad
 * id. */
int eb_client_set_key(struct eb_client *c, const char *key_id, const uint8_t *key);
/* One page of a report table (report.h): the rows with ids above after. ret->rows points into
 * the client's buffer and is valid until the next call. */
int eb_client_report(struct eb_client *c, uint8_t table, uint64_t after, struct eb_msg_report *ret);
/* An admin's action (docs/protocol.md 3.14), answered by ACTION; and the broker's STATE (3.16).
 * A broker that predates them closes with ERROR(PROTOCOL). */
int eb_client_action(struct eb_client *c, const struct eb_msg_action_req *q,
                     struct eb_msg_action *ret);
int eb_client_state(struct eb_client *c, struct eb_msg_state *ret);

struct eb_history;
/* Reads the whole history table from the broker into *ret (report.h), page by page
 * (eb_client_report()), refusing a row whose id is not above the page's after. */
int eb_history_fetch(struct eb_client *c, struct eb_history *ret);

/* For a broker drawing from an upstream broker: the broker ids its HELLO carries from the next
 * connect on (its own first; docs/protocol.md). -E2BIG beyond EB_CHAIN_MAX. */
int eb_client_set_chain(struct eb_client *c, const uint64_t *ids, unsigned n);

/* An absolute deadline (eb_now_ms()) past which no wait of the client goes: a program's
 * --timeout holds whatever the broker sends or withholds. Calls then fail with -ETIMEDOUT.
 * 0: none. */
void eb_client_set_deadline(struct eb_client *c, uint64_t deadline_ms);
/* Every wait of the client also watches fd for events (poll(2)), and gives up with -ECANCELED
 * (disconnected) when they come: a thread told to stop does so at once, not after its broker's
 * timeout. fd -EBADF: none. */
void eb_client_set_cancel(struct eb_client *c, int fd, short events);

/* Totals since eb_client_new(). */
uint64_t eb_client_bits_credited(const struct eb_client *c);
/* The broker in use (or last tried), and the last error the broker or transport reported. */
const char *eb_client_broker(const struct eb_client *c);
const char *eb_client_last_error(const struct eb_client *c);
