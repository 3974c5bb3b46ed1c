/* SPDX-License-Identifier: MIT */
/* A session's buffers and the pump that moves bytes through them: it reads, hands whole frames to
 * session-dispatch.c, flushes the answers, and after the last one lingers for what the peer still
 * sends. Every byte leaves the buffers wiped. */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <systemd/sd-event.h>

#include "broker.h"
#include "conn.h"
#include "log.h"
#include "macro.h"
#include "serve.h"
#include "session-internal.h"
#include "session.h"

/* Only a whole frame is worth coming back for: half of one waits for the socket. */
static bool has_whole_frame(const struct session *s)
{
	struct eb_frame f;
	size_t size;

	return s->rend > s->rstart &&
	       eb_frame_parse(s->rbuf + s->rstart, s->rend - s->rstart, &f, &size) != -EAGAIN;
}

/* Gives a buffer cap bytes, keeping [start, end) at its front; the old copy of those bytes is
 * wiped, and nothing else in it needs to be (see struct session). */
static int buf_resize(uint8_t **buf, size_t *cap, size_t *start, size_t *end, size_t want)
{
	size_t live = *end - *start;
	uint8_t *n;

	assert(live <= want && want > 0);
	n = malloc(want);
	if (!n)
		return -ENOMEM;
	if (live > 0) {
		memcpy(n, *buf + *start, live);
		explicit_bzero(*buf + *start, live);
	}
	free(*buf);
	*buf = n;
	*cap = want;
	*start = 0;
	*end = live;
	return 0;
}

/* Moves [start, end) to the front and wipes what that leaves behind. */
static void buf_compact(uint8_t *buf, size_t *start, size_t *end)
{
	size_t live = *end - *start;

	memmove(buf, buf + *start, live);
	explicit_bzero(buf + live, *end - live);
	*start = 0;
	*end = live;
}

/* Empty buffers go: a session that waits holds none. Their bytes are wiped already. A source
 * that is awake keeps its read buffer: it streams 64 KiB PUTs, one after the other. */
static void release_empty_buffers(struct session *s)
{
	bool streams =
	    s->reg.state == SESSION_READY && (s->reg.roles & EB_ROLE_SOURCE) && !s->asleep;

	if (s->rbuf && s->rstart == s->rend && !streams) {
		free(s->rbuf);
		s->rbuf = NULL;
		s->rcap = s->rstart = s->rend = 0;
	}
	if (s->wbuf && s->wstart == s->wend) {
		free(s->wbuf);
		s->wbuf = NULL;
		s->wcap = s->wstart = s->wend = 0;
	}
}

/* Room to read into: a small buffer first, the whole frame's size once a frame fills it. */
static int read_room(struct session *s)
{
	if (!s->rbuf)
		return buf_resize(&s->rbuf, &s->rcap, &s->rstart, &s->rend, SESSION_BUF_SMALL);
	if (s->rend < s->rcap)
		return 0;
	if (s->rstart > 0) {
		buf_compact(s->rbuf, &s->rstart, &s->rend);
		return 0;
	}
	return buf_resize(&s->rbuf, &s->rcap, &s->rstart, &s->rend, SESSION_RBUF_SIZE);
}

/* A frame begun after WELCOME must end within frame-timeout-sec of its first byte, however
 * slowly its bytes trickle in: half a frame and silence would hold a slot for ever. A session
 * with nothing half-sent may stay idle (a source told to SLEEP, a sink between refills). */
static void update_frame_timer(struct session *s)
{
	bool partial = s->reg.state == SESSION_READY && s->rend > s->rstart && !has_whole_frame(s);

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

void session_settle(struct session *s)
{
	uint32_t events = 0;
	bool readable_buffered;

	session_unmark(s);
	if (s->in_worker)
		return; /* handshake_done() comes back to it */

	if (s->reg.state == SESSION_CLOSING) {
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
	/* Edge-triggered: a level-triggered socket that waits its turn is reported by every
	 * epoll_wait() until then, which with a thousand connections ready at once (a boot storm)
	 * was most of the loop's time when sd-event dispatched one socket per iteration. The pump
	 * reads and writes until the socket says EAGAIN, or comes back (the come-back list).
	 * The events are set only when they change (session_poll_set()): a boot storm's seed set
	 * the same ones four times. Nothing is lost by not re-arming: the pump reads until EAGAIN
	 * or comes back, and new bytes raise a new edge. */
	events |= EPOLLET;
	session_poll_set(s, events);
	release_empty_buffers(s);

	/* Bytes that TLS already decrypted, or whole frames we stopped parsing for lack of
	 * output room, do not make the fd readable again: come back for them soon. */
	readable_buffered = s->reg.state != SESSION_CLOSING && !serve_waiting(s->broker, &s->get) &&
	                    session_has_room(s, EB_FRAME_MAX) &&
	                    (eb_conn_pending(s->conn) || has_whole_frame(s));
	if (readable_buffered)
		session_come_back(s);
	update_frame_timer(s);
}

bool session_has_room(const struct session *s, size_t bytes)
{
	return SESSION_WBUF_SIZE - (s->wend - s->wstart) >= bytes;
}

/* Buffers a frame; the caller checked session_has_room(). */
int session_send(struct session *s, const struct eb_msg *m)
{
	int n, r;

	if (s->wstart > 0 && s->wstart == s->wend)
		s->wstart = s->wend = 0;
	if (!s->wbuf) {
		r = buf_resize(&s->wbuf, &s->wcap, &s->wstart, &s->wend, SESSION_BUF_SMALL);
		if (r < 0)
			return r;
	}
	for (;;) {
		if (s->wcap - s->wend < EB_FRAME_MAX && s->wstart > 0)
			buf_compact(s->wbuf, &s->wstart, &s->wend);
		/* Nothing is written when the frame does not fit: grow and encode again. */
		n = eb_msg_encode(m, s->wbuf + s->wend, s->wcap - s->wend);
		if (n != -ENOBUFS || s->wcap == SESSION_WBUF_SIZE)
			break;
		r = buf_resize(&s->wbuf, &s->wcap, &s->wstart, &s->wend, SESSION_WBUF_SIZE);
		if (r < 0)
			return r;
	}
	if (n < 0)
		return n;
	s->wend += (size_t)n;
	session_mark(s);
	return 0;
}

void session_send_retry(struct session *s, enum eb_msg_type type, uint32_t ms)
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

void session_goodbye(struct session *s)
{
	struct eb_msg m = {.type = EB_MSG_ERROR, .error.code = EB_ERR_SHUTDOWN};

	if (s->reg.state != SESSION_READY || !session_has_room(s, EB_FRAME_HEADER_SIZE + 64))
		return;
	snprintf(m.error.text, sizeof(m.error.text), "broker stopping");
	(void)session_send(s, &m);
	/* The loop has ended: this is the one write the peer gets, and close_notify with it. */
	(void)session_flush(s);
	eb_conn_shutdown(s->conn);
}

/* Parses whole frames from rbuf while there is room to answer them. */
static bool process_frames(struct session *s)
{
	bool progress = false;

	while (s->reg.state == SESSION_HELLO || s->reg.state == SESSION_READY) {
		struct eb_frame f;
		size_t size;
		int r;

		if (serve_waiting(s->broker, &s->get) || !session_has_room(s, EB_FRAME_MAX) ||
		    s->rstart == s->rend)
			break;
		r = eb_frame_parse(s->rbuf + s->rstart, s->rend - s->rstart, &f, &size);
		if (r == -EAGAIN)
			break;
		if (r < 0) {
			log_peer(s->broker, PEER_LOG_REFUSED, LOG_WARNING,
			         "Closing %s (user %s): %s frame header", s->peer,
			         session_user_name(s), r == -EMSGSIZE ? "oversized" : "malformed");
			session_refuse(s, r == -EMSGSIZE ? EB_ERR_TOO_LARGE : EB_ERR_PROTOCOL,
			               "malformed frame");
			return true;
		}
		session_handle_frame(s, &f);
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
	else if (s->rstart > 0 && s->rcap - s->rend < EB_FRAME_MAX)
		buf_compact(s->rbuf, &s->rstart, &s->rend);
	return progress;
}

/* A peer that closes, even with a reset because it left acknowledgements unread, has simply
 * left; only other errors are worth an operator's attention. */
static void log_gone(struct session *s, int r)
{
	if (r == 0 || r == -ECONNRESET || r == -EPIPE)
		log_debug("%s (user %s) closed the connection", s->peer, session_user_name(s));
	else
		log_peer(s->broker, PEER_LOG_SESSION, LOG_INFO, "%s (user %s) went away: %s",
		         s->peer, session_user_name(s), strerror(-r));
}

static void log_records(struct session *s)
{
	log_peer(
	    s->broker, PEER_LOG_RECORDS, LOG_WARNING,
	    "Closing %s (user %s): more than %u TLS post-handshake messages (KeyUpdate) in one session",
	    s->peer, session_user_name(s), EB_CONN_POST_HANDSHAKE_MAX);
}

/* What a peer may still send once it has its last message, and for how long. Enough for a HELLO
 * or a PUT racing a refusal; a peer that streams on is not reading. */
#define SESSION_LINGER_BYTES (64 * 1024)
#define SESSION_LINGER_USEC  (2 * 1000000ULL)

/* After the last frame to a peer (an ERROR), the broker does not close at once: data the peer
 * sent meanwhile (its HELLO, say, racing a refusal at accept) would make close() send a reset,
 * and the peer's read would fail before it saw the ERROR. So the session says close_notify (over
 * TLS), shuts its side down and reads what still comes, unread, until the peer closes too, or
 * SESSION_LINGER_BYTES or SESSION_LINGER_USEC have passed (the closing timer, which
 * session_set_state() armed for the flush, is shortened here). Returns whether to keep waiting. */
static bool linger(struct session *s)
{
	int fd = eb_conn_fd(s->conn);
	uint8_t sink[4096];

	if (!s->lingering) {
		eb_conn_shutdown(s->conn);
		if (shutdown(fd, SHUT_WR) < 0)
			return false;
		s->lingering = true;
		if ((uint64_t)s->broker->conf->hello_timeout_s * 1000000ULL > SESSION_LINGER_USEC) {
			(void)sd_event_source_set_time_relative(s->timer, SESSION_LINGER_USEC);
			(void)sd_event_source_set_enabled(s->timer, SD_EVENT_ONESHOT);
		}
	}
	while (s->lingered < SESSION_LINGER_BYTES) {
		ssize_t k = recv(fd, sink, MIN(sizeof(sink), SESSION_LINGER_BYTES - s->lingered),
		                 MSG_DONTWAIT);

		if (k > 0) {
			s->lingered += (size_t)k;
			continue;
		}
		/* A PUT's data may have come last: it is dropped, and wiped like any other. */
		explicit_bzero(sink, sizeof(sink));
		return k < 0 && (errno == EAGAIN || errno == EINTR);
	}
	explicit_bzero(sink, sizeof(sink));
	return false; /* it had its share: close, with a reset if it still sends */
}

/* Whether the session still owes the peer answers: a GET waiting, or whole frames read and not
 * yet handled. */
static bool owes_answers(struct session *s)
{
	struct eb_frame f;
	size_t size;

	if (s->reg.state != SESSION_HELLO && s->reg.state != SESSION_READY)
		return false;
	return serve_waiting(s->broker, &s->get) ||
	       (s->rstart < s->rend &&
	        eb_frame_parse(s->rbuf + s->rstart, s->rend - s->rstart, &f, &size) != -EAGAIN);
}

/* A peer's turn in the loop ends after this many TLS records, however many reads they took: one
 * read may take many records (OpenSSL handles post-handshake messages and empty records inside
 * it), and a turn bounded in reads alone was not bounded. A 64 KiB PUT is 4 records; a turn
 * holds a few of them, as it does 16 reads. */
#define SESSION_RECORDS_PER_TURN 64

/* One read into rbuf, when it has room. Returns the bytes read (0: no room, or nothing yet), or a
 * negative errno, logged, when the session is over: it failed, or the peer closed (-ESHUTDOWN). */
static ssize_t pump_read(struct session *s)
{
	ssize_t k;
	int r;

	if (s->rend >= SESSION_RBUF_SIZE)
		return 0;
	r = read_room(s);
	if (r < 0) {
		log_gone(s, r);
		return r;
	}
	k = eb_conn_read(s->conn, s->rbuf + s->rend, s->rcap - s->rend);
	if (k == 0 && owes_answers(s)) {
		/* The peer ended its side after its last request (docs/protocol.md 1.1, "A session
		 * the broker ends"): it is answered, then the session ends at once. */
		s->peer_done = true;
		return 0;
	}
	if (k == 0) {
		log_gone(s, 0);
		/* An orderly end, the peer's: TLS says so with close_notify before the FIN, so
		 * that the peer can tell it from a truncation. Best effort, the socket is
		 * non-blocking. */
		eb_conn_shutdown(s->conn);
		return -ESHUTDOWN;
	}
	if (k == -EAGAIN)
		return 0;
	if (k < 0) {
		if (eb_conn_failure(s->conn) == EB_CONN_FAIL_POST)
			log_records(s);
		else
			log_gone(s, (int)k);
		return k;
	}
	s->rend += (size_t)k;
	return k;
}

void session_pump(struct session *s)
{
	bool more = false; /* the last read got bytes: the socket may hold more */
	unsigned records = 0;

	assert(!s->in_worker);
	/* What a handshake step read was that step's turn. */
	(void)eb_conn_take_records(s->conn);
	for (unsigned budget = 16; budget > 0; budget--) {
		bool handled;
		ssize_t k;
		int r;

		more = false;
		if (s->reg.state == SESSION_HANDSHAKE) {
			/* Only the step that takes the ClientHello (the key exchange, about 0.3 ms)
			 * goes to a worker: the client's Finished costs less than the hand-off
			 * would, so a handshake makes one round trip to the workers, not two. */
			if (s->broker->workers && !eb_conn_key_exchanged(s->conn)) {
				session_offload_handshake(s);
				return;
			}
			r = session_handshake(s);
			if (r < 0)
				goto close;
			if (s->reg.state == SESSION_HANDSHAKE)
				break;
		}
		r = session_flush(s);
		if (r < 0) {
			if (s->reg.state != SESSION_CLOSING)
				log_gone(s, r);
			goto close;
		}
		if (s->reg.state == SESSION_CLOSING) {
			if (s->wend > s->wstart || linger(s))
				break;
			goto close;
		}
		if (s->peer_done) {
			/* Nothing more comes: what was read is handled, each answer flushed at the
			 * top of the next round; then close_notify, and the session ends. */
			if (process_frames(s) || s->reg.state == SESSION_CLOSING) {
				more = true; /* should the budget end here, come back */
				continue;
			}
			if (s->wend > s->wstart || owes_answers(s))
				break; /* the socket's room, or answer_get(), brings it back */
			log_gone(s, 0);
			eb_conn_shutdown(s->conn);
			goto close;
		}
		k = pump_read(s);
		if (k < 0)
			goto close;
		more = k > 0;
		handled = process_frames(s);
		/* Answers still buffered are flushed at the top of the next round. */
		if (k == 0 && !handled && s->wend == s->wstart)
			break;
		records += eb_conn_take_records(s->conn);
		if (records >= SESSION_RECORDS_PER_TURN)
			break; /* more, if set, brings the session back next iteration */
	}
	session_settle(s);
	/* The budget ran out before a read said EAGAIN: edge-triggered, the socket will not say
	 * again what it still holds, so come back for it. (sd-event 252 also re-reads the
	 * readiness whenever the events of an EPOLLET source are set, as above; this does not
	 * rely on that.) */
	if (more)
		session_come_back(s);
	return;
close:
	session_free(s);
}
