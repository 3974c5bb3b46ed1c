/* SPDX-License-Identifier: MIT */
/* What a session's frames mean: HELLO, PUT, GET and STATUS handed to the broker, an admin's
 * REPORT, ACTION and STATE requests to the layer above through the broker's hooks, and the
 * broker's answers (DATA, QUOTA, EMPTY, SLEEP, WAKE) turned into frames, with the per-session and
 * per-user counts they move. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-event.h>

#include "broker.h"
#include "chain.h"
#include "conn.h"
#include "history.h"
#include "log.h"
#include "macro.h"
#include "report.h"
#include "serve.h"
#include "session-internal.h"
#include "session.h"
#include "upstream.h"

/* A HELLO, PUT or GET: when the session was last heard from. */
static void seen(struct session *s)
{
	s->last_usec = broker_now(s->broker);
}

static struct user_totals *totals_of(struct session *s)
{
	return &s->broker->totals[s->reg.user];
}

/* What an admin sees (admin.c), counted here: a PUT of bytes whose claim (after the user's cap,
 * before the broker's own test) was claim, stuck when that test withheld its credit, credited
 * what the pool took. */
static void count_put(struct session *s, size_t bytes, uint64_t claim, bool stuck,
                      uint64_t credited)
{
	struct user_totals *t = totals_of(s);

	s->bytes_in += bytes;
	s->bits_in += credited;
	s->put_claimed = claim > 0;
	s->put_stuck = stuck;
	t->bytes_in += bytes;
	t->bits_in += credited;
	seen(s);
	history_count(s->broker->history, HISTORY_SOURCE, s->broker->conf->users[s->reg.user].name,
	              s->kind, credited, s->last_usec);
	if (stuck)
		history_count_alarm(s->broker->history);
}

/* An EMPTY answered the GET: the session starves from that GET's arrival until a DATA. */
static void count_empty(struct session *s)
{
	s->empty_answers++;
	s->quota_spent = false;
	totals_of(s)->empty_answers++;
	history_count_empty(s->broker->history);
	if (s->starving_since_usec == 0)
		s->starving_since_usec = s->get.request.since_usec;
}

/* The journal hears of a user's spent quota at most this often: a sink retries every time its
 * QUOTA's hint runs out, and a fleet's guests each have their own sessions. */
#define QUOTA_LOG_INTERVAL_USEC (60 * 1000000ULL)
#define MSGID_QUOTA_SPENT       "9e0aec3866724838af0c20345890d6e8"

/* A QUOTA answered the GET: the session starves as for an EMPTY, for another reason, and the
 * journal says whose quota, what it spent and when it can draw again. */
static void count_quota(struct session *s, uint32_t retry_ms)
{
	struct broker *b = s->broker;
	struct user_totals *t = totals_of(s);
	const struct eb_user *u = session_user(s);
	uint64_t now = broker_now(b);
	char fields[256];
	double left;

	s->quota_answers++;
	s->quota_spent = true;
	t->quota_answers++;
	if (s->starving_since_usec == 0)
		s->starving_since_usec = s->get.request.since_usec;
	if (t->quota_logged_usec != 0 && now - t->quota_logged_usec < QUOTA_LOG_INTERVAL_USEC)
		return;
	t->quota_logged_usec = now;
	left = sched_quota_tokens(&b->quotas[s->reg.user], u->quota_bits_per_hour, now);
	snprintf(fields, sizeof(fields),
	         "MESSAGE_ID=" MSGID_QUOTA_SPENT "\nEB_USER=%s\nEB_QUOTA_BITS_PER_HOUR=%" PRIu64
	         "\nEB_RETRY_MS=%" PRIu32,
	         u->name, u->quota_bits_per_hour, retry_ms);
	log_struct(LOG_NOTICE, fields,
	           "User %s spent its quota of %" PRIu64 " bits an hour (%.0f bits left, less "
	           "than a request costs); %s is answered QUOTA, and its quota refills enough "
	           "in %" PRIu32 " ms",
	           u->name, u->quota_bits_per_hour, left > 0 ? left : 0.0, s->peer, retry_ms);
}

/* A DATA of bytes carrying bits (0 for DRBG output) answered the GET. */
static void count_data(struct session *s, size_t bytes, uint32_t bits)
{
	struct user_totals *t = totals_of(s);

	s->starving_since_usec = 0;
	s->quota_spent = false;
	if (s->get.request.drbg) {
		s->bytes_drbg += bytes;
		t->bytes_drbg += bytes;
	} else {
		s->bits_out += bits;
		t->bits_out += bits;
		history_count(s->broker->history, HISTORY_SINK,
		              s->broker->conf->users[s->reg.user].name, s->kind, bits,
		              broker_now(s->broker));
	}
}

static void send_sleep(struct session *s)
{
	session_send_retry(s, EB_MSG_SLEEP, SCHEDULER_SLEEP_MS);
	s->asleep = true;
	s->asleep_until_usec = broker_now(s->broker) + SCHEDULER_SLEEP_MS * 1000ULL;
}

bool session_is_asleep(const struct session *s, uint64_t now)
{
	return (s->reg.roles & EB_ROLE_SOURCE) && s->asleep && now < s->asleep_until_usec;
}

/* A HELLO that carries broker ids: makes room in the chain's budget, then takes the ids or
 * refuses the session (negative). */
static int hello_chain(struct session *s, const struct eb_msg_hello *h)
{
	struct chain_link *l;
	const char *why;
	int r;

	/* The chain's budget is shared fairly: a user holding more ids than this one would makes
	 * way (chain.h), its session ended as one refused at HELLO would be. */
	while ((l = chain_make_way(s->broker, s->reg.user, h))) {
		struct session *o = (struct session *)((char *)l - offsetof(struct session, chain));

		log_peer_refused(
		    s->broker, PEER_LOG_REFUSED, LOG_WARNING,
		    "Ending %s (user %s): its %u broker ids make way for %s (user %s, %u "
		    "ids); no user may spend more of the %u the chain holds than another "
		    "that needs room",
		    o->peer, session_user_name(o), l->n, s->peer, session_user_name(s), h->n_chain,
		    EB_CHAIN_MAX);
		session_refuse(o, EB_ERR_FORBIDDEN, "chain too deep: more than 16 brokers");
		session_settle(o); /* its socket is to be written: the ERROR, then the close */
	}
	r = chain_accept(s->broker, s->reg.user, s->peer, h, &s->chain, &why);
	if (r < 0)
		session_refuse(s, EB_ERR_FORBIDDEN, why);
	return r;
}

static void handle_hello(struct session *s, const struct eb_msg_hello *h)
{
	const struct eb_user *u = session_user(s);
	char want[64], have[64];
	struct eb_msg m = {.type = EB_MSG_WELCOME};

	if (h->version != EB_PROTO_VERSION) {
		log_peer_refused(
		    s->broker, PEER_LOG_REFUSED, LOG_WARNING,
		    "Refusing %s (user %s): protocol version %u, this broker speaks %u", s->peer,
		    u->name, h->version, EB_PROTO_VERSION);
		session_refuse(s, EB_ERR_VERSION, "unsupported protocol version");
		return;
	}
	if ((h->roles & ~u->roles) != 0) {
		log_peer_refused(s->broker, PEER_LOG_REFUSED, LOG_WARNING,
		                 "Refusing %s: user %s asked for roles %s but has only %s", s->peer,
		                 u->name, eb_roles_to_string(h->roles, want, sizeof(want)),
		                 eb_roles_to_string(u->roles, have, sizeof(have)));
		session_refuse(s, EB_ERR_FORBIDDEN, "role not allowed for this user");
		return;
	}
	if (h->n_chain > 0 && hello_chain(s, h) < 0)
		return;
	registry_set_roles(&s->reg, h->roles);
	if (s->reg.roles & EB_ROLE_SOURCE)
		eb_conn_set_bulk(s->conn);
	snprintf(s->kind, sizeof(s->kind), "%s", h->kind);
	s->id = ++s->broker->last_session_id;
	s->claim_mbits_per_byte = h->claim_mbits_per_byte;
	seen(s);
	session_set_state(s, SESSION_READY);
	if (s->chain.n > 0) {
		/* What this broker draws for upstream just grew: its own upstream hears now. */
		chain_join(s->broker, &s->chain);
		upstream_path_changed(s->broker);
	}
	(void)sd_event_source_set_enabled(s->timer, SD_EVENT_OFF);

	m.welcome.version = EB_PROTO_VERSION;
	m.welcome.roles = (uint8_t)s->reg.roles;
	m.welcome.max_data = EB_DATA_MAX;
	snprintf(m.welcome.user, sizeof(m.welcome.user), "%s", u->name);
	(void)session_send(s, &m);
	if (s->reg.roles & EB_ROLE_SOURCE)
		/* The HELLO's claim is the source's word, shown to the operator; credit is decided
		 * per PUT, under the user's cap. */
		log_peer(s->broker, PEER_LOG_SESSION, LOG_INFO,
		         "%s: user %s connected as %s (%s), claiming %u.%03u bits per byte",
		         s->peer, u->name, eb_roles_to_string(s->reg.roles, want, sizeof(want)),
		         s->kind[0] ? s->kind : "-", h->claim_mbits_per_byte / 1000,
		         h->claim_mbits_per_byte % 1000);
	else if (s->reg.roles == EB_ROLE_ADMIN)
		/* A status reader (eb-metrics at every scrape, eb-brokerctl) changes nothing: a
		 * journal line each time would be thousands a day. */
		log_debug("%s: user %s connected as admin (%s)", s->peer, u->name,
		          s->kind[0] ? s->kind : "-");
	else
		log_peer(s->broker, PEER_LOG_SESSION, LOG_INFO, "%s: user %s connected as %s (%s)",
		         s->peer, u->name, eb_roles_to_string(s->reg.roles, want, sizeof(want)),
		         s->kind[0] ? s->kind : "-");

	if ((s->reg.roles & EB_ROLE_SOURCE) && s->broker->sources_asleep)
		send_sleep(s);
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
	bool stuck = false;
	struct eb_msg m = {.type = EB_MSG_PUT_ACK};
	int r;

	claim = MIN(claim, (uint64_t)p->len * u->max_credit_per_byte);
	if (claim > 0 && put_looks_stuck(s, p)) {
		if (!s->stuck_logged)
			log_peer(s->broker, PEER_LOG_REFUSED, LOG_WARNING,
			         "%s: data from user %s repeats itself; crediting none of it",
			         s->peer, u->name);
		s->stuck_logged = true;
		stuck = true;
	}
	r = serve_put(s->broker, p->data, p->len, stuck ? 0 : claim, &credited);
	if (r < 0) {
		log_error_errno(r, "Failed to add to the pool: %m");
		session_refuse(s, EB_ERR_INTERNAL, "pool failure");
		return;
	}
	count_put(s, p->len, claim, stuck, credited);
	m.put_ack.credited_bits = (uint32_t)credited;
	m.put_ack.accepted_bytes = p->len;
	(void)session_send(s, &m);
	/* A source that rested the SLEEP's retry_ms and finds the pool still at high water is
	 * told SLEEP again, as is one the broker could not tell before; one still inside its
	 * rest (a PUT already on its way) is not, so that PUTs cannot make SLEEPs pile up. */
	if (s->broker->sources_asleep && !session_is_asleep(s, broker_now(s->broker)) &&
	    session_has_room(s, EB_FRAME_HEADER_SIZE + 8))
		send_sleep(s);
}

/* The GET path's answer to the waiting GET (serve.h): d is DATA, QUOTA or EMPTY, or NULL when the
 * pool failed (an ERROR, then close). */
static void answer_get(struct serve_request *q, const struct sched_decision *d, const uint8_t *data)
{
	SESSION_ENTRY();
	struct session *s = (struct session *)((char *)q - offsetof(struct session, get));
	struct eb_msg m = {.type = EB_MSG_DATA};
	int r;

	assert(!serve_waiting(s->broker, q));
	if (!d) {
		session_refuse(s, EB_ERR_INTERNAL, "pool failure");
		session_come_back(s);
		return;
	}
	switch (d->verdict) {
	case SCHED_DATA:
		/* Only full-entropy output carries bits; DRBG output is never counted as entropy.
		 */
		m.data.bits = s->get.request.drbg ? 0 : (uint32_t)(d->bytes * 8);
		m.data.data = data;
		m.data.len = (uint32_t)d->bytes;
		r = session_send(s, &m);
		if (r < 0) {
			log_error_errno(r, "Failed to encode DATA for %s: %m", s->peer);
			session_refuse(s, EB_ERR_INTERNAL, "encoding failure");
			session_come_back(s);
			return;
		}
		count_data(s, m.data.len, m.data.bits);
		break;
	case SCHED_QUOTA:
		count_quota(s, d->retry_ms);
		session_send_retry(s, EB_MSG_QUOTA, d->retry_ms);
		break;
	case SCHED_EMPTY:
		count_empty(s);
		session_send_retry(s, EB_MSG_EMPTY, d->retry_ms);
		break;
	case SCHED_WAIT:
	case _SCHED_VERDICT_MAX:
	case _SCHED_VERDICT_INVALID:
		assert(!"not an answer");
		return;
	}
	/* Flush and read on from the event loop: the broker answers from its own handler. */
	session_come_back(s);
}

static void handle_get(struct session *s, const struct eb_msg_get *g)
{
	s->get.request.bits = g->bits;
	s->get.request.drbg = g->mode == EB_GET_DRBG;
	s->get.request.user = s->reg.user;
	s->get.request.since_usec = broker_now(s->broker);
	s->get.answer = answer_get;
	seen(s);
	session_clones_draw(s);
	serve_get(s->broker, &s->get);
}

/* A page of a report: up to EB_REPORT_ROWS_MAX rows, within the one frame the write buffer has
 * room for before a frame is read. */
static void handle_report(struct session *s, const struct eb_msg_report_req *q)
{
	_cleanup_free_ uint8_t *rows = malloc(EB_REPORT_ROWS_SIZE);
	struct eb_msg m;
	int r;

	/* Up to admin_report() (admin.c, wired in brokerd.c). */
	r = rows ? s->broker->hooks.report(s->broker, q, rows, EB_REPORT_ROWS_SIZE, &m) : -ENOMEM;
	if (r >= 0)
		r = session_send(s, &m);
	if (r < 0) {
		log_error_errno(r, "Failed to report %s to %s: %m",
		                eb_report_table_to_string(q->table), s->peer);
		session_refuse(s, EB_ERR_INTERNAL, "report failure");
	}
}

/* An admin's action is carried out and answered at once; its answer is a few hundred bytes, which
 * session_handle_frame()'s caller made room for. */
static void handle_action(struct session *s, const struct eb_msg_action_req *q)
{
	struct eb_msg m;

	/* Up to admin_action() (admin-actions.c, wired in brokerd.c). */
	s->broker->hooks.action(s->broker, &s->reg, q, &m);
	(void)session_send(s, &m);
}

static void handle_state(struct session *s)
{
	struct eb_msg m;

	/* Up to admin_state() (admin-actions.c, wired in brokerd.c). */
	s->broker->hooks.state(s->broker, &m);
	(void)session_send(s, &m);
}

/* Only the admin role may act, as only it may read. */
static void handle_admin(struct session *s, const struct eb_msg *m)
{
	if ((s->reg.roles & EB_ROLE_ADMIN) == 0) {
		log_peer_refused(s->broker, PEER_LOG_REFUSED, LOG_WARNING,
		                 "Refusing %s from %s: user %s is not an admin",
		                 eb_msg_type_to_string(m->type), s->peer, session_user_name(s));
		session_refuse(s, EB_ERR_FORBIDDEN, "this user is not an admin");
		return;
	}
	if (m->type == EB_MSG_ACTION_REQ)
		handle_action(s, &m->action_req);
	else
		handle_state(s);
}

static void handle_status(struct session *s, const struct eb_msg_status_req *q)
{
	struct eb_msg m = {.type = EB_MSG_STATUS};

	/* In the layout asked for: an admin that sent the empty STATUS_REQ reads what it always
	 * read (docs/protocol.md 3.10). */
	broker_fill_status(s->broker, q->version, &m.status);
	(void)session_send(s, &m);
}

void session_tell_asleep(struct registry_entry *e, bool asleep)
{
	SESSION_ENTRY();
	struct session *s = session_of(e);
	struct eb_msg m = {.type = asleep ? EB_MSG_SLEEP : EB_MSG_WAKE,
	                   .retry.retry_ms = SCHEDULER_SLEEP_MS};

	if (s->reg.state != SESSION_READY || !(s->reg.roles & EB_ROLE_SOURCE) ||
	    s->asleep == asleep || !session_has_room(s, EB_FRAME_HEADER_SIZE + 8))
		return;
	(void)session_send(s, &m);
	s->asleep = asleep;
	s->asleep_until_usec = asleep ? broker_now(s->broker) + SCHEDULER_SLEEP_MS * 1000ULL : 0;
	if (!asleep)
		s->woken_usec = broker_now(s->broker);
	session_come_back(s);
}

/* A session's first frame after authentication must be its HELLO. */
static void handle_first(struct session *s, const struct eb_msg *m)
{
	if (m->type != EB_MSG_HELLO) {
		log_peer(s->broker, PEER_LOG_REFUSED, LOG_WARNING,
		         "Closing %s (user %s): sent %s before HELLO", s->peer,
		         session_user_name(s), eb_msg_type_to_string(m->type));
		session_refuse(s, EB_ERR_PROTOCOL, "HELLO expected");
		return;
	}
	handle_hello(s, &m->hello);
}

/* A request of a session past HELLO, handled when the roles it connected with allow it. */
static void handle_request(struct session *s, const struct eb_msg *m)
{
	const struct eb_user *u = session_user(s);
	char roles[64];

	switch (m->type) {
	case EB_MSG_PUT:
		if (!(s->reg.roles & EB_ROLE_SOURCE)) {
			log_peer_refused(
			    s->broker, PEER_LOG_REFUSED, LOG_WARNING,
			    "Refusing PUT from %s: user %s may not donate (connected as %s)",
			    s->peer, u->name,
			    eb_roles_to_string(s->reg.roles, roles, sizeof(roles)));
			session_refuse(s, EB_ERR_FORBIDDEN, "this user may not donate");
			return;
		}
		handle_put(s, &m->put);
		return;
	case EB_MSG_GET:
		if (!(s->reg.roles & EB_ROLE_SINK)) {
			log_peer_refused(
			    s->broker, PEER_LOG_REFUSED, LOG_WARNING,
			    "Refusing GET from %s: user %s may not draw (connected as %s)", s->peer,
			    u->name, eb_roles_to_string(s->reg.roles, roles, sizeof(roles)));
			session_refuse(s, EB_ERR_FORBIDDEN, "this user may not draw");
			return;
		}
		handle_get(s, &m->get);
		return;
	case EB_MSG_STATUS_REQ:
		if (!(s->reg.roles & EB_ROLE_ADMIN)) {
			log_peer_refused(s->broker, PEER_LOG_REFUSED, LOG_WARNING,
			                 "Refusing STATUS from %s: user %s is not an admin",
			                 s->peer, u->name);
			session_refuse(s, EB_ERR_FORBIDDEN, "this user may not read status");
			return;
		}
		handle_status(s, &m->status_req);
		return;
	case EB_MSG_REPORT_REQ:
		if (!(s->reg.roles & EB_ROLE_ADMIN)) {
			log_peer_refused(s->broker, PEER_LOG_REFUSED, LOG_WARNING,
			                 "Refusing REPORT from %s: user %s is not an admin",
			                 s->peer, u->name);
			session_refuse(s, EB_ERR_FORBIDDEN, "this user may not read status");
			return;
		}
		handle_report(s, &m->report_req);
		return;
	case EB_MSG_ACTION_REQ:
	case EB_MSG_STATE_REQ:
		handle_admin(s, m);
		return;
	case EB_MSG_ERROR: /* answered before: see session_handle_frame() */
	case EB_MSG_HELLO:
	case EB_MSG_WELCOME:
	case EB_MSG_PUT_ACK:
	case EB_MSG_DATA:
	case EB_MSG_EMPTY:
	case EB_MSG_SLEEP:
	case EB_MSG_WAKE:
	case EB_MSG_QUOTA:
	case EB_MSG_STATUS:
	case EB_MSG_REPORT:
	case EB_MSG_ACTION:
	case EB_MSG_STATE:
	case _EB_MSG_MAX:
	case _EB_MSG_INVALID:
		break;
	}
	log_peer(s->broker, PEER_LOG_REFUSED, LOG_WARNING, "Closing %s (user %s): unexpected %s",
	         s->peer, u->name, eb_msg_type_to_string(m->type));
	session_refuse(s, EB_ERR_PROTOCOL, "unexpected message");
}

void session_handle_frame(struct session *s, const struct eb_frame *f)
{
	struct eb_msg m;
	int r;

	r = eb_msg_decode(f, &m);
	/* An ERROR is never answered (docs/protocol.md 3.9), whole or malformed, before HELLO or
	 * after: the peer is leaving, and answering it would have two sides trading ERRORs. */
	if (f->type == EB_MSG_ERROR) {
		log_peer(s->broker, PEER_LOG_SESSION, LOG_INFO,
		         "%s (user %s) reported an error and leaves: %s", s->peer,
		         session_user_name(s), r < 0 ? "(malformed ERROR)" : m.error.text);
		session_set_state(s, SESSION_CLOSING);
		return;
	}
	if (r < 0) {
		log_peer(s->broker, PEER_LOG_REFUSED, LOG_WARNING,
		         "Closing %s (user %s): malformed %s frame", s->peer, session_user_name(s),
		         eb_msg_type_to_string(f->type));
		session_refuse(s, EB_ERR_PROTOCOL, "malformed message");
		return;
	}
	if (s->reg.state == SESSION_HELLO)
		handle_first(s, &m);
	else
		handle_request(s, &m);
}
