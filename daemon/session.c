/* SPDX-License-Identifier: MIT */
/* A session's life: creation and admission at accept, its timers, every change of state, the
 * handshake steps it hands to a worker, and its end. Its buffers and the pump that reads, parses
 * and flushes are session-io.c's; what a frame means is session-dispatch.c's business, who the
 * peer is and what it may hold is session-auth.c's. */
#include "session.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <systemd/sd-event.h>

#include "broker.h"
#include "chain.h"
#include "conn.h"
#include "log.h"
#include "serve.h"
#include "session-internal.h"
#include "upstream.h"

static int on_timer(sd_event_source *src, uint64_t usec, void *userdata);
static int on_frame_timer(sd_event_source *src, uint64_t usec, void *userdata);

#ifndef NDEBUG
/* The settle rule's bookkeeping (session-internal.h): how many sessions are marked, and how deep
 * the module's entry points are nested. The loop's thread alone runs the session module. */
static unsigned n_unsettled, entry_depth;

void session_mark(struct session *s)
{
	if (!s->unsettled) {
		s->unsettled = true;
		n_unsettled++;
	}
}

void session_unmark(struct session *s)
{
	if (s->unsettled) {
		s->unsettled = false;
		assert(n_unsettled > 0);
		n_unsettled--;
	}
}

unsigned session_enter(void)
{
	return ++entry_depth;
}

void session_leave(const unsigned *depth)
{
	assert(*depth == entry_depth);
	entry_depth--;
	/* An entry point changed a session and returned without session_settle(),
	 * session_pump(), session_free() or session_come_back(): its socket may never wake it. */
	assert(entry_depth > 0 || n_unsettled == 0);
}
#endif

/* Every change of state goes through here, and through registry_move(), so that the broker's
 * counts follow: a session counts as a source or sink exactly while it is READY, and as a
 * handshake while in HANDSHAKE, however it leaves (an ERROR either way, a reload, a timeout, the
 * peer going). A session that ends (refused at accept or after authentication) leaves its slot
 * at once: while it lingers it is one of the registry's closing sessions, counted apart and
 * bounded on their own (trim_lingering()), so that refused peers holding their connections open
 * take no slot from anyone. */
void session_set_state(struct session *s, enum session_state state)
{
	enum session_state from = s->reg.state;

	if (from == state)
		return;
	session_mark(s);
	registry_move(&s->broker->registry, &s->reg, state, broker_now(s->broker));
	if (from == SESSION_READY || state == SESSION_READY)
		broker_mark_status(s->broker);
	if (from == SESSION_READY)
		session_clones_leave(s);
	/* A downstream broker's ids leave with it: this broker's own upstream hears. */
	if (from == SESSION_READY && s->chain.n > 0) {
		chain_leave(s->broker, &s->chain);
		upstream_path_changed(s->broker);
	}
	/* A peer that does not read its last message must not keep the session: it gets as long
	 * to take it as a new peer gets to say HELLO. */
	if (state == SESSION_CLOSING && s->timer) {
		(void)sd_event_source_set_time_relative(
		    s->timer, (uint64_t)s->broker->conf->hello_timeout_s * 1000000ULL);
		(void)sd_event_source_set_enabled(s->timer, SD_EVENT_ONESHOT);
	}
}

/* Past max-lingering the oldest closing sessions go. Only from accept (session_new()): a session
 * may end while the broker walks its sessions (a reload), and must not free others there. */
static void trim_lingering(struct broker *b)
{
	struct registry_entry *e;

	while ((e = registry_lingering_excess(&b->registry, b->conf->max_lingering))) {
		log_peer(b, PEER_LOG_LIMIT, LOG_INFO,
		         "Closing %s: more than %u ended sessions linger (max-lingering)",
		         session_of(e)->peer, b->conf->max_lingering);
		session_free(session_of(e));
	}
}

void session_refuse(struct session *s, enum eb_error_code code, const char *text)
{
	struct eb_msg m = {.type = EB_MSG_ERROR, .error.code = code};

	/* An authenticated peer's refused request; the refusals at a limit or of a peer that did
	 * not authenticate are counted where they are decided, a reload's or a stop's not at all.
	 */
	if (code == EB_ERR_PROTOCOL || code == EB_ERR_VERSION || code == EB_ERR_FORBIDDEN ||
	    code == EB_ERR_TOO_LARGE)
		broker_count(s->broker, EB_COUNTER_REFUSED_REQUEST);
	snprintf(m.error.text, sizeof(m.error.text), "%s", text);
	(void)session_send(s, &m);
	/* A GET waiting in the queue goes unanswered: the ERROR is the last word. */
	serve_cancel(s->broker, &s->get);
	session_set_state(s, SESSION_CLOSING);
}

void session_disconnect(struct session *s, const char *why)
{
	SESSION_ENTRY();

	if (s->reg.state != SESSION_READY)
		return;
	session_refuse(s, EB_ERR_SHUTDOWN, why);
	session_settle(s);
}

/* What is left once the broker has forgotten the session: the connection and the buffers. */
static void session_destroy(struct session *s)
{
	eb_conn_free(s->conn);
	/* Only what the buffers hold is left to wipe: the rest was wiped as it was spent. */
	if (s->rbuf)
		explicit_bzero(s->rbuf + s->rstart, s->rend - s->rstart);
	if (s->wbuf)
		explicit_bzero(s->wbuf + s->wstart, s->wend - s->wstart);
	free(s->rbuf);
	free(s->wbuf);
	if (!session_poll_bury(s))
		free(s);
}

void session_free(struct session *s)
{
	struct broker *b;

	if (!s)
		return;
	assert(!s->ended);
	b = s->broker;
	serve_cancel(b, &s->get);
	if (s->reg.state != SESSION_OUTSIDE) {
		session_set_state(s, SESSION_CLOSING);
		session_set_state(s, SESSION_OUTSIDE);
	}
	session_unmark(s);
	session_poll_remove(s);
	sd_event_source_disable_unref(s->timer);
	sd_event_source_disable_unref(s->frame_timer);
	s->timer = s->frame_timer = NULL;
	/* A step no worker has taken yet is taken back, so that a handshake ended while it
	 * waited (timed out, made way for a new one) costs no key exchange, and its fd is closed
	 * now, within the limits it was just counted out of. One under way is freed on return. */
	if (s->in_worker && !workers_cancel(b->workers, &s->handshake_work)) {
		s->ended = true; /* handshake_done() frees it */
		return;
	}
	s->in_worker = false;
	session_destroy(s);
}

static struct session *session_from_work(struct work *w)
{
	return (struct session *)((char *)w - offsetof(struct session, handshake_work));
}

/* On a worker: the step of the handshake that the socket allows now. The first one, with the
 * peer's ClientHello, is the dear one (key exchange and key schedule, about 0.3 ms). */
static void handshake_run(struct work *w)
{
	struct session *s = session_from_work(w);

	s->handshake_result = eb_conn_handshake(s->conn);
}

/* Back on the loop: what the step said, as session_handshake() would have. */
static void handshake_done(struct work *w, bool cancelled)
{
	SESSION_ENTRY();
	struct session *s = session_from_work(w);

	s->in_worker = false;
	if (s->ended) {
		session_destroy(s);
		return;
	}
	/* The workers stop only after every session is freed: nothing is cancelled under a
	 * session that is still counted. Should that change, the session ends here. */
	if (cancelled || session_handshake_result(s, s->handshake_result) < 0) {
		session_free(s);
		return;
	}
	if (s->reg.state != SESSION_HANDSHAKE || s->io_missed) {
		s->io_missed = false;
		session_pump(s); /* HELLO may have come with the peer's Finished */
	} else
		session_settle(s); /* the socket first: readable, or writable */
}

void session_offload_handshake(struct session *s)
{
	/* The loop does not look at the connection until the step is back: session_on_io()
	 * notes that the socket spoke, handshake_done() looks then. The socket stays in the
	 * epoll set, which saves taking it out and putting it back (two system calls a step). */
	s->io_missed = false;
	session_stay(s);
	s->handshake_work.run = handshake_run;
	s->handshake_work.done = handshake_done;
	s->in_worker = true;
	session_unmark(s); /* handshake_done() pumps or settles it */
	workers_submit(s->broker->workers, &s->handshake_work);
}

/* The client and balancer of a connection that began with a PROXY header (proxied.c). */
struct session_via {
	const struct sockaddr_storage *client; /* NULL: a LOCAL header */
	const struct sockaddr_storage *balancer;
};

/* A session built for fd, in no state yet: counted nowhere, known to no other session. */
static int session_build(struct broker *b, int fd, const struct sockaddr *peer, socklen_t peer_len,
                         bool tls, const char *listener, const struct session_via *via,
                         struct session **ret)
{
	struct peer_addr addr = {};
	struct session *s;
	int r;

	s = calloc(1, sizeof(*s));
	if (!s) {
		safe_close(fd);
		return -ENOMEM;
	}
	s->broker = b;
	s->listener = listener;
	if (via)
		session_describe_proxied(s, via->client, via->balancer, listener, &addr);
	else
		session_describe_peer(s, fd, peer, peer_len, listener, &addr);
	registry_entry_init(&s->reg, !tls, &addr, broker_now(b));
	r = eb_conn_new(fd, tls ? b->tls : NULL, true, false, &s->conn);
	if (r < 0) {
		free(s); /* fd closed by eb_conn_new() */
		return r;
	}
	*ret = s;
	return 0;
}

/* Its socket in the broker's epoll set, and its event sources: the HELLO timer and the frame
 * timer. */
static int session_add_events(struct session *s)
{
	struct broker *b = s->broker;
	int r;

	r = session_poll_add(s, EPOLLIN | EPOLLET);
	if (r < 0)
		return r;
	/* 10 ms, not sd-event's default 250 ms of slack: this timer also ends a GET's wait for
	 * the pool, and docs/protocol.md promises EMPTY after about 250 ms, not up to 500. */
	r = sd_event_add_time_relative(b->event, &s->timer, CLOCK_MONOTONIC,
	                               (uint64_t)b->conf->hello_timeout_s * 1000000ULL,
	                               10 * 1000ULL, on_timer, s);
	if (r < 0)
		return r;
	r = sd_event_add_time_relative(b->event, &s->frame_timer, CLOCK_MONOTONIC, 0, 0,
	                               on_frame_timer, s);
	if (r < 0)
		return r;
	(void)sd_event_source_set_enabled(s->frame_timer, SD_EVENT_OFF);
	return 0;
}

/* registry_admit()'s names of its limits, as the admin's counters count them. */
static enum eb_counter limit_counter(const char *limit)
{
	if (strcmp(limit, "max-local-sessions") == 0)
		return EB_COUNTER_LIMIT_MAX_LOCAL_SESSIONS;
	if (strcmp(limit, "max-handshakes-per-address") == 0)
		return EB_COUNTER_LIMIT_MAX_HANDSHAKES_PER_ADDRESS;
	if (strcmp(limit, "max-handshakes") == 0)
		return EB_COUNTER_LIMIT_MAX_HANDSHAKES;
	return EB_COUNTER_LIMIT_MAX_SESSIONS;
}

/* A peer refused at accept: a local one is told, in the protocol it speaks from the first byte,
 * and lingers among the closing; a network one sees its connection closed before the handshake
 * (nothing we could say there is authenticated, and a handshake is what the limit saves). */
static void refuse_at_accept(struct session *s, const char *limit)
{
	struct broker *b = s->broker;

	if (b->stopping) {
		log_debug("Refusing %s: the broker is stopping", s->peer);
	} else {
		broker_count(b, limit_counter(limit));
		log_peer_refused(b, PEER_LOG_LIMIT, LOG_WARNING, "Refusing %s: %s reached", s->peer,
		                 limit);
	}
	if (!s->reg.local) {
		session_free(s);
		return;
	}
	if (b->stopping)
		session_refuse(s, EB_ERR_SHUTDOWN, "broker stopping");
	else
		session_refuse(s, EB_ERR_BUSY, "too many sessions");
	session_pump(s);
}

static void make_way(struct broker *b, struct session *victim)
{
	log_peer(
	    b, PEER_LOG_LIMIT, LOG_INFO,
	    victim->reg.hs.accepted_usec + HANDSHAKE_EVICT_AGE_USEC <= broker_now(b)
		? "Closing %s: its TLS handshake stalled while others wait (max-handshakes)"
		: "Closing %s: its address holds the most TLS handshakes while others wait (max-handshakes)",
	    victim->peer);
	session_free(victim);
}

/* Builds the session, then asks the registry whether it may join; only then is it counted. */
static int session_accept(struct broker *b, int fd, const struct sockaddr *peer, socklen_t peer_len,
                          bool tls, const char *listener, const struct session_via *via,
                          struct session **ret)
{
	const struct registry_limits limits = {
	    .max_sessions = b->conf->max_sessions,
	    .max_local_sessions = b->conf->max_local_sessions,
	    .max_handshakes = b->conf->max_handshakes,
	    .max_handshakes_per_address = b->conf->max_handshakes_per_address,
	};
	struct registry_entry *evict = NULL;
	struct session *s;
	const char *limit;
	int r;

	*ret = NULL;
	r = session_build(b, fd, peer, peer_len, tls, listener, via, &s);
	if (r < 0)
		return r;
	if (tls && s->reg.hs.addr.family == 0) {
		/* A peer with no address would meet no per-address limit (a storm of connect,
		 * ClientHello, reset took every handshake slot so, when the address came from
		 * getpeername(), which fails for a connection reset before it was accepted;
		 * accept4() gives it). A unix peer whose credentials cannot be read is gone. */
		log_debug("Closing %s: it was gone before it was accepted", s->peer);
		session_free(s);
		return 0;
	}
	limit = b->stopping ? "stopping" : registry_admit(&b->registry, &limits, &s->reg, &evict);
	if (limit && !s->reg.local) {
		refuse_at_accept(s, limit);
		return 0;
	}
	r = session_add_events(s);
	if (r < 0) {
		session_free(s);
		return r;
	}
	if (limit) {
		refuse_at_accept(s, limit);
		return 0;
	}
	if (evict)
		make_way(b, session_of(evict));
	if (tls)
		session_set_state(s, SESSION_HANDSHAKE);
	else {
		session_set_state(s, SESSION_HELLO);
		r = session_identify_unix(s);
		if (r < 0) {
			session_refuse_identity(s, r);
			session_pump(s);
			return 0;
		}
	}
	log_debug("Accepted %s", s->peer);
	session_settle(s); /* its events are those its state asks for: this only says so */
	*ret = s;
	return 0;
}

int session_new(struct broker *b, int fd, const struct sockaddr *peer, socklen_t peer_len, bool tls,
                const char *listener, struct session **ret)
{
	SESSION_ENTRY();
	int r = session_accept(b, fd, peer, peer_len, tls, listener, NULL, ret);

	/* The session just made, if it was refused, is the newest closing one: never the oldest,
	 * since max-lingering is at least 1. */
	trim_lingering(b);
	return r;
}

int session_new_proxied(struct broker *b, int fd, const char *listener,
                        const struct sockaddr_storage *client,
                        const struct sockaddr_storage *balancer, struct session **ret)
{
	SESSION_ENTRY();
	const struct session_via via = {.client = client, .balancer = balancer};
	int r = session_accept(b, fd, NULL, 0, true, listener, &via, ret);

	trim_lingering(b);
	return r;
}

void session_on_io(struct session *s)
{
	if (s->in_worker) {
		s->io_missed = true; /* the worker has the connection: handshake_done() looks */
		return;
	}
	session_pump(s);
}

static int on_timer(sd_event_source *src, uint64_t usec, void *userdata)
{
	SESSION_ENTRY();
	struct session *s = userdata;

	(void)src, (void)usec;
	if (s->reg.state == SESSION_READY)
		return 0; /* HELLO came in time; a GET's wait is the broker's queue timer */
	if (s->reg.state == SESSION_CLOSING) {
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
	SESSION_ENTRY();
	struct session *s = userdata;

	(void)src, (void)usec;
	broker_count(s->broker, EB_COUNTER_REFUSED_REQUEST);
	log_peer(s->broker, PEER_LOG_REFUSED, LOG_WARNING,
	         "Closing %s (user %s): a frame begun %u s ago is still incomplete", s->peer,
	         session_user_name(s), s->broker->conf->frame_timeout_s);
	session_free(s);
	return 0;
}
