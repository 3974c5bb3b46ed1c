/* SPDX-License-Identifier: MIT */
#include "session.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <linux/vm_sockets.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/crypto.h>
#include <systemd/sd-event.h>

#include "broker.h"
#include "conn.h"
#include "log.h"
#include "pool.h"
#include "scheduler.h"

static int on_io(sd_event_source *src, int fd, uint32_t revents, void *userdata);
static int on_defer(sd_event_source *src, void *userdata);
static int on_timer(sd_event_source *src, uint64_t usec, void *userdata);

/* Only for sessions past authentication: every state from SESSION_HELLO on has a user. */
static const struct eb_user *session_user(const struct session *s)
{
	assert(s->user >= 0);
	return &s->broker->conf->users[s->user];
}

static const char *user_name(const struct session *s)
{
	return s->user >= 0 ? s->broker->conf->users[s->user].name : "(unauthenticated)";
}

/* The uid, gid and pid of a unix peer, as the kernel recorded them at connect(). */
static int peer_cred(int fd, struct ucred *ret)
{
	socklen_t l = sizeof(*ret);

	return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, ret, &l) < 0 ? negative_errno() : 0;
}

static void describe_peer(struct session *s, int fd, const char *listener)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char addr[INET6_ADDRSTRLEN] = "?";

	if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0) {
		snprintf(s->peer, sizeof(s->peer), "%s peer", listener);
		return;
	}
	switch (ss.ss_family) {
	case AF_INET: {
		struct sockaddr_in *in = (struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &in->sin_addr, addr, sizeof(addr));
		snprintf(s->peer, sizeof(s->peer), "%s %s:%u", listener, addr, ntohs(in->sin_port));
		break;
	}
	case AF_INET6: {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &in6->sin6_addr, addr, sizeof(addr));
		snprintf(s->peer, sizeof(s->peer), "%s [%s]:%u", listener, addr,
		         ntohs(in6->sin6_port));
		break;
	}
	case AF_VSOCK: {
		struct sockaddr_vm *vm = (struct sockaddr_vm *)&ss;

		snprintf(s->peer, sizeof(s->peer), "%s cid=%u port=%u", listener, vm->svm_cid,
		         vm->svm_port);
		break;
	}
	case AF_UNIX: {
		struct ucred uc;

		if (peer_cred(fd, &uc) == 0)
			snprintf(s->peer, sizeof(s->peer), "%s pid=%d uid=%u gid=%u", listener,
			         (int)uc.pid, (unsigned)uc.uid, (unsigned)uc.gid);
		else
			snprintf(s->peer, sizeof(s->peer), "%s peer", listener);
		break;
	}
	default:
		snprintf(s->peer, sizeof(s->peer), "%s peer", listener);
	}
}

/* Only a whole frame is worth coming back for: half of one waits for the socket. */
static bool has_whole_frame(const struct session *s)
{
	struct eb_frame f;
	size_t size;

	return eb_frame_parse(s->rbuf + s->rstart, s->rend - s->rstart, &f, &size) != -EAGAIN;
}

static void session_update_events(struct session *s)
{
	uint32_t events = 0;
	bool readable_buffered;

	if (s->state == SESSION_CLOSING) {
		if (s->wend > s->wstart)
			events |= EPOLLOUT;
	} else {
		if (s->rend < SESSION_RBUF_SIZE)
			events |= EPOLLIN;
		if (s->wend > s->wstart || eb_conn_wants_write(s->conn))
			events |= EPOLLOUT;
	}
	(void)sd_event_source_set_io_events(s->io, events);

	/* Bytes that TLS already decrypted, or whole frames we stopped parsing for lack of
	 * output room, do not make the fd readable again: come back for them soon. */
	readable_buffered = s->state != SESSION_CLOSING && !s->get_pending &&
	                    session_has_room(s, EB_FRAME_MAX) &&
	                    (eb_conn_pending(s->conn) || has_whole_frame(s));
	if (readable_buffered)
		(void)sd_event_source_set_enabled(s->defer, SD_EVENT_ONESHOT);
}

bool session_has_room(const struct session *s, size_t bytes)
{
	return SESSION_WBUF_SIZE - (s->wend - s->wstart) >= bytes;
}

int session_send(struct session *s, const struct eb_msg *m)
{
	int n;

	if (s->wstart > 0 && s->wstart == s->wend)
		s->wstart = s->wend = 0;
	if (SESSION_WBUF_SIZE - s->wend < EB_FRAME_MAX && s->wstart > 0) {
		memmove(s->wbuf, s->wbuf + s->wstart, s->wend - s->wstart);
		s->wend -= s->wstart;
		s->wstart = 0;
	}
	n = eb_msg_encode(m, s->wbuf + s->wend, SESSION_WBUF_SIZE - s->wend);
	if (n < 0)
		return n;
	s->wend += (size_t)n;
	return 0;
}

static void send_error(struct session *s, enum eb_error_code code, const char *text)
{
	struct eb_msg m = {.type = EB_MSG_ERROR, .error.code = code};

	snprintf(m.error.text, sizeof(m.error.text), "%s", text);
	(void)session_send(s, &m);
	s->state = SESSION_CLOSING;
	scheduler_dequeue(s->broker, s);
}

static void send_retry(struct session *s, enum eb_msg_type type, uint32_t ms)
{
	struct eb_msg m = {.type = type, .retry.retry_ms = ms};

	(void)session_send(s, &m);
}

/* Flushes what the write buffer holds; returns a negative errno when the peer is gone. */
static int session_flush(struct session *s)
{
	while (s->wend > s->wstart) {
		ssize_t k = eb_conn_write(s->conn, s->wbuf + s->wstart, s->wend - s->wstart);

		if (k == -EAGAIN)
			return 0;
		if (k < 0)
			return (int)k;
		/* Entropy that has left for the peer must not linger in our memory. */
		explicit_bzero(s->wbuf + s->wstart, (size_t)k);
		s->wstart += (size_t)k;
	}
	s->wstart = s->wend = 0;
	return 0;
}

static void count_roles(struct session *s, int delta)
{
	if (s->roles & EB_ROLE_SOURCE)
		s->broker->n_sources += delta;
	if (s->roles & EB_ROLE_SINK)
		s->broker->n_sinks += delta;
	broker_mark_status(s->broker);
}

void session_free(struct session *s)
{
	struct broker *b;

	if (!s)
		return;
	b = s->broker;
	scheduler_dequeue(b, s);
	if (s->state == SESSION_READY)
		count_roles(s, -1);
	if (s->prev)
		s->prev->next = s->next;
	else
		b->sessions = s->next;
	if (s->next)
		s->next->prev = s->prev;
	b->n_sessions--;
	sd_event_source_disable_unref(s->io);
	sd_event_source_disable_unref(s->defer);
	sd_event_source_disable_unref(s->timer);
	eb_conn_free(s->conn);
	if (s->rbuf)
		explicit_bzero(s->rbuf, SESSION_RBUF_SIZE);
	if (s->wbuf)
		explicit_bzero(s->wbuf, SESSION_WBUF_SIZE);
	free(s->rbuf);
	free(s->wbuf);
	free(s);
}

static int identify_unix(struct session *s)
{
	struct ucred uc;
	const struct eb_user *u;
	int r;

	r = peer_cred(eb_conn_fd(s->conn), &uc);
	if (r < 0)
		return log_warning_errno(r, "Refusing %s: cannot read its credentials: %m",
		                         s->peer);
	u = eb_conf_find_unix_peer(s->broker->conf, uc.uid, uc.gid);
	if (!u) {
		log_warning("Refusing %s: no [user] section maps uid %u or gid %u", s->peer,
		            (unsigned)uc.uid, (unsigned)uc.gid);
		return -EACCES;
	}
	s->user = (int)(u - s->broker->conf->users);
	return 0;
}

static int identify_tls(struct session *s)
{
	const char *id = eb_conn_identity(s->conn);
	const struct eb_user *u = id ? eb_conf_find_user(s->broker->conf, id) : NULL;

	if (!u)
		return -EACCES;
	s->user = (int)(u - s->broker->conf->users);
	return 0;
}

int session_new(struct broker *b, int fd, bool tls, const char *listener, struct session **ret)
{
	struct session *s;
	int r;

	s = calloc(1, sizeof(*s));
	if (!s) {
		safe_close(fd);
		return -ENOMEM;
	}
	s->broker = b;
	s->user = -1;
	s->listener = listener;
	describe_peer(s, fd, listener);
	s->next = b->sessions;
	if (b->sessions)
		b->sessions->prev = s;
	b->sessions = s;
	b->n_sessions++;

	r = eb_conn_new(fd, tls ? b->tls : NULL, true, true, &s->conn);
	if (r < 0) {
		safe_close(fd);
		goto fail;
	}
	s->rbuf = malloc(SESSION_RBUF_SIZE);
	s->wbuf = malloc(SESSION_WBUF_SIZE);
	if (!s->rbuf || !s->wbuf) {
		r = -ENOMEM;
		goto fail;
	}
	r = sd_event_add_io(b->event, &s->io, fd, EPOLLIN, on_io, s);
	if (r < 0)
		goto fail;
	r = sd_event_add_defer(b->event, &s->defer, on_defer, s);
	if (r < 0)
		goto fail;
	(void)sd_event_source_set_enabled(s->defer, SD_EVENT_OFF);
	r = sd_event_add_time_relative(b->event, &s->timer, CLOCK_MONOTONIC,
	                               SESSION_HELLO_TIMEOUT_USEC, 0, on_timer, s);
	if (r < 0)
		goto fail;

	if (tls)
		s->state = SESSION_HANDSHAKE;
	else {
		s->state = SESSION_HELLO;
		if (identify_unix(s) < 0) {
			send_error(s, EB_ERR_AUTH, "no user maps to this peer");
			session_pump(s);
			*ret = NULL;
			return 0;
		}
	}
	log_debug("Accepted %s", s->peer);
	*ret = s;
	return 0;
fail:
	session_free(s);
	return r;
}

static void refuse(struct session *s, enum eb_error_code code, const char *text)
{
	send_error(s, code, text);
}

/* Whether a unix peer's uid or gid still maps to user u in conf. */
static bool unix_peer_maps_to(struct session *s, const struct eb_conf *conf,
                              const struct eb_user *u)
{
	struct ucred uc;

	return peer_cred(eb_conn_fd(s->conn), &uc) == 0 &&
	       eb_conf_find_unix_peer(conf, uc.uid, uc.gid) == u;
}

void session_rebind(struct session *s, const struct eb_conf *old, const struct eb_conf *new)
{
	const struct eb_user *was, *u;
	const char *why = NULL;

	if (s->state == SESSION_HANDSHAKE) {
		/* Its key may have been looked up in the old file already, and which one was used
		 * is not kept: the client connects again and is judged by the new one. */
		log_info("Closing %s: its TLS handshake began before the reload", s->peer);
		session_free(s);
		return;
	}
	if (s->user < 0)
		return;
	was = &old->users[s->user];
	u = eb_conf_find_user(new, was->name);
	if (!u)
		why = "its user is gone";
	else if (eb_conn_is_tls(s->conn) &&
	         (!u->has_key || CRYPTO_memcmp(u->key, was->key, EB_KEY_SIZE) != 0))
		/* A key is rotated because the old one may be known: what it opened closes. */
		why = "its user's key changed";
	else if (!eb_conn_is_tls(s->conn) && !unix_peer_maps_to(s, new, u))
		why = "its uid and gid no longer map to its user";
	else if (s->roles & ~u->roles)
		why = "a role it uses was revoked";
	if (!why || s->state == SESSION_CLOSING) {
		s->user = u ? (int)(u - new->users) : -1;
		return;
	}
	log_warning("Closing %s (user %s): %s in the reloaded configuration", s->peer, was->name,
	            why);
	s->user = -1;
	send_error(s, EB_ERR_AUTH, "access revoked by a configuration reload");
	session_update_events(s);
}

static void handle_hello(struct session *s, const struct eb_msg_hello *h)
{
	const struct eb_user *u = session_user(s);
	char want[64], have[64];
	struct eb_msg m = {.type = EB_MSG_WELCOME};

	if (h->version != EB_PROTO_VERSION) {
		log_warning("Refusing %s (user %s): protocol version %u, this broker speaks %u",
		            s->peer, u->name, h->version, EB_PROTO_VERSION);
		return refuse(s, EB_ERR_VERSION, "unsupported protocol version");
	}
	if ((h->roles & ~u->roles) != 0) {
		log_warning("Refusing %s: user %s asked for roles %s but has only %s", s->peer,
		            u->name, eb_roles_to_string(h->roles, want, sizeof(want)),
		            eb_roles_to_string(u->roles, have, sizeof(have)));
		return refuse(s, EB_ERR_FORBIDDEN, "role not allowed for this user");
	}
	s->roles = h->roles;
	snprintf(s->kind, sizeof(s->kind), "%s", h->kind);
	s->state = SESSION_READY;
	(void)sd_event_source_set_enabled(s->timer, SD_EVENT_OFF);
	count_roles(s, +1);

	m.welcome.version = EB_PROTO_VERSION;
	m.welcome.roles = (uint8_t)s->roles;
	m.welcome.max_data = EB_DATA_MAX;
	snprintf(m.welcome.user, sizeof(m.welcome.user), "%s", u->name);
	(void)session_send(s, &m);
	log_info("%s: user %s connected as %s (%s)", s->peer, u->name,
	         eb_roles_to_string(s->roles, want, sizeof(want)), s->kind[0] ? s->kind : "-");

	if ((s->roles & EB_ROLE_SOURCE) && s->broker->sources_asleep) {
		send_retry(s, EB_MSG_SLEEP, SCHEDULER_SLEEP_MS);
		s->asleep = true;
	}
}

/* The broker's own continuous test on what sources send: a PUT that is one repeated byte, or
 * that begins as the previous one did, carries no credit whatever its source claims. */
static bool put_looks_stuck(struct session *s, const struct eb_msg_put *p)
{
	size_t head = MIN((size_t)p->len, sizeof(s->last_put));
	bool same_as_last, constant = p->len >= 16;

	for (size_t i = 1; constant && i < p->len; i++)
		if (p->data[i] != p->data[0])
			constant = false;
	same_as_last = s->have_last_put && head == sizeof(s->last_put) &&
	               memcmp(s->last_put, p->data, head) == 0;
	if (head == sizeof(s->last_put)) {
		memcpy(s->last_put, p->data, head);
		s->have_last_put = true;
	}
	return constant || same_as_last;
}

static void handle_put(struct session *s, const struct eb_msg_put *p)
{
	const struct eb_user *u = session_user(s);
	uint64_t claim = p->credit_bits, credited = 0;
	struct eb_msg m = {.type = EB_MSG_PUT_ACK};
	int r;

	claim = MIN(claim, (uint64_t)p->len * u->max_credit_per_byte);
	if (claim > 0 && put_looks_stuck(s, p)) {
		if (!s->stuck_logged)
			log_warning("%s: data from user %s repeats itself; crediting none of it",
			            s->peer, u->name);
		s->stuck_logged = true;
		claim = 0;
	}
	r = eb_pool_add(s->broker->pool, p->data, p->len, claim, &credited);
	if (r < 0) {
		log_error_errno(r, "Failed to add to the pool: %m");
		return refuse(s, EB_ERR_INTERNAL, "pool failure");
	}
	s->bits_in += credited;
	s->broker->bits_in += credited;
	m.put_ack.credited_bits = (uint32_t)credited;
	m.put_ack.accepted_bytes = p->len;
	(void)session_send(s, &m);
	broker_pool_changed(s->broker);
}

static void handle_get(struct session *s, const struct eb_msg_get *g)
{
	s->get = *g;
	s->get_pending = true;
	s->get_since_usec = broker_now(s->broker);
	if (s->broker->waitq || !session_serve_get(s, false))
		scheduler_enqueue(s->broker, s);
}

static void handle_status(struct session *s)
{
	struct eb_msg m = {.type = EB_MSG_STATUS};

	broker_fill_status(s->broker, &m.status);
	(void)session_send(s, &m);
}

bool session_serve_get(struct session *s, bool final)
{
	struct broker *b = s->broker;
	const struct eb_user *u = session_user(s);
	struct eb_msg m = {.type = EB_MSG_DATA};
	size_t want = s->get.bits / 8, n;
	uint32_t retry;
	int r;

	if (s->get.mode == EB_GET_FULL) {
		n = scheduler_affordable(b, s, u, want, &retry);
		if (n == 0 && retry > 0) {
			send_retry(s, EB_MSG_QUOTA, retry);
			goto answered;
		}
		r = n == 0 ? -EAGAIN : eb_pool_take_full(b->pool, b->scratch, n);
	} else {
		n = want;
		r = eb_pool_take_drbg(b->pool, b->scratch, n);
	}
	if (r == -EAGAIN) {
		if (!final)
			return false;
		send_retry(s, EB_MSG_EMPTY, scheduler_empty_retry_ms(b));
		goto answered;
	}
	if (r < 0) {
		log_error_errno(r, "Failed to draw from the pool: %m");
		refuse(s, EB_ERR_INTERNAL, "pool failure");
		return true;
	}
	if (s->get.mode == EB_GET_FULL) {
		scheduler_charge(b, s, u, n);
		m.data.bits = (uint32_t)(n * 8);
		s->bits_out += n * 8;
		b->bits_out += n * 8;
	} else
		b->bytes_drbg += n;
	m.data.data = b->scratch;
	m.data.len = (uint32_t)n;
	r = session_send(s, &m);
	explicit_bzero(b->scratch, n);
	if (r < 0) {
		log_error_errno(r, "Failed to encode DATA for %s: %m", s->peer);
		refuse(s, EB_ERR_INTERNAL, "encoding failure");
		return true;
	}
	/* Answered before the broker looks at the pool again: that may serve the queue, and this
	 * GET must not be answered twice. */
	s->get_pending = false;
	broker_pool_changed(b);
	return true;
answered:
	s->get_pending = false;
	return true;
}

static void handle_frame(struct session *s, const struct eb_frame *f)
{
	const struct eb_user *u;
	char roles[64];
	struct eb_msg m;
	int r;

	r = eb_msg_decode(f, &m);
	if (r < 0) {
		log_warning("Closing %s (user %s): malformed %s frame", s->peer, user_name(s),
		            eb_msg_type_to_string(f->type));
		return refuse(s, EB_ERR_PROTOCOL, "malformed message");
	}
	if (s->state == SESSION_HELLO) {
		if (m.type != EB_MSG_HELLO) {
			log_warning("Closing %s (user %s): sent %s before HELLO", s->peer,
			            user_name(s), eb_msg_type_to_string(m.type));
			return refuse(s, EB_ERR_PROTOCOL, "HELLO expected");
		}
		return handle_hello(s, &m.hello);
	}
	u = session_user(s);
	switch (m.type) {
	case EB_MSG_PUT:
		if (!(s->roles & EB_ROLE_SOURCE)) {
			log_warning(
			    "Refusing PUT from %s: user %s may not donate (connected as %s)",
			    s->peer, u->name, eb_roles_to_string(s->roles, roles, sizeof(roles)));
			return refuse(s, EB_ERR_FORBIDDEN, "this user may not donate");
		}
		return handle_put(s, &m.put);
	case EB_MSG_GET:
		if (!(s->roles & EB_ROLE_SINK)) {
			log_warning("Refusing GET from %s: user %s may not draw (connected as %s)",
			            s->peer, u->name,
			            eb_roles_to_string(s->roles, roles, sizeof(roles)));
			return refuse(s, EB_ERR_FORBIDDEN, "this user may not draw");
		}
		return handle_get(s, &m.get);
	case EB_MSG_STATUS_REQ:
		if (!(s->roles & EB_ROLE_ADMIN)) {
			log_warning("Refusing STATUS from %s: user %s is not an admin", s->peer,
			            u->name);
			return refuse(s, EB_ERR_FORBIDDEN, "this user may not read status");
		}
		return handle_status(s);
	case EB_MSG_ERROR:
		log_info("%s (user %s) reported an error and leaves: %s", s->peer, u->name,
		         m.error.text);
		s->state = SESSION_CLOSING;
		return;
	case EB_MSG_HELLO:
	case EB_MSG_WELCOME:
	case EB_MSG_PUT_ACK:
	case EB_MSG_DATA:
	case EB_MSG_EMPTY:
	case EB_MSG_SLEEP:
	case EB_MSG_WAKE:
	case EB_MSG_QUOTA:
	case EB_MSG_STATUS:
	case _EB_MSG_MAX:
	case _EB_MSG_INVALID:
		break;
	}
	log_warning("Closing %s (user %s): unexpected %s", s->peer, u->name,
	            eb_msg_type_to_string(m.type));
	refuse(s, EB_ERR_PROTOCOL, "unexpected message");
}

/* Parses whole frames from rbuf while there is room to answer them. */
static bool process_frames(struct session *s)
{
	bool progress = false;

	while (s->state == SESSION_HELLO || s->state == SESSION_READY) {
		struct eb_frame f;
		size_t size;
		int r;

		if (s->get_pending || !session_has_room(s, EB_FRAME_MAX))
			break;
		r = eb_frame_parse(s->rbuf + s->rstart, s->rend - s->rstart, &f, &size);
		if (r == -EAGAIN)
			break;
		if (r < 0) {
			log_warning("Closing %s (user %s): %s frame header", s->peer, user_name(s),
			            r == -EMSGSIZE ? "oversized" : "malformed");
			refuse(s, r == -EMSGSIZE ? EB_ERR_TOO_LARGE : EB_ERR_PROTOCOL,
			       "malformed frame");
			return true;
		}
		handle_frame(s, &f);
		/* PUT data has been conditioned into the pool: wipe our copy of it. */
		explicit_bzero(s->rbuf + s->rstart, size);
		s->rstart += size;
		progress = true;
	}
	if (s->rstart == s->rend)
		s->rstart = s->rend = 0;
	else if (s->rstart > 0 && SESSION_RBUF_SIZE - s->rend < EB_FRAME_MAX) {
		memmove(s->rbuf, s->rbuf + s->rstart, s->rend - s->rstart);
		s->rend -= s->rstart;
		s->rstart = 0;
	}
	return progress;
}

static int do_handshake(struct session *s)
{
	int r = eb_conn_handshake(s->conn);

	if (r == -EAGAIN)
		return 0;
	if (r < 0) {
		enum eb_conn_failure f = eb_conn_failure(s->conn);
		const char *tls_err = eb_conn_tls_error(s->conn);

		if (f == EB_CONN_FAIL_EOF)
			log_info("%s closed during the TLS handshake", s->peer);
		else if (f == EB_CONN_FAIL_UNKNOWN_USER)
			log_warning("Refusing %s: unknown user \"%s\"", s->peer,
			            eb_conn_offered_identity(s->conn));
		else if (f == EB_CONN_FAIL_BAD_KEY)
			log_warning("Refusing %s: wrong key for user \"%s\"", s->peer,
			            eb_conn_offered_identity(s->conn));
		else
			log_warning("Refusing %s: %s (%s)", s->peer, eb_conn_failure_to_string(f),
			            tls_err[0] ? tls_err : "no detail");
		return -EACCES;
	}
	if (identify_tls(s) < 0) {
		log_warning("Refusing %s: its TLS identity names no user", s->peer);
		return -EACCES;
	}
	s->state = SESSION_HELLO;
	return 0;
}

/* A peer that closes, even with a reset because it left acknowledgements unread, has simply
 * left; only other errors are worth an operator's attention. */
static void log_gone(struct session *s, int r)
{
	if (r == 0 || r == -ECONNRESET || r == -EPIPE)
		log_debug("%s (user %s) closed the connection", s->peer, user_name(s));
	else
		log_info("%s (user %s) went away: %s", s->peer, user_name(s), strerror(-r));
}

void session_pump(struct session *s)
{
	for (unsigned budget = 16; budget > 0; budget--) {
		bool progress = false;
		int r;

		if (s->state == SESSION_HANDSHAKE) {
			r = do_handshake(s);
			if (r < 0)
				goto close;
			if (s->state == SESSION_HANDSHAKE)
				break;
		}
		r = session_flush(s);
		if (r < 0) {
			if (s->state != SESSION_CLOSING)
				log_gone(s, r);
			goto close;
		}
		if (s->state == SESSION_CLOSING) {
			if (s->wend == s->wstart)
				goto close;
			break;
		}
		if (s->rend < SESSION_RBUF_SIZE) {
			ssize_t k =
			    eb_conn_read(s->conn, s->rbuf + s->rend, SESSION_RBUF_SIZE - s->rend);

			if (k == 0 || (k < 0 && k != -EAGAIN)) {
				log_gone(s, (int)k);
				goto close;
			}
			if (k > 0) {
				s->rend += (size_t)k;
				progress = true;
			}
		}
		if (process_frames(s))
			progress = true;
		if (s->wend > s->wstart)
			progress = true; /* flush at the top of the next round */
		if (!progress)
			break;
	}
	session_update_events(s);
	return;
close:
	session_free(s);
}

static int on_io(sd_event_source *src, int fd, uint32_t revents, void *userdata)
{
	(void)src, (void)fd, (void)revents;
	session_pump(userdata);
	return 0;
}

static int on_defer(sd_event_source *src, void *userdata)
{
	(void)src;
	session_pump(userdata);
	return 0;
}

static int on_timer(sd_event_source *src, uint64_t usec, void *userdata)
{
	struct session *s = userdata;

	(void)src, (void)usec;
	if (s->state == SESSION_READY) {
		/* A GET waited its time in the queue: answer it now, EMPTY if need be. */
		if (s->get_pending && session_serve_get(s, true)) {
			scheduler_dequeue(s->broker, s);
			session_pump(s);
		}
		return 0;
	}
	log_warning("Closing %s: no HELLO within %llu s", s->peer,
	            (unsigned long long)(SESSION_HELLO_TIMEOUT_USEC / 1000000));
	session_free(s);
	return 0;
}
