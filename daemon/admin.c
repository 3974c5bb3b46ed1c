/* SPDX-License-Identifier: MIT */
/* The admin's view: the REPORT pages of sessions, users and counters. Only what the broker already
 * holds is shown: names, addresses and counters, never a key. */
#include "admin.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "conf.h"
#include "history.h"
#include "list.h"
#include "macro.h"
#include "report.h"
#include "scheduler.h"
#include "serve.h"
#include "session.h"
#include "time-util.h"
#include "upstream.h"

static uint32_t ms_since(uint64_t then, uint64_t now)
{
	uint64_t ms = now > then ? (now - then) / 1000 : 0;

	return (uint32_t)MIN(ms, (uint64_t)UINT32_MAX);
}

/* A source told SLEEP rests until it is woken: after its retry_ms it may send again, but one that
 * waits for the WAKE (eb-source-jitter does) is as healthy as one that does not, for as long as
 * the pool stays full. Its silence counts from its last PUT or its WAKE, whichever is later. */
static enum eb_source_health source_health(const struct broker *b, const struct session *s,
                                           uint64_t now)
{
	struct eb_source_seen seen = {
	    .source = s->reg.roles & EB_ROLE_SOURCE,
	    .asleep = session_is_asleep(s, now) || (s->asleep && b->sources_asleep),
	    .idle_ms = ms_since(MAX(s->last_usec, s->woken_usec), now),
	    .bytes_in = s->bytes_in,
	    .put_claimed = s->put_claimed,
	    .put_stuck = s->put_stuck,
	};

	return eb_source_health(&seen);
}

/* The user's quota bucket now, or false when the user has none. */
static bool quota_left(struct broker *b, int user, uint64_t now, uint64_t *ret)
{
	const struct eb_user *u = &b->conf->users[user];
	double tokens;

	if (u->quota_bits_per_hour == 0)
		return false;
	tokens = sched_quota_tokens(&b->quotas[user], u->quota_bits_per_hour, now);
	tokens = tokens < 0 ? 0 : tokens;
	*ret = MIN((uint64_t)tokens, u->quota_bits_per_hour);
	return true;
}

/* The broker writes a peer's address itself, but the listener's name comes from systemd:
 * anything outside printable ASCII is shown as "?" rather than failing the page. */
static void copy_printable(char *dst, size_t size, const char *src)
{
	size_t i;

	for (i = 0; i + 1 < size && src[i]; i++)
		dst[i] = src[i] >= 0x20 && src[i] < 0x7f ? src[i] : '?';
	dst[i] = '\0';
}

static void session_row(struct broker *b, struct session *s, uint64_t now, uint8_t version,
                        struct eb_report_session *ret)
{
	const struct eb_user *u = &b->conf->users[s->reg.user];
	uint64_t left = 0;

	*ret = (struct eb_report_session){
	    .id = s->id,
	    .roles = (uint8_t)s->reg.roles,
	    .health = source_health(b, s, now),
	    .flags = s->reg.local ? 0 : EB_REPORT_TLS,
	    .claim_mbits_per_byte = s->claim_mbits_per_byte,
	    .connected_s = ms_since(s->reg.hs.accepted_usec, now) / 1000,
	    .last_ms = ms_since(s->last_usec, now),
	    .bytes_in = s->bytes_in,
	    .bits_in = s->bits_in,
	    .bits_out = s->bits_out,
	    .bytes_drbg = s->bytes_drbg,
	};
	if (session_is_asleep(s, now))
		ret->flags |= EB_REPORT_ASLEEP;
	if (serve_waiting(b, &s->get)) {
		ret->flags |= EB_REPORT_WAITING;
		ret->waiting_ms = ms_since(s->get.request.since_usec, now);
	}
	if (quota_left(b, s->reg.user, now, &left)) {
		ret->flags |= EB_REPORT_QUOTA;
		ret->quota_left_bits = left;
	}
	if (version >= 1 && (s->reg.roles & EB_ROLE_SINK)) {
		/* A sink between an EMPTY and its retry waits for nothing in the queue, but it
		 * is still without entropy: it starves from its first unanswered GET on. */
		uint64_t since = s->starving_since_usec      ? s->starving_since_usec
		                 : serve_waiting(b, &s->get) ? s->get.request.since_usec
		                                             : 0;

		ret->empty_answers = s->empty_answers;
		ret->starving_ms = since ? MAX(ms_since(since, now), 1u) : 0;
		if (version >= 2) {
			ret->quota_answers = s->quota_answers;
			if (s->quota_spent && s->starving_since_usec)
				ret->flags |= EB_REPORT_QUOTA_SPENT;
		}
		if (version >= 3 && s->clone)
			ret->flags |= EB_REPORT_CLONE;
	}
	snprintf(ret->user, sizeof(ret->user), "%s", u->name);
	snprintf(ret->kind, sizeof(ret->kind), "%s", s->kind);
	copy_printable(ret->peer, sizeof(ret->peer), s->peer);
}

/* The broker's own draw from its [upstream]: a source like any other to the operator, known by
 * its flag and an id after every session's; its state and why are in STATE. */
static void upstream_row(struct broker *b, struct eb_report_session *ret)
{
	const char *user = b->conf->upstream.user;
	uint64_t wall = eb_wall_ms(), seen;
	struct upstream_view v;

	upstream_get_view(b->upstream, &v);
	*ret = (struct eb_report_session){
	    .id = EB_REPORT_UPSTREAM_ID,
	    .roles = EB_ROLE_SOURCE,
	    .health = v.failing       ? EB_SOURCE_SILENT
	              : v.bits_in > 0 ? EB_SOURCE_OK
	                              : EB_SOURCE_NEW,
	    .flags = EB_REPORT_UPSTREAM,
	    /* Its DATA is full entropy, 8 bits a byte: the claim its credit is judged against. */
	    .claim_mbits_per_byte = 8000,
	    .bytes_in = v.bytes_in,
	    .bits_in = v.bits_in,
	};
	/* Its times are dates (CLOCK_REALTIME): last seen is its last DATA, else its state's start;
	 * connected, since it was connected. */
	seen = v.data_ms ? v.data_ms : v.since_ms;
	if (seen)
		ret->last_ms = (uint32_t)MIN(wall > seen ? wall - seen : 0, (uint64_t)UINT32_MAX);
	if (v.state == EB_UPSTREAM_CONNECTED && wall > v.since_ms)
		ret->connected_s = (uint32_t)MIN((wall - v.since_ms) / 1000, (uint64_t)UINT32_MAX);
	if (!v.broker[0] || strncmp(v.broker, "unix:", 5) != 0)
		ret->flags |= EB_REPORT_TLS;
	snprintf(ret->user, sizeof(ret->user), "%s", user && user[0] ? user : "(by uid)");
	snprintf(ret->kind, sizeof(ret->kind), "upstream");
	copy_printable(ret->peer, sizeof(ret->peer), v.broker[0] ? v.broker : "(not connected)");
}

static int by_id(const void *a, const void *b)
{
	const struct session *x = *(struct session *const *)a, *y = *(struct session *const *)b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/* Sessions that said HELLO and are not closing, with ids above after, in id order. A page costs
 * a pass over the sessions and a sort of those after it: an admin's request, not the hot path. */
static int sessions_page(struct broker *b, uint64_t after, uint8_t version, uint8_t *buf,
                         size_t size, struct eb_msg_report *ret)
{
	_cleanup_free_ struct session **v = NULL;
	const struct registry_entry *e;
	uint64_t now = broker_now(b);
	size_t n = 0, rows, used = 0;
	unsigned count = 0;

	v = malloc(MAX(b->registry.n_sessions, 1u) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	registry_foreach_ready(e, &b->registry)
		if (session_of(e)->id > after && n < b->registry.n_sessions)
			v[n++] = session_of(e);
	qsort(v, n, sizeof(*v), by_id);
	/* The upstream, if any, is the last row. */
	rows = n + (b->upstream && after < EB_REPORT_UPSTREAM_ID);

	for (; count < rows && count < EB_REPORT_ROWS_MAX; count++) {
		struct eb_report_session row;
		int k;

		if (count < n)
			session_row(b, v[count], now, version, &row);
		else
			upstream_row(b, &row);
		k = eb_report_session_encode_version(&row, version, buf + used, size - used);
		if (k < 0)
			return k;
		used += (size_t)k;
	}
	*ret = (struct eb_msg_report){
	    .table = EB_REPORT_SESSIONS,
	    .version = version,
	    .count = (uint16_t)count,
	    .next = count < rows ? v[count - 1]->id : 0,
	    .rows = used > 0 ? buf : NULL,
	    .rows_len = (uint32_t)used,
	};
	return 0;
}

/* Users in the order of the configuration; their id is their place in it, from 1. */
static int users_page(struct broker *b, uint64_t after, uint8_t version, uint8_t *buf, size_t size,
                      struct eb_msg_report *ret)
{
	_cleanup_free_ uint32_t *counts = NULL;
	const struct eb_conf *conf = b->conf;
	const struct registry_entry *e;
	uint64_t now = broker_now(b);
	size_t used = 0;
	unsigned count = 0, i;

	/* Sessions, sources and sinks per user, established now. */
	counts = calloc(MAX(conf->n_users, 1u) * 3, sizeof(*counts));
	if (!counts)
		return -ENOMEM;
	registry_foreach_ready(e, &b->registry) {
		counts[3 * e->user]++;
		counts[3 * e->user + 1] += !!(e->roles & EB_ROLE_SOURCE);
		counts[3 * e->user + 2] += !!(e->roles & EB_ROLE_SINK);
	}

	for (i = after < conf->n_users ? (unsigned)after : conf->n_users;
	     i < conf->n_users && count < EB_REPORT_ROWS_MAX; i++, count++) {
		const struct eb_user *u = &conf->users[i];
		const struct user_totals *t = &b->totals[i];
		struct eb_report_user row = {
		    .id = i + 1,
		    .roles = (uint8_t)u->roles,
		    .sessions = counts[3 * i],
		    .sources = counts[3 * i + 1],
		    .sinks = counts[3 * i + 2],
		    .bytes_in = t->bytes_in,
		    .bits_in = t->bits_in,
		    .bits_out = t->bits_out,
		    .bytes_drbg = t->bytes_drbg,
		    .empty_answers = version >= 1 ? t->empty_answers : 0,
		    .quota_answers = version >= 2 ? t->quota_answers : 0,
		    .max_sessions = version >= 2 ? u->max_sessions : 0,
		};
		int k;

		if (quota_left(b, (int)i, now, &row.quota_left_bits)) {
			row.flags = EB_REPORT_USER_QUOTA;
			row.quota_bits_per_hour = u->quota_bits_per_hour;
		}
		snprintf(row.name, sizeof(row.name), "%s", u->name);
		k = eb_report_user_encode_version(&row, version, buf + used, size - used);
		if (k < 0)
			return k;
		used += (size_t)k;
	}
	*ret = (struct eb_msg_report){
	    .table = EB_REPORT_USERS,
	    .version = version,
	    .count = (uint16_t)count,
	    .next = i < conf->n_users ? i : 0,
	    .rows = used > 0 ? buf : NULL,
	    .rows_len = (uint32_t)used,
	};
	return 0;
}

/* The refusals since start, then the sessions against their limits now: one page, in id order. */
static int counters_page(struct broker *b, uint64_t after, uint8_t version, uint8_t *buf,
                         size_t size, struct eb_msg_report *ret)
{
	const struct registry *reg = &b->registry;
	uint64_t gauges[_EB_COUNTER_MAX] = {
	    [EB_COUNTER_NETWORK_SESSIONS] = reg->n_network,
	    [EB_COUNTER_LOCAL_SESSIONS] = reg->n_local,
	    [EB_COUNTER_HANDSHAKES] = reg->n_handshakes,
	    [EB_COUNTER_MAX_SESSIONS] = b->conf->max_sessions,
	    [EB_COUNTER_MAX_LOCAL_SESSIONS] = b->conf->max_local_sessions,
	    [EB_COUNTER_MAX_HANDSHAKES] = b->conf->max_handshakes,
	    [EB_COUNTER_BROKER_ID] = b->chain_id,
	};
	size_t used = 0;
	unsigned count = 0;

	for (int c = 1; c < _EB_COUNTER_MAX; c++) {
		struct eb_report_counter row = {(uint64_t)c, b->counters[c] + gauges[c]};
		int k;

		/* Ids without a name are gaps kept for later counters. */
		if ((uint64_t)c <= after || !eb_counter_to_string(c))
			continue;
		k = eb_report_counter_encode(&row, buf + used, size - used);
		if (k < 0)
			return k;
		used += (size_t)k;
		count++;
	}
	*ret = (struct eb_msg_report){
	    .table = EB_REPORT_COUNTERS,
	    .version = version,
	    .count = (uint16_t)count,
	    .rows = used > 0 ? buf : NULL,
	    .rows_len = (uint32_t)used,
	};
	return 0;
}

int admin_report(struct broker *b, const struct eb_msg_report_req *q, uint8_t *buf, size_t size,
                 struct eb_msg *ret)
{
	struct eb_msg m = {.type = EB_MSG_REPORT};
	int r = -EINVAL;

	switch ((enum eb_report_table)q->table) {
	case EB_REPORT_SESSIONS:
		r = sessions_page(b, q->after, q->version, buf, size, &m.report);
		break;
	case EB_REPORT_USERS:
		r = users_page(b, q->after, q->version, buf, size, &m.report);
		break;
	case EB_REPORT_HISTORY:
		r = history_page(b->history, q->after, broker_now(b), buf, size, &m.report);
		/* Its rows are the same in every version from 1: the answer is in the one asked. */
		m.report.version = q->version;
		break;
	case EB_REPORT_COUNTERS:
		r = counters_page(b, q->after, q->version, buf, size, &m.report);
		break;
	case _EB_REPORT_TABLE_MAX:
	case _EB_REPORT_TABLE_INVALID:
		break;
	}
	if (r < 0)
		return r;
	*ret = m;
	return 0;
}
