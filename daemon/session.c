/* SPDX-License-Identifier: MIT */
#include "session.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <linux/vm_sockets.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/crypto.h>
#include <systemd/sd-event.h>

#include "broker.h"
#include "conn.h"
#include "log.h"

static int on_io(sd_event_source *src, int fd, uint32_t revents, void *userdata);
static int on_defer(sd_event_source *src, void *userdata);
static int on_timer(sd_event_source *src, uint64_t usec, void *userdata);
static int on_frame_timer(sd_event_source *src, uint64_t usec, void *userdata);
static void session_pump(struct session *s);
static bool session_has_room(const struct session *s, size_t bytes);

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
		s->addr.family = AF_INET;
		memcpy(s->addr.bytes, &in->sin_addr, 4);
		break;
	}
	case AF_INET6: {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &in6->sin6_addr, addr, sizeof(addr));
		snprintf(s->peer, sizeof(s->peer), "%s [%s]:%u", listener, addr,
		         ntohs(in6->sin6_port));
		/* An IPv4 peer on a dual-stack socket is one address, not a share of a /64. */
		if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
			s->addr.family = AF_INET;
			memcpy(s->addr.bytes, in6->sin6_addr.s6_addr + 12, 4);
		} else {
			s->addr.family = AF_INET6;
			memcpy(s->addr.bytes, in6->sin6_addr.s6_addr, 8);
		}
		break;
	}
	case AF_VSOCK: {
		struct sockaddr_vm *vm = (struct sockaddr_vm *)&ss;

		snprintf(s->peer, sizeof(s->peer), "%s cid=%u port=%u", listener, vm->svm_cid,
		         vm->svm_port);
		s->addr.family = AF_VSOCK;
		memcpy(s->addr.bytes, &vm->svm_cid, sizeof(vm->svm_cid));
		break;
	}
	case AF_UNIX: {
		struct ucred uc;

		if (peer_cred(fd, &uc) == 0) {
			snprintf(s->peer, sizeof(s->peer), "%s pid=%d uid=%u gid=%u", listener,
			         (int)uc.pid, (unsigned)uc.uid, (unsigned)uc.gid);
			/* Over unix+tls a hypervisor speaks for its guest: one process, one guest.
			 */
			s->addr.family = AF_UNIX;
			memcpy(s->addr.bytes, &uc.pid, sizeof(uc.pid));
		} else
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

/* A frame begun after WELCOME must end within frame-timeout-sec of its first byte, however
 * slowly its bytes trickle in: half a frame and silence would hold a slot for ever. A session
 * with nothing half-sent may stay idle (a source told to SLEEP, a sink between refills). */
static void update_frame_timer(struct session *s)
{
	bool partial = s->state == SESSION_READY && s->rend > s->rstart && !has_whole_frame(s);

	if (partial == s->frame_started)
		return;
	s->frame_started = partial;
	if (partial) {
		uint64_t t =
		    broker_now(s->broker) + (uint64_t)s->broker->conf->frame_timeout_s * 1000000ULL;

		(void)sd_event_source_set_time(s->frame_timer, t);
		(void)sd_event_source_set_enabled(s->frame_timer, SD_EVENT_ONESHOT);
	} else
		(void)sd_event_source_set_enabled(s->frame_timer, SD_EVENT_OFF);
}

static void session_update_events(struct session *s)
{
	uint32_t events = 0;
	bool readable_buffered;

	if (s->state == SESSION_CLOSING) {
		if (s->wend > s->wstart)
			events |= EPOLLOUT;
		if (s->lingering)
			events |= EPOLLIN;
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
	update_frame_timer(s);
}

static bool session_has_room(const struct session *s, size_t bytes)
{
	return SESSION_WBUF_SIZE - (s->wend - s->wstart) >= bytes;
}

/* Buffers a frame; the caller checked session_has_room(). */
static int session_send(struct session *s, const struct eb_msg *m)
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

static void count_roles(struct session *s, int delta)
{
	if (s->roles & EB_ROLE_SOURCE)
		s->broker->n_sources += delta;
	if (s->roles & EB_ROLE_SINK)
		s->broker->n_sinks += delta;
	broker_mark_status(s->broker);
}

/* Every change of state goes through here, so that the broker's counts follow: a session counts
 * as a source or sink exactly while it is READY, and as a handshake while in HANDSHAKE, however
 * it leaves (an ERROR either way, a reload, a timeout, the peer going). */
static void set_state(struct session *s, enum session_state state)
{
	if (s->state == state)
		return;
	if (s->state == SESSION_READY)
		count_roles(s, -1);
	if (s->state == SESSION_HANDSHAKE)
		s->broker->n_handshakes--;
	s->state = state;
	if (state == SESSION_READY)
		count_roles(s, +1);
	if (state == SESSION_HANDSHAKE)
		s->broker->n_handshakes++;
	/* A peer that does not read its last message must not keep the session: it gets as long
	 * to take it as a new peer gets to say HELLO. */
	if (state == SESSION_CLOSING && s->timer) {
		(void)sd_event_source_set_time_relative(
		    s->timer, (uint64_t)s->broker->conf->hello_timeout_s * 1000000ULL);
		(void)sd_event_source_set_enabled(s->timer, SD_EVENT_ONESHOT);
	}
}

static void send_error(struct session *s, enum eb_error_code code, const char *text)
{
	struct eb_msg m = {.type = EB_MSG_ERROR, .error.code = code};

	snprintf(m.error.text, sizeof(m.error.text), "%s", text);
	(void)session_send(s, &m);
	/* A GET waiting in the queue goes unanswered: the ERROR is the last word. */
	broker_cancel_get(s->broker, &s->get);
	s->get_pending = false;
	set_state(s, SESSION_CLOSING);
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

void session_free(struct session *s)
{
	struct broker *b;

	if (!s)
		return;
	b = s->broker;
	broker_cancel_get(b, &s->get);
	set_state(s, SESSION_CLOSING);
	if (s->local)
		b->n_local--;
	else
		b->n_network--;
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
	sd_event_source_disable_unref(s->frame_timer);
	eb_conn_free(s->conn);
	if (s->rbuf)
		explicit_bzero(s->rbuf, SESSION_RBUF_SIZE);
	if (s->wbuf)
		explicit_bzero(s->wbuf, SESSION_WBUF_SIZE);
	free(s->rbuf);
	free(s->wbuf);
	free(s);
}

/* Whether the user u has room for one more session: its authenticated sessions, this one not
 * counted, against its max-sessions. */
static bool user_has_room(struct session *s, const struct eb_user *u)
{
	unsigned idx = (unsigned)(u - s->broker->conf->users), n = 0;

	for (const struct session *o = s->broker->sessions; o; o = o->next)
		n += o != s && o->user == (int)idx &&
		     (o->state == SESSION_HELLO || o->state == SESSION_READY);
	return n < u->max_sessions;
}

/* Binds s to user u, or refuses it with a BUSY error when u has all the sessions it may. */
static int bind_user(struct session *s, const struct eb_user *u)
{
	if (!user_has_room(s, u)) {
		log_peer(s->broker, PEER_LOG_LIMIT, LOG_WARNING,
		         "Refusing %s: user %s has %u sessions, its limit (max-sessions)", s->peer,
		         u->name, u->max_sessions);
		return -EBUSY;
	}
	s->user = (int)(u - s->broker->conf->users);
	return 0;
}

static int identify_unix(struct session *s)
{
	struct ucred uc;
	const struct eb_user *u;
	int r;

	r = peer_cred(eb_conn_fd(s->conn), &uc);
	if (r < 0) {
		log_peer(s->broker, PEER_LOG_HANDSHAKE, LOG_WARNING,
		         "Refusing %s: cannot read its credentials: %s", s->peer, strerror(-r));
		return r;
	}
	u = eb_conf_find_unix_peer(s->broker->conf, uc.uid, uc.gid);
	if (!u) {
		log_peer(s->broker, PEER_LOG_HANDSHAKE, LOG_WARNING,
		         "Refusing %s: no [user] section maps uid %u or gid %u", s->peer,
		         (unsigned)uc.uid, (unsigned)uc.gid);
		return -EACCES;
	}
	return bind_user(s, u);
}

static int identify_tls(struct session *s)
{
	const char *id = eb_conn_identity(s->conn);
	const struct eb_user *u = id ? eb_conf_find_user(s->broker->conf, id) : NULL;

	if (!u) {
		log_peer(s->broker, PEER_LOG_HANDSHAKE, LOG_WARNING,
		         "Refusing %s: its TLS identity names no user", s->peer);
		return -EACCES;
	}
	return bind_user(s, u);
}

static void refuse_identity(struct session *s, int r)
{
	if (r == -EBUSY)
		send_error(s, EB_ERR_BUSY, "too many sessions for this user");
	else
		send_error(s, EB_ERR_AUTH, "no user maps to this peer");
}

static bool same_addr(const struct peer_addr *a, const struct peer_addr *b)
{
	return a->family != 0 && a->family == b->family && memcmp(a->bytes, b->bytes, 8) == 0;
}

/* Network sessions still in their handshake: the oldest one, and how many share s's address. */
static struct session *scan_handshakes(struct session *s, unsigned *ret_same_addr)
{
	struct session *oldest = NULL;
	unsigned n = 0;

	for (struct session *o = s->broker->sessions; o; o = o->next) {
		if (o == s || o->state != SESSION_HANDSHAKE)
			continue;
		n += same_addr(&o->addr, &s->addr);
		if (!oldest || o->accepted_usec < oldest->accepted_usec)
			oldest = o;
	}
	*ret_same_addr = n;
	return oldest;
}

/* A handshake older than this may give its slot to a new one when all are taken: ours finish in
 * milliseconds, so only a peer that stalls on purpose (or a dead one) is that old. */
#define HANDSHAKE_EVICT_AGE_USEC (1000000ULL)

/* The limits a new peer meets before it costs a handshake. Returns NULL to admit it, or what it
 * is refused for. An unauthenticated peer can fill neither the network's session slots (its
 * handshakes are capped apart, in total and per address) nor the local socket's (counted
 * apart), and the oldest stalled handshake makes way for a new one. */
static const char *over_limit(struct session *s)
{
	struct broker *b = s->broker;
	const struct eb_conf *conf = b->conf;
	struct session *oldest;
	unsigned same;

	if (b->stopping)
		return "stopping";
	if (s->local)
		return b->n_local > conf->max_local_sessions ? "max-local-sessions" : NULL;
	if (b->n_network > conf->max_sessions)
		return "max-sessions";
	oldest = scan_handshakes(s, &same);
	if (same >= conf->max_handshakes_per_address)
		return "max-handshakes-per-address";
	if (b->n_handshakes < conf->max_handshakes)
		return NULL;
	if (!oldest || oldest->accepted_usec + HANDSHAKE_EVICT_AGE_USEC > s->accepted_usec)
		return "max-handshakes";
	log_peer(b, PEER_LOG_LIMIT, LOG_INFO,
	         "Closing %s: its TLS handshake stalled while others wait (max-handshakes)",
	         oldest->peer);
	session_free(oldest);
	return NULL;
}

/* TCP's keepalive finds a network peer that vanished (a crashed VM, a pulled cable) in about
 * 4 minutes: an idle authenticated session is allowed, a dead one should not hold its slot. */
static void set_keepalive(int fd)
{
	int one = 1, idle = 120, intvl = 30, cnt = 4;

	if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) < 0)
		return; /* not a socket that keeps alive (unix, vsock): nothing to do */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

int session_new(struct broker *b, int fd, bool tls, const char *listener, struct session **ret)
{
	struct session *s;
	const char *limit;
	int r;

	s = calloc(1, sizeof(*s));
	if (!s) {
		safe_close(fd);
		return -ENOMEM;
	}
	s->broker = b;
	s->user = -1;
	s->state = SESSION_CLOSING; /* counted nowhere until set_state() below */
	s->local = !tls;
	s->listener = listener;
	s->accepted_usec = broker_now(b);
	describe_peer(s, fd, listener);
	s->next = b->sessions;
	if (b->sessions)
		b->sessions->prev = s;
	b->sessions = s;
	b->n_sessions++;
	if (s->local)
		b->n_local++;
	else
		b->n_network++;

	r = eb_conn_new(fd, tls ? b->tls : NULL, true, true, &s->conn);
	if (r < 0) {
		safe_close(fd);
		goto fail;
	}
	limit = over_limit(s);
	if (limit && !s->local) {
		/* Before the handshake nothing we could say is authenticated, and a handshake is
		 * what the limit saves: the peer sees the connection closed, and tries later. */
		if (b->stopping)
			log_debug("Refusing %s: the broker is stopping", s->peer);
		else
			log_peer(b, PEER_LOG_LIMIT, LOG_WARNING, "Refusing %s: %s reached", s->peer,
			         limit);
		session_free(s);
		*ret = NULL;
		return 0;
	}
	if (tls)
		set_keepalive(fd);
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
	/* 10 ms, not sd-event's default 250 ms of slack: this timer also ends a GET's wait for
	 * the pool, and docs/protocol.md promises EMPTY after about 250 ms, not up to 500. */
	r = sd_event_add_time_relative(b->event, &s->timer, CLOCK_MONOTONIC,
	                               (uint64_t)b->conf->hello_timeout_s * 1000000ULL,
	                               10 * 1000ULL, on_timer, s);
	if (r < 0)
		goto fail;
	r = sd_event_add_time_relative(b->event, &s->frame_timer, CLOCK_MONOTONIC, 0, 0,
	                               on_frame_timer, s);
	if (r < 0)
		goto fail;
	(void)sd_event_source_set_enabled(s->frame_timer, SD_EVENT_OFF);

	if (limit) {
		/* A local peer is told, in the protocol it speaks from the first byte. */
		if (b->stopping)
			send_error(s, EB_ERR_SHUTDOWN, "broker stopping");
		else {
			log_peer(b, PEER_LOG_LIMIT, LOG_WARNING, "Refusing %s: %s reached", s->peer,
			         limit);
			send_error(s, EB_ERR_BUSY, "too many sessions");
		}
		session_pump(s);
		*ret = NULL;
		return 0;
	}
	if (tls)
		set_state(s, SESSION_HANDSHAKE);
	else {
		set_state(s, SESSION_HELLO);
		r = identify_unix(s);
		if (r < 0) {
			refuse_identity(s, r);
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
		log_peer(s->broker, PEER_LOG_HANDSHAKE, LOG_INFO,
		         "Closing %s: its TLS handshake began before the reload", s->peer);
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
		s->get.user = s->user; /* a waiting GET is paid from the same user's quota */
		return;
	}
	log_peer(s->broker, PEER_LOG_REFUSED, LOG_WARNING,
	         "Closing %s (user %s): %s in the reloaded configuration", s->peer, was->name, why);
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
		log_peer(s->broker, PEER_LOG_REFUSED, LOG_WARNING,
		         "Refusing %s (user %s): protocol version %u, this broker speaks %u",
		         s->peer, u->name, h->version, EB_PROTO_VERSION);
		return refuse(s, EB_ERR_VERSION, "unsupported protocol version");
	}
	if ((h->roles & ~u->roles) != 0) {
		log_peer(s->broker, PEER_LOG_REFUSED, LOG_WARNING,
		         "Refusing %s: user %s asked for roles %s but has only %s", s->peer,
		         u->name, eb_roles_to_string(h->roles, want, sizeof(want)),
		         eb_roles_to_string(u->roles, have, sizeof(have)));
		return refuse(s, EB_ERR_FORBIDDEN, "role not allowed for this user");
	}
	s->roles = h->roles;
	snprintf(s->kind, sizeof(s->kind), "%s", h->kind);
	set_state(s, SESSION_READY);
	(void)sd_event_source_set_enabled(s->timer, SD_EVENT_OFF);

	m.welcome.version = EB_PROTO_VERSION;
	m.welcome.roles = (uint8_t)s->roles;
	m.welcome.max_data = EB_DATA_MAX;
	snprintf(m.welcome.user, sizeof(m.welcome.user), "%s", u->name);
	(void)session_send(s, &m);
	if (s->roles & EB_ROLE_SOURCE)
		/* The HELLO's claim is the source's word, shown to the operator; credit is decided
		 * per PUT, under the user's cap. */
		log_peer(s->broker, PEER_LOG_SESSION, LOG_INFO,
		         "%s: user %s connected as %s (%s), claiming %u.%03u bits per byte",
		         s->peer, u->name, eb_roles_to_string(s->roles, want, sizeof(want)),
		         s->kind[0] ? s->kind : "-", h->claim_mbits_per_byte / 1000,
		         h->claim_mbits_per_byte % 1000);
	else
		log_peer(s->broker, PEER_LOG_SESSION, LOG_INFO, "%s: user %s connected as %s (%s)",
		         s->peer, u->name, eb_roles_to_string(s->roles, want, sizeof(want)),
		         s->kind[0] ? s->kind : "-");

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
			log_peer(s->broker, PEER_LOG_REFUSED, LOG_WARNING,
			         "%s: data from user %s repeats itself; crediting none of it",
			         s->peer, u->name);
		s->stuck_logged = true;
		claim = 0;
	}
	r = broker_put(s->broker, p->data, p->len, claim, &credited);
	if (r < 0) {
		log_error_errno(r, "Failed to add to the pool: %m");
		return refuse(s, EB_ERR_INTERNAL, "pool failure");
	}
	s->bits_in += credited;
	m.put_ack.credited_bits = (uint32_t)credited;
	m.put_ack.accepted_bytes = p->len;
	(void)session_send(s, &m);
}

static void handle_get(struct session *s, const struct eb_msg_get *g)
{
	s->get.bits = g->bits;
	s->get.drbg = g->mode == EB_GET_DRBG;
	s->get.user = s->user;
	s->get.since_usec = broker_now(s->broker);
	s->get_pending = true;
	broker_get(s->broker, &s->get);
}

static void handle_status(struct session *s)
{
	struct eb_msg m = {.type = EB_MSG_STATUS};

	broker_fill_status(s->broker, &m.status);
	(void)session_send(s, &m);
}

void session_answer(struct session *s, const struct sched_decision *d, const uint8_t *data)
{
	struct eb_msg m = {.type = EB_MSG_DATA};
	int r;

	assert(s->get_pending);
	s->get_pending = false;
	switch (d->verdict) {
	case SCHED_DATA:
		/* Only full-entropy output carries bits; DRBG output is never counted as entropy.
		 */
		m.data.bits = s->get.drbg ? 0 : (uint32_t)(d->bytes * 8);
		m.data.data = data;
		m.data.len = (uint32_t)d->bytes;
		r = session_send(s, &m);
		if (r < 0) {
			log_error_errno(r, "Failed to encode DATA for %s: %m", s->peer);
			refuse(s, EB_ERR_INTERNAL, "encoding failure");
			return;
		}
		s->bits_out += m.data.bits;
		break;
	case SCHED_QUOTA:
		send_retry(s, EB_MSG_QUOTA, d->retry_ms);
		break;
	case SCHED_EMPTY:
		send_retry(s, EB_MSG_EMPTY, d->retry_ms);
		break;
	case SCHED_WAIT:
	case _SCHED_VERDICT_MAX:
	case _SCHED_VERDICT_INVALID:
		assert(!"not an answer");
		return;
	}
	/* Flush and read on from the event loop: the broker answers from its own handler. */
	(void)sd_event_source_set_enabled(s->defer, SD_EVENT_ONESHOT);
}

void session_fail(struct session *s)
{
	refuse(s, EB_ERR_INTERNAL, "pool failure");
	(void)sd_event_source_set_enabled(s->defer, SD_EVENT_ONESHOT);
}

void session_set_asleep(struct session *s, bool asleep)
{
	struct eb_msg m = {.type = asleep ? EB_MSG_SLEEP : EB_MSG_WAKE,
	                   .retry.retry_ms = SCHEDULER_SLEEP_MS};

	if (s->state != SESSION_READY || !(s->roles & EB_ROLE_SOURCE) || s->asleep == asleep ||
	    !session_has_room(s, EB_FRAME_HEADER_SIZE + 8))
		return;
	(void)session_send(s, &m);
	s->asleep = asleep;
	(void)sd_event_source_set_enabled(s->defer, SD_EVENT_ONESHOT);
}

void session_goodbye(struct session *s)
{
	struct eb_msg m = {.type = EB_MSG_ERROR, .error.code = EB_ERR_SHUTDOWN};

	if (s->state != SESSION_READY || !session_has_room(s, EB_FRAME_HEADER_SIZE + 64))
		return;
	snprintf(m.error.text, sizeof(m.error.text), "broker stopping");
	(void)session_send(s, &m);
	/* The loop has ended: this is the one write the peer gets, and close_notify with it. */
	(void)session_flush(s);
	eb_conn_shutdown(s->conn);
}

static void handle_frame(struct session *s, const struct eb_frame *f)
{
	const struct eb_user *u;
	char roles[64];
	struct eb_msg m;
	int r;

	r = eb_msg_decode(f, &m);
	if (r < 0) {
		log_peer(s->broker, PEER_LOG_REFUSED, LOG_WARNING,
		         "Closing %s (user %s): malformed %s frame", s->peer, user_name(s),
		         eb_msg_type_to_string(f->type));
		return refuse(s, EB_ERR_PROTOCOL, "malformed message");
	}
	if (s->state == SESSION_HELLO) {
		if (m.type != EB_MSG_HELLO) {
			log_peer(s->broker, PEER_LOG_REFUSED, LOG_WARNING,
			         "Closing %s (user %s): sent %s before HELLO", s->peer,
			         user_name(s), eb_msg_type_to_string(m.type));
			return refuse(s, EB_ERR_PROTOCOL, "HELLO expected");
		}
		return handle_hello(s, &m.hello);
	}
	u = session_user(s);
	switch (m.type) {
	case EB_MSG_PUT:
		if (!(s->roles & EB_ROLE_SOURCE)) {
			log_peer(s->broker, PEER_LOG_REFUSED, LOG_WARNING,
			         "Refusing PUT from %s: user %s may not donate (connected as %s)",
			         s->peer, u->name,
			         eb_roles_to_string(s->roles, roles, sizeof(roles)));
			return refuse(s, EB_ERR_FORBIDDEN, "this user may not donate");
		}
		return handle_put(s, &m.put);
	case EB_MSG_GET:
		if (!(s->roles & EB_ROLE_SINK)) {
			log_peer(s->broker, PEER_LOG_REFUSED, LOG_WARNING,
			         "Refusing GET from %s: user %s may not draw (connected as %s)",
			         s->peer, u->name,
			         eb_roles_to_string(s->roles, roles, sizeof(roles)));
			return refuse(s, EB_ERR_FORBIDDEN, "this user may not draw");
		}
		return handle_get(s, &m.get);
	case EB_MSG_STATUS_REQ:
		if (!(s->roles & EB_ROLE_ADMIN)) {
			log_peer(s->broker, PEER_LOG_REFUSED, LOG_WARNING,
			         "Refusing STATUS from %s: user %s is not an admin", s->peer,
			         u->name);
			return refuse(s, EB_ERR_FORBIDDEN, "this user may not read status");
		}
		return handle_status(s);
	case EB_MSG_ERROR:
		log_peer(s->broker, PEER_LOG_SESSION, LOG_INFO,
		         "%s (user %s) reported an error and leaves: %s", s->peer, u->name,
		         m.error.text);
		set_state(s, SESSION_CLOSING);
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
	log_peer(s->broker, PEER_LOG_REFUSED, LOG_WARNING, "Closing %s (user %s): unexpected %s",
	         s->peer, u->name, eb_msg_type_to_string(m.type));
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
			log_peer(s->broker, PEER_LOG_REFUSED, LOG_WARNING,
			         "Closing %s (user %s): %s frame header", s->peer, user_name(s),
			         r == -EMSGSIZE ? "oversized" : "malformed");
			refuse(s, r == -EMSGSIZE ? EB_ERR_TOO_LARGE : EB_ERR_PROTOCOL,
			       "malformed frame");
			return true;
		}
		handle_frame(s, &f);
		/* PUT data has been conditioned into the pool: wipe our copy of it. */
		explicit_bzero(s->rbuf + s->rstart, size);
		s->rstart += size;
		/* The next frame's clock starts at its own first byte, not at its predecessor's. */
		s->frame_started = false;
		(void)sd_event_source_set_enabled(s->frame_timer, SD_EVENT_OFF);
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
	struct broker *b = s->broker;
	int r = eb_conn_handshake(s->conn);

	if (r == -EAGAIN)
		return 0;
	if (r < 0) {
		enum eb_conn_failure f = eb_conn_failure(s->conn);
		const char *tls_err = eb_conn_tls_error(s->conn);

		if (f == EB_CONN_FAIL_EOF)
			log_peer(b, PEER_LOG_HANDSHAKE, LOG_INFO,
			         "%s closed during the TLS handshake", s->peer);
		else if (f == EB_CONN_FAIL_UNKNOWN_USER)
			log_peer(b, PEER_LOG_HANDSHAKE, LOG_WARNING,
			         "Refusing %s: unknown user \"%s\"", s->peer,
			         eb_conn_offered_identity(s->conn));
		else if (f == EB_CONN_FAIL_BAD_KEY)
			log_peer(b, PEER_LOG_HANDSHAKE, LOG_WARNING,
			         "Refusing %s: wrong key for user \"%s\"", s->peer,
			         eb_conn_offered_identity(s->conn));
		else
			log_peer(b, PEER_LOG_HANDSHAKE, LOG_WARNING, "Refusing %s: %s (%s)",
			         s->peer, eb_conn_failure_to_string(f),
			         tls_err[0] ? tls_err : "no detail");
		return -EACCES;
	}
	set_state(s, SESSION_HELLO);
	r = identify_tls(s);
	if (r < 0) {
		/* Authenticated by TLS, so the peer may be told why, in the protocol. */
		refuse_identity(s, r);
		return 0;
	}
	return 0;
}

/* A peer that closes, even with a reset because it left acknowledgements unread, has simply
 * left; only other errors are worth an operator's attention. */
static void log_gone(struct session *s, int r)
{
	if (r == 0 || r == -ECONNRESET || r == -EPIPE)
		log_debug("%s (user %s) closed the connection", s->peer, user_name(s));
	else
		log_peer(s->broker, PEER_LOG_SESSION, LOG_INFO, "%s (user %s) went away: %s",
		         s->peer, user_name(s), strerror(-r));
}

/* After the last frame to a peer (an ERROR), the broker does not close at once: data the peer
 * sent meanwhile (its HELLO, say, racing a refusal at accept) would make close() send a reset,
 * and the peer's read would fail before it saw the ERROR. So the session says close_notify (over
 * TLS), shuts its side down and reads what still comes, unread, until the peer closes too or the
 * closing timer ends it (set_state() arms it). Returns whether to keep waiting. */
static bool linger(struct session *s)
{
	int fd = eb_conn_fd(s->conn);
	uint8_t sink[4096];

	if (!s->lingering) {
		eb_conn_shutdown(s->conn);
		if (shutdown(fd, SHUT_WR) < 0)
			return false;
		s->lingering = true;
	}
	for (;;) {
		ssize_t k = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);

		if (k > 0)
			continue;
		return k < 0 && (errno == EAGAIN || errno == EINTR);
	}
}

static void session_pump(struct session *s)
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
			if (s->wend > s->wstart)
				break;
			if (linger(s))
				break;
			goto close;
		}
		if (s->rend < SESSION_RBUF_SIZE) {
			ssize_t k =
			    eb_conn_read(s->conn, s->rbuf + s->rend, SESSION_RBUF_SIZE - s->rend);

			if (k == 0) {
				log_gone(s, 0);
				goto close_notify;
			}
			if (k < 0 && k != -EAGAIN) {
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
close_notify:
	/* An orderly end, the peer's: TLS says so with close_notify before the FIN, so that the
	 * peer can tell it from a truncation. Best effort, the socket is non-blocking. */
	eb_conn_shutdown(s->conn);
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
	if (s->state == SESSION_READY)
		return 0; /* HELLO came in time; a GET's wait is the broker's queue timer */
	if (s->state == SESSION_CLOSING) {
		log_debug("Closing %s: it did not take its last message in time", s->peer);
		session_free(s);
		return 0;
	}
	log_peer(s->broker, PEER_LOG_HANDSHAKE, LOG_WARNING, "Closing %s: no HELLO within %u s",
	         s->peer, s->broker->conf->hello_timeout_s);
	session_free(s);
	return 0;
}

static int on_frame_timer(sd_event_source *src, uint64_t usec, void *userdata)
{
	struct session *s = userdata;

	(void)src, (void)usec;
	log_peer(s->broker, PEER_LOG_REFUSED, LOG_WARNING,
	         "Closing %s (user %s): a frame begun %u s ago is still incomplete", s->peer,
	         user_name(s), s->broker->conf->frame_timeout_s);
	session_free(s);
	return 0;
}
