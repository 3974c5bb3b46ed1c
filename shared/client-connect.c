/* SPDX-License-Identifier: MIT */
/* A broker client made and connected: its list of brokers (srv: names among them) and TLS
 * identity, and the pass down that list that leaves it connected, HELLO answered, to the first
 * broker that takes it. The messages over the connection are client.c's. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client-internal.h"
#include "conn.h"
#include "credential.h"
#include "key.h"
#include "lookup.h"
#include "macro.h"
#include "sigpipe.h"
#include "srv.h"
#include "time-util.h"
#include "tls.h"

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

/* Parses the brokers' addresses into c, each srv: name with its (not yet looked up) targets. */
static int parse_brokers(struct eb_client *c, const struct eb_client_options *o, char **ret_error)
{
	int r;

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
	}
	c->n_uris = o->n_brokers;
	return 0;
}

static bool need_tls(const struct eb_client *c)
{
	for (unsigned i = 0; i < c->n_uris; i++)
		if (eb_uri_is_tls(&c->uris[i]))
			return true;
	return false;
}

/* The TLS identity: the user given, or else the credential eb.user. */
static int pick_user(struct eb_client *c, const char *user, char **ret_error)
{
	int r;

	if (user && user[0] && strlen(user) <= EB_KIND_MAX)
		snprintf(c->user, sizeof(c->user), "%s", user);
	else if (!user || !user[0]) {
		/* The credential eb.user, as a hypervisor hands a guest its identity beside eb.key
		 * (docs/decisions.md). */
		r = eb_credential_read_word("eb.user", c->user, sizeof(c->user));
		if (r < 0) {
			*ret_error = strdup_printf(
			    "The credential eb.user in %s is not one printable name of at most %d bytes",
			    getenv("CREDENTIALS_DIRECTORY"), EB_KIND_MAX);
			return r;
		}
	}
	if (!c->user[0]) {
		*ret_error =
		    strdup_printf("A TLS broker (%s) needs --user NAME (or the credential eb.user)",
		                  c->uri_text[0]);
		return -EINVAL;
	}
	return 0;
}

/* Sets up TLS with the user's pre-shared key, wiped as soon as the context holds it. */
static int load_identity(struct eb_client *c, const struct eb_client_options *o, char **ret_error)
{
	_cleanup_free_ char *default_key = NULL;
	const char *key_file = o->key_file;
	uint8_t key[EB_KEY_SIZE];
	int r;

	r = pick_user(c, o->user, ret_error);
	if (r < 0)
		return r;
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
	r = eb_tls_client_new(c->user, o->key_id, key, &c->tls);
	explicit_bzero(key, sizeof(key));
	if (r < 0) {
		*ret_error = strdup_printf("Failed to set up TLS: %s", strerror(-r));
		return r;
	}
	return 0;
}

int eb_client_new(const struct eb_client_options *o, struct eb_client **ret, char **ret_error)
{
	_cleanup_(eb_client_freep) struct eb_client *c = NULL;
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
	r = parse_brokers(c, o, ret_error);
	if (r < 0)
		return r;
	if (need_tls(c)) {
		r = load_identity(c, o, ret_error);
		if (r < 0)
			return r;
	}
	*ret = TAKE_PTR(c);
	return 0;
}

int eb_client_set_key(struct eb_client *c, const char *key_id, const uint8_t *key)
{
	struct ssl_ctx_st *tls = NULL;
	int r;

	if (!c->tls)
		return -EOPNOTSUPP;
	r = eb_tls_client_new(c->user, key_id, key, &tls);
	if (r < 0)
		return r;
	/* A connection made with the old context holds a reference to it (SSL_new()), so that
	 * session goes on; the next connect uses the new one. */
	eb_tls_free(c->tls);
	c->tls = tls;
	return 0;
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

/* A connection attempt waits no longer than an operation may, nor past the deadline of
 * eb_client_connect_retry() or the caller's: a --timeout must hold even against a broker that
 * hangs. */
static int op_timeout(const struct eb_client *c)
{
	return client_bounded(c, c->timeout_ms);
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

/* Opens the socket to uri, broker i of the list or one of its SRV targets, named name in errors,
 * and makes it c's connection. */
static int open_connection(struct eb_client *c, unsigned i, const struct eb_uri *uri,
                           const char *name)
{
	const char *why;
	int fd, r;

	r = eb_uri_connect_cancel(uri, op_timeout(c), c->cancel_fd, c->cancel_events, &fd);
	if (r == -ECANCELED) {
		snprintf(c->last_error, sizeof(c->last_error), "stopped");
		return r;
	}
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
	return 0;
}

/* A TLS handshake or HELLO that failed as a refused user or key does: said so, and -EACCES, which
 * eb_client_connect_retry() does not retry. */
static int refused(struct eb_client *c, const char *name, int r)
{
	if (r == -EACCES || r == -EPROTO || r == -ECONNRESET || r == -EPIPE)
		snprintf(c->last_error, sizeof(c->last_error),
		         "TLS handshake with %s failed: the broker refused user \"%s\" or its key",
		         name, c->user);
	r = r == -ECONNRESET || r == -EPIPE || r == -EPROTO ? -EACCES : r;
	return connect_failed(c, name, r);
}

/* The handshake first, on its own: a broker at one of its limits closes a connection it will not
 * take before it answers the ClientHello, while a refused user or key gets a TLS alert. The first
 * is worth another try later, the second is not. */
static int handshake(struct eb_client *c, const struct eb_uri *uri, const char *name)
{
	struct eb_sigpipe_guard g;
	int r;

	eb_sigpipe_block(&g);
	r = eb_conn_write_full(c->conn, NULL, 0, op_timeout(c));
	eb_sigpipe_restore(&g);
	if (r < 0 && eb_uri_is_tls(uri) && eb_conn_failure(c->conn) == EB_CONN_FAIL_EOF) {
		snprintf(
		    c->last_error, sizeof(c->last_error),
		    "%s closed the connection before the TLS handshake finished (busy, at a connection limit, or behind a load balancer without send-proxy-v2 whose address is in the broker's proxy-protocol-from=?)",
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
		return refused(c, name, client_fail(c, r, NULL));
	return 0;
}

static int send_hello(struct eb_client *c, const char *name)
{
	struct eb_msg m = {.type = EB_MSG_HELLO};
	int r;

	m.hello.version = EB_PROTO_VERSION;
	m.hello.roles = (uint8_t)c->roles;
	m.hello.claim_mbits_per_byte = c->claim;
	snprintf(m.hello.kind, sizeof(m.hello.kind), "%s", c->kind);
	m.hello.n_chain = c->n_chain;
	memcpy(m.hello.chain, c->chain, c->n_chain * sizeof(*c->chain));
	r = client_send(c, &m);
	if (r < 0)
		return refused(c, name, r);
	return 0;
}

static int await_welcome(struct eb_client *c, const struct eb_uri *uri, const char *name)
{
	struct eb_msg m;
	int r;

	r = client_read_answer(c, op_timeout(c), &m);
	if (r == -ETIMEDOUT) {
		/* client.c keeps the connection after a read that timed out, for a caller that may
		 * wait again; a broker that does not answer HELLO in time is one to leave. */
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

/* Connects to uri, broker i of the list or one of its SRV targets, named name in errors. */
static int connect_one(struct eb_client *c, unsigned i, const struct eb_uri *uri, const char *name)
{
	int r;

	c->current = (int)i;
	snprintf(c->current_text, sizeof(c->current_text), "%s", name);
	r = open_connection(c, i, uri, name);
	if (r >= 0)
		r = handshake(c, uri, name);
	if (r >= 0)
		r = send_hello(c, name);
	if (r >= 0)
		r = await_welcome(c, uri, name);
	return r;
}
/* The caller's deadline or that of eb_client_connect_retry() has passed: the rest of a pass
 * would only start look-ups and connects it cannot wait for. */
static bool out_of_time(const struct eb_client *c)
{
	uint64_t now = eb_now_ms();

	return (c->deadline_ms && now >= c->deadline_ms) ||
	       (c->connect_deadline_ms && now >= c->connect_deadline_ms);
}

/* What a look-up of the records may wait: as long as a connection attempt, and no longer than a
 * stop. */
static struct eb_lookup_bound lookup_bound(const struct eb_client *c)
{
	return (struct eb_lookup_bound){
	    .deadline_ms = eb_now_ms() + (uint64_t)op_timeout(c),
	    .cancel_fd = c->cancel_fd,
	    .cancel_events = c->cancel_events,
	};
}

/* Tries a srv: address's targets in RFC 2782's order, looking the records up again when their
 * time is up or every target failed. */
static int connect_srv(struct eb_client *c, unsigned i)
{
	struct eb_srv *s = c->srv[i];
	struct eb_lookup_bound bound = lookup_bound(c);
	size_t order[EB_SRV_TARGETS_MAX];
	int n, r = -EHOSTUNREACH;

	c->current = (int)i;
	snprintf(c->current_text, sizeof(c->current_text), "%s", c->uri_text[i]);
	n = eb_srv_refresh(s, eb_now_ms(), &bound);
	/* This pass goes where the records say now: a change seen before it, or by its own
	 * look-up, is followed by it. */
	eb_srv_settled(s);
	if (n == -ECANCELED) {
		snprintf(c->last_error, sizeof(c->last_error), "stopped");
		return n;
	}
	if (n < 0) {
		snprintf(c->last_error, sizeof(c->last_error), "%s", eb_srv_error(s));
		return n == -ENOENT || n == -EBADMSG ? -EHOSTUNREACH : n;
	}
	n = (int)eb_srv_try_order(s, c->leaving ? c->left.host : NULL, c->left.port, order);
	for (int k = 0; k < n; k++) {
		size_t j = order[k];
		const struct eb_srv_record *t = eb_srv_target(s, j);
		char name[sizeof(c->current_text)];

		c->target = (struct eb_uri){.kind = EB_URI_TCP, .port = t->port};
		snprintf(c->target.host, sizeof(c->target.host), "%s", t->target);
		snprintf(name, sizeof(name), "%s (%s:%u)", c->uri_text[i], t->target,
		         (unsigned)t->port);
		r = connect_one(c, i, &c->target, name);
		if (r >= 0 || r == -ECANCELED)
			return r;
		eb_srv_failed(s, j);
		if (out_of_time(c))
			break;
	}
	return r;
}

/* Once the answer's time is up, the records of the srv: address in use are looked up again; when
 * they changed and no longer put its target first (removed, or one of a lower priority number
 * there), the connection is left, at a moment spread over EB_SRV_LEAVE_SPREAD_S, as if the broker
 * had closed it (answers in flight are lost, as then), so that the caller's reconnect goes where
 * the records now say. Records that did not change keep the connection, even on a target below
 * one that failed: that one is still down as far as this client knows, and trying it again would
 * cost every client of the fleet a reconnection per look-up. So does a look-up that fails for
 * want of an answer. */
int client_srv_follow(struct eb_client *c)
{
	struct eb_lookup_bound bound;
	struct eb_srv *s;
	int r;

	if (!c->conn || c->current < 0 || !(s = c->srv[c->current]))
		return 0;
	if (eb_srv_expired(s, eb_now_ms())) {
		bound = lookup_bound(c);
		r = eb_srv_refresh(s, eb_now_ms(), &bound);
		if (r == -ECANCELED)
			return client_fail(c, r, "stopped");
	}
	if (!eb_srv_should_leave(s, c->target.host, c->target.port, eb_now_ms()))
		return 0;
	snprintf(c->last_error, sizeof(c->last_error), "%s: the SRV records changed; leaving %s:%u",
	         c->uri_text[c->current], c->target.host, (unsigned)c->target.port);
	eb_client_disconnect(c);
	return -ENOTCONN;
}

bool eb_client_has_other(const struct eb_client *c)
{
	if (c->n_uris > 1)
		return true;
	return c->conn && c->current >= 0 && c->srv[c->current] &&
	       eb_srv_has_peer(c->srv[c->current], c->target.host, c->target.port);
}

void eb_client_leave(struct eb_client *c, const char *why)
{
	struct eb_srv *s = c->current >= 0 ? c->srv[c->current] : NULL;

	/* A srv: target with a peer of its priority moves to the peer; anything else to the next
	 * address, as after a broker that went away. */
	c->leaving = c->conn && s && eb_srv_has_peer(s, c->target.host, c->target.port);
	if (c->leaving)
		c->left = c->target;
	snprintf(c->last_error, sizeof(c->last_error), "%s", why);
	eb_client_disconnect(c);
}

int client_reconnect(struct eb_client *c)
{
	/* eb_client_connect() starts at the broker after the one last used: start one earlier. */
	if (c->current >= 0)
		c->current = (int)(((unsigned)c->current + c->n_uris - 1) % c->n_uris);
	return eb_client_connect(c);
}

int eb_client_connect(struct eb_client *c)
{
	unsigned start = c->current < 0 ? 0 : ((unsigned)c->current + 1) % c->n_uris;
	int r = -EHOSTUNREACH;

	if (c->leaving)
		start = (unsigned)c->current;

	eb_client_disconnect(c);
	for (unsigned k = 0; k < c->n_uris; k++) {
		unsigned i = (start + k) % c->n_uris;

		r = c->srv[i] ? connect_srv(c, i) : connect_one(c, i, &c->uris[i], c->uri_text[i]);
		/* A stop (eb_client_set_cancel()) ends the pass: the next broker's connect would
		 * not hear it. */
		if (r >= 0 || r == -ECANCELED || out_of_time(c))
			break;
	}
	c->leaving = false;
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
