/* SPDX-License-Identifier: MIT */
#include "client.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backoff.h"
#include "conn.h"
#include "credential.h"
#include "key.h"
#include "macro.h"
#include "report.h"
#include "sigpipe.h"
#include "srv.h"
#include "time-util.h"
#include "tls.h"
#include "uri.h"

/* SLEEP and WAKE frames taken while waiting for one answer (or while asleep) before the broker is
 * judged to flood: a broker sends one at a threshold, and one more at the other. */
#define UNASKED_MAX 16
/* How long a DATA of 0 bytes is taken to ask a sink to wait, as an EMPTY would: the protocol
 * allows it, but asking again at once would spin against a broker that sends nothing else. */
#define ZERO_DATA_RETRY_MS 1000
/* The longest SLEEP honoured; the protocol leaves clamping retry_ms to the client. */
#define SLEEP_MAX_MS (10 * 60 * 1000)

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

	uint8_t buf[EB_FRAME_MAX];
};

static char *strdup_printf(const char *fmt, ...) _printf_(1, 2);
static char *strdup_printf(const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

int eb_client_new(const struct eb_client_options *o, struct eb_client **ret, char **ret_error)
{
	_cleanup_(eb_client_freep) struct eb_client *c = NULL;
	_cleanup_free_ char *default_key = NULL;
	bool need_tls = false;
	int r;

	if (o->n_brokers == 0) {
		*ret_error = strdup_printf("No broker given: use --broker URI");
		return -EINVAL;
	}
	if (o->n_brokers > EB_CLIENT_BROKERS_MAX) {
		*ret_error = strdup_printf("At most %d brokers", EB_CLIENT_BROKERS_MAX);
		return -E2BIG;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->current = -1;
	c->cancel_fd = -EBADF;
	c->backoff = EB_BACKOFF_INIT(EB_BACKOFF_RECONNECT_MIN_MS, EB_BACKOFF_RECONNECT_MAX_MS);
	c->roles = o->roles;
	c->claim = o->claim_mbits_per_byte;
	c->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : EB_CLIENT_TIMEOUT_MS;
	c->put_window = o->put_window > 0 ? o->put_window : 4;
	snprintf(c->kind, sizeof(c->kind), "%s", o->kind ? o->kind : "");
	for (unsigned i = 0; i < o->n_brokers; i++) {
		r = eb_uri_parse(o->brokers[i], &c->uris[i]);
		if (r < 0) {
			*ret_error = strdup_printf(
			    "Invalid broker address \"%s\": expected tcp://HOST[:PORT], unix:/PATH, unix+tls:/PATH, vsock://CID[:PORT], virtio:NAME or srv:NAME",
			    o->brokers[i]);
			return r;
		}
		if (c->uris[i].kind == EB_URI_SRV) {
			r = eb_srv_new(c->uris[i].host, &c->srv[i]);
			if (r < 0) {
				*ret_error = strdup_printf(
				    "Invalid broker address \"%s\": srv:NAME needs a DNS name",
				    o->brokers[i]);
				return r;
			}
		}
		snprintf(c->uri_text[i], sizeof(c->uri_text[i]), "%s", o->brokers[i]);
		if (eb_uri_is_tls(&c->uris[i]))
			need_tls = true;
	}
	c->n_uris = o->n_brokers;

	if (need_tls) {
		const char *key_file = o->key_file;
		uint8_t key[EB_KEY_SIZE];

		if (o->user && o->user[0] && strlen(o->user) <= EB_KIND_MAX)
			snprintf(c->user, sizeof(c->user), "%s", o->user);
		else if (!o->user || !o->user[0]) {
			/* The credential eb.user, as a hypervisor hands a guest its identity
			 * beside eb.key (docs/decisions.md). */
			r = eb_credential_read_word("eb.user", c->user, sizeof(c->user));
			if (r < 0) {
				*ret_error = strdup_printf(
				    "The credential eb.user in %s is not one printable name of at most %d bytes",
				    getenv("CREDENTIALS_DIRECTORY"), EB_KIND_MAX);
				return r;
			}
		}
		if (!c->user[0]) {
			*ret_error = strdup_printf(
			    "A TLS broker (%s) needs --user NAME (or the credential eb.user)",
			    c->uri_text[0]);
			return -EINVAL;
		}
		if (!key_file) {
			default_key = eb_key_default_path();
			key_file = default_key;
		}
		if (!key_file) {
			*ret_error = strdup_printf(
			    "A TLS broker needs a key: use --key-file PATH or the credential eb.key");
			return -ENOKEY;
		}
		r = eb_key_load(key_file, key);
		if (r < 0) {
			*ret_error = eb_key_describe_error(key_file, r);
			return r;
		}
		r = eb_tls_client_new(c->user, key, &c->tls);
		explicit_bzero(key, sizeof(key));
		if (r < 0) {
			*ret_error = strdup_printf("Failed to set up TLS: %s", strerror(-r));
			return r;
		}
	}
	*ret = TAKE_PTR(c);
	return 0;
}

void eb_client_disconnect(struct eb_client *c)
{
	struct eb_sigpipe_guard g;

	if (!c->conn)
		return;
	eb_sigpipe_block(&g);
	eb_conn_shutdown(c->conn);
	eb_sigpipe_restore(&g);
	c->conn = eb_conn_free(c->conn);
	c->puts_in_flight = c->gets_in_flight = 0;
	c->asleep = false;
	c->unserved_end = !c->served;
	if (c->served)
		eb_backoff_reset(&c->backoff);
	c->served = false;
}

/* What a wait of timeout_ms may last, given the caller's deadline (eb_client_set_deadline()) and
 * that of eb_client_connect_retry(): at least 1 ms, so that a deadline passed is -ETIMEDOUT. */
static int bounded(const struct eb_client *c, int timeout_ms)
{
	uint64_t now = eb_now_ms(), t = (uint64_t)MAX(timeout_ms, 1);

	if (c->deadline_ms)
		t = MIN(t, c->deadline_ms > now ? c->deadline_ms - now : 1);
	if (c->connect_deadline_ms)
		t = MIN(t, c->connect_deadline_ms > now ? c->connect_deadline_ms - now : 1);
	return (int)t;
}

struct eb_client *eb_client_free(struct eb_client *c)
{
	if (!c)
		return NULL;
	eb_client_disconnect(c);
	for (unsigned i = 0; i < c->n_uris; i++)
		eb_srv_free(c->srv[i]);
	eb_tls_free(c->tls);
	explicit_bzero(c->buf, sizeof(c->buf));
	free(c);
	return NULL;
}

bool eb_client_connected(const struct eb_client *c)
{
	return c->conn != NULL;
}

static int fail(struct eb_client *c, int r, const char *what)
{
	snprintf(c->last_error, sizeof(c->last_error), "%s", what ? what : strerror(-r));
	eb_client_disconnect(c);
	return r;
}

static int send_msg(struct eb_client *c, const struct eb_msg *m)
{
	struct eb_sigpipe_guard g;
	int n, r;

	n = eb_msg_encode(m, c->buf, sizeof(c->buf));
	if (n < 0)
		return n;
	eb_sigpipe_block(&g);
	r = eb_conn_write_full(c->conn, c->buf, (size_t)n, bounded(c, c->timeout_ms));
	eb_sigpipe_restore(&g);
	if (m->type == EB_MSG_PUT)
		explicit_bzero(c->buf, (size_t)n);
	if (r < 0)
		return fail(c, r, NULL);
	return 0;
}

/* The errno a caller can act on for each ERROR code; the rest (PROTOCOL, INTERNAL) are -EPROTO. */
static const int error_errno[_EB_ERR_MAX] = {
    [EB_ERR_AUTH] = -EACCES,
    [EB_ERR_FORBIDDEN] = -EACCES,
    [EB_ERR_VERSION] = -EPROTONOSUPPORT,
    [EB_ERR_TOO_LARGE] = -EMSGSIZE,
    [EB_ERR_SHUTDOWN] = -ESHUTDOWN,
    [EB_ERR_BUSY] = -EBUSY,
};

static int broker_error(struct eb_client *c, const struct eb_msg_error *e)
{
	int r = e->code > 0 && e->code < _EB_ERR_MAX ? error_errno[e->code] : 0;

	/* Cut short if it must be: the broker's name and text can fill it alone. */
	if (snprintf(c->last_error, sizeof(c->last_error), "broker %s: %s (%s)", c->current_text,
	             e->text, eb_error_code_to_string(e->code)) < 0)
		c->last_error[0] = '\0';
	eb_client_disconnect(c);
	return r < 0 ? r : -EPROTO;
}

/* Reads one message; SLEEP and WAKE are absorbed here and reported as 1 so callers loop. */
static int read_msg(struct eb_client *c, int timeout_ms, struct eb_msg *ret)
{
	struct eb_frame f;
	int r;

	r = eb_conn_read_full(c->conn, c->buf, EB_FRAME_HEADER_SIZE, bounded(c, timeout_ms));
	if (r == -ETIMEDOUT)
		return r;
	if (r == -ECANCELED)
		return fail(c, r, "stopped");
	if (r < 0)
		return fail(c, r, r == -ECONNRESET ? "the broker closed the connection" : NULL);
	/* The header says how much to read next; the codec judges it before a byte more is. */
	r = eb_frame_header_parse(c->buf, EB_FRAME_HEADER_SIZE, &f);
	if (r == -EMSGSIZE)
		return fail(c, r, "the broker sent an oversized frame");
	if (r < 0)
		return fail(c, -EBADMSG, "the broker sent a malformed frame");
	r = eb_conn_read_full(c->conn, c->buf + EB_FRAME_HEADER_SIZE, f.length,
	                      bounded(c, c->timeout_ms));
	if (r < 0)
		return fail(c, r, r == -ECANCELED ? "stopped" : NULL);
	f.payload = c->buf + EB_FRAME_HEADER_SIZE;
	r = eb_msg_decode(&f, ret);
	if (r < 0)
		return fail(c, -EBADMSG, "the broker sent a malformed frame");
	switch (ret->type) {
	case EB_MSG_ERROR:
		return broker_error(c, &ret->error);
	case EB_MSG_SLEEP:
		c->asleep = true;
		c->wake_deadline_ms =
		    eb_now_ms() + MIN(ret->retry.retry_ms, (uint32_t)SLEEP_MAX_MS);
		return 1;
	case EB_MSG_WAKE:
		c->asleep = false;
		return 1;
	case EB_MSG_HELLO:
	case EB_MSG_WELCOME:
	case EB_MSG_PUT:
	case EB_MSG_PUT_ACK:
	case EB_MSG_GET:
	case EB_MSG_DATA:
	case EB_MSG_EMPTY:
	case EB_MSG_QUOTA:
	case EB_MSG_STATUS_REQ:
	case EB_MSG_STATUS:
	case EB_MSG_REPORT_REQ:
	case EB_MSG_REPORT:
	case _EB_MSG_MAX:
	case _EB_MSG_INVALID:
		break;
	}
	return 0;
}

/* Reads the next message that is not SLEEP or WAKE, within timeout_ms in all: a broker that
 * sends SLEEP or WAKE without end neither holds the caller past its time nor keeps it busy. */
static int read_answer(struct eb_client *c, int timeout_ms, struct eb_msg *ret)
{
	uint64_t end = eb_now_ms() + (uint64_t)MAX(timeout_ms, 0);
	int r;

	for (unsigned unasked = 0;; unasked++) {
		uint64_t now = eb_now_ms();

		if (unasked > UNASKED_MAX)
			return fail(
			    c, -EPROTO,
			    "the broker sent SLEEP or WAKE again and again instead of an answer");
		r = read_msg(c, now < end ? (int)(end - now) : 0, ret);
		if (r != 1)
			return r;
	}
}

/* Sends m and reads the broker's answer into it, which must be a want; what says otherwise. */
static int transact(struct eb_client *c, struct eb_msg *m, enum eb_msg_type want, const char *what)
{
	int r;

	if (!c->conn)
		return -ENOTCONN;
	r = send_msg(c, m);
	if (r >= 0)
		r = read_answer(c, c->timeout_ms, m);
	if (r >= 0 && m->type != want)
		r = fail(c, -EPROTO, what);
	if (r >= 0)
		c->served = true;
	return r;
}

/* A connection attempt waits no longer than an operation may, nor past the deadline of
 * eb_client_connect_retry() or the caller's: a --timeout must hold even against a broker that
 * hangs. */
static int op_timeout(const struct eb_client *c)
{
	return bounded(c, c->timeout_ms);
}

/* The reason OpenSSL gave, without its "error:0A00010B:SSL routines::" prefix. */
static const char *tls_reason(const struct eb_conn *conn)
{
	const char *e = eb_conn_tls_error(conn), *colon = strrchr(e, ':');

	return colon ? colon + 1 : e;
}

/* A failed connection attempt's reason, for eb_client_last_error(), naming the broker unless the
 * reason does already. */
static int connect_failed(struct eb_client *c, const char *name, int r)
{
	char reason[sizeof(c->last_error)];

	if (!strstr(c->last_error, name)) {
		int n;

		snprintf(reason, sizeof(reason), "%s", c->last_error);
		n = snprintf(c->last_error, sizeof(c->last_error), "%s: ", name);
		if (n > 0 && (size_t)n < sizeof(c->last_error)) {
			size_t len = strnlen(reason, sizeof(c->last_error) - (size_t)n - 1);

			memcpy(c->last_error + n, reason, len);
			c->last_error[(size_t)n + len] = '\0';
		}
	}
	eb_client_disconnect(c);
	return r;
}

/* Connects to uri, broker i of the list or one of its SRV targets, named name in errors. */
static int connect_one(struct eb_client *c, unsigned i, const struct eb_uri *uri, const char *name)
{
	struct eb_msg m = {.type = EB_MSG_HELLO};
	struct eb_sigpipe_guard g;
	const char *why;
	int fd, r;

	c->current = (int)i;
	snprintf(c->current_text, sizeof(c->current_text), "%s", name);
	r = eb_uri_connect(uri, op_timeout(c), &fd);
	if (r == -EADDRNOTAVAIL && (why = eb_uri_resolve_error())) {
		if (c->srv[i])
			snprintf(c->last_error, sizeof(c->last_error),
			         "%s: cannot resolve its target %s: %s", c->uri_text[i], uri->host,
			         why);
		else
			snprintf(c->last_error, sizeof(c->last_error), "cannot resolve %s: %s",
			         uri->host, why);
		return r;
	}
	if (r < 0) {
		snprintf(c->last_error, sizeof(c->last_error), "cannot connect to %s: %s", name,
		         strerror(-r));
		return r;
	}
	/* Non-blocking, so that eb_conn_read_full() and eb_conn_write_full() wait in poll() with
	 * their timeout: on a blocking socket a broker that stops answering would hang us. */
	r = eb_conn_new(fd, eb_uri_is_tls(uri) ? c->tls : NULL, false, true, &c->conn);
	if (r >= 0)
		eb_conn_set_cancel(c->conn, c->cancel_fd, c->cancel_events);
	if (r < 0) {
		snprintf(c->last_error, sizeof(c->last_error),
		         "cannot set up a connection to %s: %s", name, strerror(-r));
		return r;
	}
	m.hello.version = EB_PROTO_VERSION;
	m.hello.roles = (uint8_t)c->roles;
	m.hello.claim_mbits_per_byte = c->claim;
	snprintf(m.hello.kind, sizeof(m.hello.kind), "%s", c->kind);
	m.hello.n_chain = c->n_chain;
	memcpy(m.hello.chain, c->chain, c->n_chain * sizeof(*c->chain));
	/* The handshake first, on its own: a broker at one of its limits closes a connection it
	 * will not take before it answers the ClientHello, while a refused user or key gets a TLS
	 * alert. The first is worth another try later, the second is not. */
	eb_sigpipe_block(&g);
	r = eb_conn_write_full(c->conn, NULL, 0, op_timeout(c));
	eb_sigpipe_restore(&g);
	if (r < 0 && eb_uri_is_tls(uri) && eb_conn_failure(c->conn) == EB_CONN_FAIL_EOF) {
		snprintf(
		    c->last_error, sizeof(c->last_error),
		    "%s closed the connection before the TLS handshake finished (busy, or at a connection limit?)",
		    name);
		eb_client_disconnect(c);
		return -ECONNREFUSED;
	}
	/* What answered the ClientHello with no TLS record at all (an HTTP server's reply, say)
	 * is another service on that port: worth telling apart from a refused key, and worth
	 * trying again, since the address may be the one about to be fixed. */
	if (r < 0 && eb_conn_failure(c->conn) == EB_CONN_FAIL_NOT_TLS) {
		snprintf(c->last_error, sizeof(c->last_error),
		         "not an entropy broker at %s (its answer to the TLS handshake: %s)", name,
		         tls_reason(c->conn));
		return connect_failed(c, name, -EPROTO);
	}
	if (r == -ETIMEDOUT) {
		snprintf(c->last_error, sizeof(c->last_error),
		         "%s did not finish the TLS handshake in time (an entropy broker there?)",
		         name);
		return connect_failed(c, name, r);
	}
	if (r < 0)
		(void)fail(c, r, NULL);
	else
		r = send_msg(c, &m);
	if (r < 0) {
		if (r == -EACCES || r == -EPROTO || r == -ECONNRESET || r == -EPIPE)
			snprintf(
			    c->last_error, sizeof(c->last_error),
			    "TLS handshake with %s failed: the broker refused user \"%s\" or its key",
			    name, c->user);
		r = r == -ECONNRESET || r == -EPIPE || r == -EPROTO ? -EACCES : r;
		return connect_failed(c, name, r);
	}
	r = read_answer(c, op_timeout(c), &m);
	if (r == -ETIMEDOUT) {
		/* read_msg() keeps the connection for a caller that may wait again; a broker that
		 * does not answer HELLO in time is one to leave. */
		snprintf(c->last_error, sizeof(c->last_error), "%s did not answer HELLO in time",
		         name);
		return connect_failed(c, name, r);
	}
	/* Bytes that are no frame of ours in answer to HELLO: a peer that does not speak the
	 * protocol (over a plain unix socket, any service at all). Not a refusal. */
	if (r == -EBADMSG || r == -EMSGSIZE || (r >= 0 && m.type != EB_MSG_WELCOME)) {
		snprintf(c->last_error, sizeof(c->last_error),
		         "not an entropy broker at %s (it answered HELLO with %s)", name,
		         r < 0 ? "bytes that are no frame of the protocol"
		               : eb_msg_type_to_string(m.type));
		return connect_failed(c, name, -EPROTO);
	}
	if (r < 0) {
		/* TLS 1.3 finishes the server's side of the handshake after our first write, so a
		 * refused key shows only here, as a closed connection. */
		if (r == -ECONNRESET && eb_uri_is_tls(uri))
			snprintf(c->last_error, sizeof(c->last_error),
			         "%s closed the connection: wrong key or unknown user \"%s\"?",
			         name, c->user);
		return connect_failed(c, name, r);
	}
	return 0;
}

/* Tries a srv: address's targets in RFC 2782's order, looking the records up again when their
 * time is up or every target failed. */
static int connect_srv(struct eb_client *c, unsigned i)
{
	struct eb_srv *s = c->srv[i];
	int n, r = -EHOSTUNREACH;

	c->current = (int)i;
	snprintf(c->current_text, sizeof(c->current_text), "%s", c->uri_text[i]);
	n = eb_srv_refresh(s, eb_now_ms());
	if (n < 0) {
		snprintf(c->last_error, sizeof(c->last_error), "%s", eb_srv_error(s));
		return n == -ENOENT || n == -EBADMSG ? -EHOSTUNREACH : n;
	}
	for (int j = 0; j < n; j++) {
		const struct eb_srv_record *t = eb_srv_target(s, (size_t)j);
		char name[sizeof(c->current_text)];

		c->target = (struct eb_uri){.kind = EB_URI_TCP, .port = t->port};
		snprintf(c->target.host, sizeof(c->target.host), "%s", t->target);
		snprintf(name, sizeof(name), "%s (%s:%u)", c->uri_text[i], t->target,
		         (unsigned)t->port);
		r = connect_one(c, i, &c->target, name);
		if (r >= 0 || r == -ECANCELED)
			return r;
		eb_srv_failed(s, (size_t)j);
	}
	return r;
}

/* Once the answer's time is up, the records of the srv: address in use are looked up again; when
 * they no longer put its target first (removed, or one of a lower priority number there), the
 * connection is left as if the broker had closed it (answers in flight are lost, as then), so
 * that the caller's reconnect goes where the records now say. A look-up that fails for want of
 * an answer keeps the connection. */
static int srv_follow(struct eb_client *c)
{
	struct eb_srv *s;
	int r;

	if (!c->conn || c->current < 0 || !(s = c->srv[c->current]) ||
	    !eb_srv_expired(s, eb_now_ms()))
		return 0;
	r = eb_srv_refresh(s, eb_now_ms());
	/* -ENOENT: the records are gone, and this target with them. */
	if (r < 0 && r != -ENOENT)
		return 0;
	if (r >= 0 && eb_srv_still_best(s, c->target.host, c->target.port))
		return 0;
	snprintf(c->last_error, sizeof(c->last_error), "%s: the SRV records changed; leaving %s:%u",
	         c->uri_text[c->current], c->target.host, (unsigned)c->target.port);
	eb_client_disconnect(c);
	return -ENOTCONN;
}

int eb_client_connect(struct eb_client *c)
{
	unsigned start = c->current < 0 ? 0 : ((unsigned)c->current + 1) % c->n_uris;
	int r = -EHOSTUNREACH;

	eb_client_disconnect(c);
	for (unsigned k = 0; k < c->n_uris; k++) {
		unsigned i = (start + k) % c->n_uris;

		r = c->srv[i] ? connect_srv(c, i) : connect_one(c, i, &c->uris[i], c->uri_text[i]);
		/* A stop (eb_client_set_cancel()) ends the pass: the next broker's connect would
		 * not hear it. */
		if (r >= 0 || r == -ECANCELED)
			break;
	}
	if (c->watch)
		c->watch(c, r < 0 ? r : 0, c->watch_userdata);
	return r < 0 ? r : 0;
}

void eb_client_set_watch(struct eb_client *c, eb_client_watch_t watch, void *userdata)
{
	c->watch = watch;
	c->watch_userdata = userdata;
}

int eb_client_connect_retry(struct eb_client *c, int deadline_ms)
{
	uint64_t end = deadline_ms > 0 ? eb_now_ms() + (uint64_t)deadline_ms : 0;

	if (c->deadline_ms && (!end || c->deadline_ms < end))
		end = c->deadline_ms;
	/* The last connection ended before the broker answered anything: wait before the next, as
	 * after a failed attempt, or a broker that ends every session at once is reconnected to in
	 * a loop. */
	if (c->unserved_end) {
		uint64_t wait = eb_backoff_next(&c->backoff);

		if (end && eb_now_ms() + wait >= end)
			return -ETIMEDOUT;
		(void)eb_sleep_ms(wait);
	}
	for (;;) {
		uint64_t wait;
		int r;

		c->connect_deadline_ms = end;
		r = eb_client_connect(c);
		c->connect_deadline_ms = 0;
		if (r >= 0 || r == -EACCES || r == -EPROTONOSUPPORT)
			return r;
		if (end && eb_now_ms() >= end)
			return -ETIMEDOUT;
		wait = eb_backoff_next(&c->backoff);
		if (end && eb_now_ms() + wait >= end)
			return -ETIMEDOUT;
		(void)eb_sleep_ms(wait);
	}
}

static int drain_acks(struct eb_client *c, unsigned keep)
{
	while (c->puts_in_flight > keep) {
		struct eb_msg m;
		int r = read_answer(c, c->timeout_ms, &m);

		if (r < 0)
			return r == -ETIMEDOUT
			           ? fail(c, r, "the broker did not acknowledge in time")
			           : r;
		if (m.type != EB_MSG_PUT_ACK)
			return fail(c, -EPROTO, "the broker answered a PUT with something else");
		c->puts_in_flight--;
		c->bits_credited += m.put_ack.credited_bits;
		c->served = true;
	}
	return 0;
}

int eb_client_put(struct eb_client *c, const void *data, size_t len, uint32_t credit_bits)
{
	struct eb_msg m = {.type = EB_MSG_PUT};
	int r;

	if (!c->conn)
		return -ENOTCONN;
	r = srv_follow(c);
	if (r < 0)
		return r;
	while (len > 0) {
		size_t n = MIN(len, (size_t)EB_DATA_MAX);
		uint32_t credit = (uint32_t)((uint64_t)credit_bits * n / len);

		m.put.data = data;
		m.put.len = (uint32_t)n;
		m.put.credit_bits = credit;
		r = send_msg(c, &m);
		if (r < 0)
			return r;
		c->puts_in_flight++;
		r = drain_acks(c, c->put_window - 1);
		if (r < 0)
			return r;
		data = (const uint8_t *)data + n;
		len -= n;
		credit_bits -= credit;
	}
	return 0;
}

int eb_client_flush(struct eb_client *c)
{
	if (!c->conn)
		return -ENOTCONN;
	return drain_acks(c, 0);
}

bool eb_client_asleep(const struct eb_client *c)
{
	return c->asleep;
}

int eb_client_wait_wake(struct eb_client *c)
{
	int r = eb_client_flush(c);

	if (r < 0)
		return r;
	for (unsigned unasked = 0; c->asleep; unasked++) {
		uint64_t now = eb_now_ms();
		struct eb_msg m;

		/* A SLEEP and a WAKE are what a broker sends at its two thresholds: more than a few
		 * while a source rests are a flood, not news. */
		if (unasked > UNASKED_MAX)
			return fail(c, -EPROTO, "the broker sent SLEEP or WAKE again and again");
		if (now >= c->wake_deadline_ms) {
			c->asleep = false;
			break;
		}
		r = read_msg(c, (int)MIN(c->wake_deadline_ms - now, (uint64_t)1 << 30), &m);
		/* A caller's deadline (eb_client_set_deadline()) passed first is a timeout, said as
		 * one; otherwise the wait ran out because the rest is over. */
		if (r == -ETIMEDOUT && c->deadline_ms && eb_now_ms() >= c->deadline_ms &&
		    c->deadline_ms < c->wake_deadline_ms)
			return r;
		if (r == -ETIMEDOUT) {
			c->asleep = false;
			break;
		}
		if (r < 0)
			return r;
		if (r == 0)
			return fail(c, -EPROTO, "unexpected message while asleep");
	}
	return 0;
}

int eb_client_poll_wake(struct eb_client *c)
{
	struct pollfd pfd;

	if (!c->conn)
		return -ENOTCONN;
	for (unsigned unasked = 0; c->asleep; unasked++) {
		struct eb_msg m;
		int r;

		if (eb_now_ms() >= c->wake_deadline_ms) {
			c->asleep = false;
			break;
		}
		if (unasked > UNASKED_MAX)
			return fail(c, -EPROTO, "the broker sent SLEEP or WAKE again and again");
		/* Only what has arrived: a frame begun is read whole, within the timeout. */
		pfd = (struct pollfd){.fd = eb_conn_fd(c->conn), .events = POLLIN};
		if (!eb_conn_pending(c->conn) && poll(&pfd, 1, 0) <= 0)
			break;
		r = read_msg(c, c->timeout_ms, &m);
		if (r < 0)
			return r;
		if (r == 0)
			return fail(c, -EPROTO, "unexpected message while asleep");
	}
	return 0;
}

int eb_client_request(struct eb_client *c, size_t len, enum eb_get_mode mode)
{
	struct eb_msg m = {.type = EB_MSG_GET};
	int r;

	if (!c->conn)
		return -ENOTCONN;
	if (len == 0 || len > EB_DATA_MAX)
		return -EINVAL;
	r = srv_follow(c);
	if (r < 0)
		return r;
	if (c->gets_in_flight >= EB_CLIENT_GETS_MAX)
		return -EBUSY;
	m.get.bits = (uint32_t)len * 8;
	m.get.mode = mode;
	r = send_msg(c, &m);
	if (r < 0)
		return r;
	c->asked[c->gets_in_flight++] = (uint32_t)len;
	return 0;
}

int eb_client_receive(struct eb_client *c, void *buf, size_t size, size_t *ret_len,
                      uint32_t *ret_bits, uint32_t *ret_retry_ms)
{
	struct eb_msg m;
	uint32_t asked;
	int r;

	if (!c->conn)
		return -ENOTCONN;
	if (c->gets_in_flight == 0)
		return -EINVAL;
	/* The broker holds a GET up to 250 ms before EMPTY; allow for that beyond the timeout. */
	r = read_answer(c, c->timeout_ms + 1000, &m);
	if (r < 0)
		return r == -ETIMEDOUT ? fail(c, r, "the broker did not answer in time") : r;
	asked = c->asked[0];
	c->gets_in_flight--;
	memmove(c->asked, c->asked + 1, c->gets_in_flight * sizeof(*c->asked));
	/* Three answers to a GET; any other message is a broker out of step. */
	if (m.type == EB_MSG_DATA) {
		/* More than asked is a violation (docs/protocol.md, 3.6): what the broker means by
		 * it is unknown, so none of it is taken. */
		if (m.data.len > asked || m.data.len > size) {
			explicit_bzero(c->buf, sizeof(c->buf));
			snprintf(c->last_error, sizeof(c->last_error),
			         "the broker sent DATA of %" PRIu32 " bytes for a GET of %" PRIu32,
			         m.data.len, asked);
			eb_client_disconnect(c);
			return -EPROTO;
		}
		c->served = true;
		/* Nothing, though allowed, is no answer to act on: wait as after EMPTY. */
		if (m.data.len == 0) {
			*ret_retry_ms = ZERO_DATA_RETRY_MS;
			return -EAGAIN;
		}
		memcpy(buf, m.data.data, m.data.len);
		explicit_bzero(c->buf, EB_FRAME_HEADER_SIZE + 4 + m.data.len + 4);
		*ret_len = m.data.len;
		*ret_bits = m.data.bits;
		*ret_retry_ms = 0;
		return 0;
	}
	if (m.type == EB_MSG_EMPTY || m.type == EB_MSG_QUOTA) {
		c->served = true;
		*ret_retry_ms = m.retry.retry_ms;
		return m.type == EB_MSG_EMPTY ? -EAGAIN : -EDQUOT;
	}
	return fail(c, -EPROTO, "the broker answered a GET with something else");
}

void eb_client_set_deadline(struct eb_client *c, uint64_t deadline_ms)
{
	c->deadline_ms = deadline_ms;
}

void eb_client_set_cancel(struct eb_client *c, int fd, short events)
{
	c->cancel_fd = fd;
	c->cancel_events = events;
	if (c->conn)
		eb_conn_set_cancel(c->conn, fd, events);
}

int eb_client_set_chain(struct eb_client *c, const uint64_t *ids, unsigned n)
{
	if (n > EB_CHAIN_MAX)
		return -E2BIG;
	c->n_chain = (uint8_t)n;
	if (n > 0)
		memcpy(c->chain, ids, n * sizeof(*ids));
	return 0;
}

int eb_client_status(struct eb_client *c, struct eb_msg_status *ret)
{
	struct eb_msg m = {.type = EB_MSG_STATUS_REQ};
	int r;

	r = transact(c, &m, EB_MSG_STATUS, "the broker answered STATUS with something else");
	if (r < 0)
		return r;
	*ret = m.status;
	return 0;
}

int eb_client_report(struct eb_client *c, uint8_t table, uint64_t after, struct eb_msg_report *ret)
{
	struct eb_msg m = {
	    .type = EB_MSG_REPORT_REQ,
	    .report_req = {.table = table, .version = EB_REPORT_VERSION, .after = after}};
	int r;

	r = transact(c, &m, EB_MSG_REPORT, "the broker answered REPORT_REQ with something else");
	if (r < 0)
		return r;
	if (m.report.table != table || m.report.version != EB_REPORT_VERSION)
		return fail(c, -EPROTO,
		            "the broker answered REPORT_REQ with another table or version");
	*ret = m.report;
	return 0;
}

uint64_t eb_client_bits_credited(const struct eb_client *c)
{
	return c->bits_credited;
}

const char *eb_client_broker(const struct eb_client *c)
{
	return c->current >= 0 ? c->current_text : "(none)";
}

const char *eb_client_last_error(const struct eb_client *c)
{
	return c->last_error[0] ? c->last_error : "no error";
}
