/* SPDX-License-Identifier: MIT */
/* The admin's report frames: REPORT_REQ, REPORT and the session and user rows they carry. */
#include "report.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "macro.h"
#include "proto-internal.h"

/*
 * Layouts (big-endian; docs/protocol.md has the tables). As everywhere in the protocol, every
 * row is consumed exactly and has one encoding.
 *
 *   REPORT_REQ  u8 table, u8 version, u8 reserved[2], u64 after
 *   REPORT      u8 table, u8 version, u16 count, u64 next, count rows
 *   session row u64 id, u8 roles, u8 health, u8 flags, u8 reserved, u32 claim_mbits_per_byte,
 *               u32 connected_s, u32 last_ms, u32 waiting_ms, u64 bytes_in, u64 bits_in,
 *               u64 bits_out, u64 bytes_drbg, u64 quota_left_bits, text user, text kind,
 *               text peer; version 1: then u64 empty_answers, u32 starving_ms; version 2:
 *               then u64 quota_answers; version 3: the same, and flags may hold
 *               EB_REPORT_CLONE
 *   user row    u64 id, u8 roles, u8 flags, u16 reserved, u32 sessions, u32 sources, u32 sinks,
 *               u64 bytes_in, u64 bits_in, u64 bits_out, u64 bytes_drbg,
 *               u64 quota_bits_per_hour, u64 quota_left_bits, text name; version 1: then
 *               u64 empty_answers; version 2: then u64 quota_answers, u32 max_sessions
 *   counter row u64 id, u64 value (report-counters.c)
 *
 * Version 0 was the first layout (the bytes were reserved, 0): a client that asks for it reads
 * what it always read. Version 1's fields go after the texts, so that its rows begin as
 * version 0's do.
 */
#define REPORT_REQ_SIZE     12
#define REPORT_FIXED_SIZE   12
#define SESSION_ROW_FIXED   68
#define USER_ROW_FIXED      72
#define SESSION_ROW_V1      12
#define USER_ROW_V1         8
#define SESSION_ROW_V2      8
#define USER_ROW_V2         12
#define REPORT_ROWS_LEN_MAX (EB_FRAME_PAYLOAD_MAX - REPORT_FIXED_SIZE)

_Static_assert(REPORT_FIXED_SIZE + EB_REPORT_ROWS_SIZE <= EB_FRAME_PAYLOAD_MAX,
               "a full page of the largest rows fits one frame");
_Static_assert(EB_REPORT_USER_ROW_MAX <= EB_REPORT_SESSION_ROW_MAX, "sessions are the widest");

/* The history table came with version 1 and has that layout in every later one; the counters
 * table came with version 2. */
static bool table_valid(unsigned t, unsigned version)
{
	return t > 0 && t < _EB_REPORT_TABLE_MAX && version <= EB_REPORT_VERSION &&
	       (t != EB_REPORT_HISTORY || version >= 1) &&
	       (t != EB_REPORT_COUNTERS || version >= 2);
}

/* No more bits credited than 8 per byte taken: what every PUT obeys, summed. */
static bool bits_fit(uint64_t bits, uint64_t bytes)
{
	return bits / 8 + (bits % 8 != 0) <= bytes;
}

/* A text of min..max bytes: the length it has on the wire, or -EINVAL. */
static int text_size(const char *s, size_t min, size_t max, size_t *ret)
{
	size_t n;
	int r;

	r = eb_proto_text_length(s, max, &n);
	if (r < 0)
		return r;
	if (n < min)
		return -EINVAL;
	*ret = 2 + n;
	return 0;
}

/* The rules a session row obeys; its size on the wire, or -EINVAL. */
static int session_validate(const struct eb_report_session *r, uint8_t version, size_t *ret_size)
{
	size_t user, kind, peer;
	bool source = r->roles & EB_ROLE_SOURCE;

	if (version > EB_REPORT_VERSION ||
	    (version == 0 && (r->empty_answers != 0 || r->starving_ms != 0)) ||
	    (version < 2 && (r->quota_answers != 0 || (r->flags & EB_REPORT_QUOTA_SPENT))) ||
	    (version < 3 && (r->flags & EB_REPORT_CLONE)) ||
	    ((r->flags & EB_REPORT_CLONE) && !(r->roles & EB_ROLE_SINK)) ||
	    (!(r->roles & EB_ROLE_SINK) &&
	     (r->empty_answers != 0 || r->starving_ms != 0 || r->quota_answers != 0)) ||
	    ((r->flags & EB_REPORT_QUOTA_SPENT) && r->starving_ms == 0))
		return -EINVAL;
	if (r->id == 0 || !roles_valid(r->roles) || r->health < 0 ||
	    r->health >= _EB_SOURCE_HEALTH_MAX || (r->health == EB_SOURCE_NONE) == source ||
	    (r->flags & ~EB_REPORT_SESSION_FLAGS) != 0 ||
	    ((r->flags & EB_REPORT_ASLEEP) && !source) ||
	    ((r->flags & EB_REPORT_UPSTREAM) &&
	     (r->roles != EB_ROLE_SOURCE || r->id != EB_REPORT_UPSTREAM_ID)) ||
	    ((r->flags & EB_REPORT_WAITING) && !(r->roles & EB_ROLE_SINK)) ||
	    (!(r->flags & EB_REPORT_WAITING) && r->waiting_ms != 0) ||
	    (!(r->flags & EB_REPORT_QUOTA) && r->quota_left_bits != 0) ||
	    r->claim_mbits_per_byte > CLAIM_MBITS_MAX || !bits_fit(r->bits_in, r->bytes_in))
		return -EINVAL;
	if (text_size(r->user, 1, EB_KIND_MAX, &user) < 0 ||
	    text_size(r->kind, 0, EB_KIND_MAX, &kind) < 0 ||
	    text_size(r->peer, 1, EB_PEER_MAX, &peer) < 0)
		return -EINVAL;
	*ret_size = SESSION_ROW_FIXED + user + kind + peer + (version >= 1 ? SESSION_ROW_V1 : 0) +
	            (version >= 2 ? SESSION_ROW_V2 : 0);
	return 0;
}

static int user_validate(const struct eb_report_user *r, uint8_t version, size_t *ret_size)
{
	size_t name;

	if (version > EB_REPORT_VERSION || (version == 0 && r->empty_answers != 0) ||
	    (version < 2 && (r->quota_answers != 0 || r->max_sessions != 0)))
		return -EINVAL;
	/* A bucket holds at most an hour's worth. */
	if (r->id == 0 || !roles_valid(r->roles) || (r->flags & ~EB_REPORT_USER_QUOTA) != 0 ||
	    r->sources > r->sessions || r->sinks > r->sessions ||
	    !bits_fit(r->bits_in, r->bytes_in) ||
	    ((r->flags & EB_REPORT_USER_QUOTA)
	         ? r->quota_bits_per_hour == 0 || r->quota_left_bits > r->quota_bits_per_hour
	         : r->quota_bits_per_hour != 0 || r->quota_left_bits != 0))
		return -EINVAL;
	if (text_size(r->name, 1, EB_KIND_MAX, &name) < 0)
		return -EINVAL;
	*ret_size = USER_ROW_FIXED + name + (version >= 1 ? USER_ROW_V1 : 0) +
	            (version >= 2 ? USER_ROW_V2 : 0);
	return 0;
}

int eb_report_session_encode_version(const struct eb_report_session *row, uint8_t version,
                                     uint8_t *buf, size_t size)
{
	struct writer w;
	size_t n;
	int r;

	assert(row);
	assert(buf || size == 0);

	r = session_validate(row, version, &n);
	if (r < 0)
		return r;
	if (n > size)
		return -ENOBUFS;
	w = (struct writer){buf, n};
	put_be64(&w, row->id);
	put_u8(&w, row->roles);
	put_u8(&w, (uint8_t)row->health);
	put_u8(&w, row->flags);
	put_zero(&w, 1);
	put_be32(&w, row->claim_mbits_per_byte);
	put_be32(&w, row->connected_s);
	put_be32(&w, row->last_ms);
	put_be32(&w, row->waiting_ms);
	put_be64(&w, row->bytes_in);
	put_be64(&w, row->bits_in);
	put_be64(&w, row->bits_out);
	put_be64(&w, row->bytes_drbg);
	put_be64(&w, row->quota_left_bits);
	put_text(&w, row->user);
	put_text(&w, row->kind);
	put_text(&w, row->peer);
	if (version >= 1) {
		put_be64(&w, row->empty_answers);
		put_be32(&w, row->starving_ms);
	}
	if (version >= 2)
		put_be64(&w, row->quota_answers);
	assert(w.left == 0);
	return (int)n;
}

int eb_report_session_encode(const struct eb_report_session *row, uint8_t *buf, size_t size)
{
	return eb_report_session_encode_version(row, 0, buf, size);
}

int eb_report_user_encode_version(const struct eb_report_user *row, uint8_t version, uint8_t *buf,
                                  size_t size)
{
	struct writer w;
	size_t n;
	int r;

	assert(row);
	assert(buf || size == 0);

	r = user_validate(row, version, &n);
	if (r < 0)
		return r;
	if (n > size)
		return -ENOBUFS;
	w = (struct writer){buf, n};
	put_be64(&w, row->id);
	put_u8(&w, row->roles);
	put_u8(&w, row->flags);
	put_zero(&w, 2);
	put_be32(&w, row->sessions);
	put_be32(&w, row->sources);
	put_be32(&w, row->sinks);
	put_be64(&w, row->bytes_in);
	put_be64(&w, row->bits_in);
	put_be64(&w, row->bits_out);
	put_be64(&w, row->bytes_drbg);
	put_be64(&w, row->quota_bits_per_hour);
	put_be64(&w, row->quota_left_bits);
	put_text(&w, row->name);
	if (version >= 1)
		put_be64(&w, row->empty_answers);
	if (version >= 2) {
		put_be64(&w, row->quota_answers);
		put_be32(&w, row->max_sessions);
	}
	assert(w.left == 0);
	return (int)n;
}

int eb_report_user_encode(const struct eb_report_user *row, uint8_t *buf, size_t size)
{
	return eb_report_user_encode_version(row, 0, buf, size);
}

static int session_take(struct cursor *c, uint8_t version, struct eb_report_session *ret)
{
	struct eb_report_session row = {};
	uint8_t health;
	size_t n;
	int r;

	r = take_be64(c, &row.id);
	if (r >= 0)
		r = take_u8(c, &row.roles);
	if (r >= 0)
		r = take_u8(c, &health);
	if (r >= 0)
		r = take_u8(c, &row.flags);
	if (r >= 0)
		r = take_zero(c, 1);
	if (r >= 0)
		r = take_be32(c, &row.claim_mbits_per_byte);
	if (r >= 0)
		r = take_be32(c, &row.connected_s);
	if (r >= 0)
		r = take_be32(c, &row.last_ms);
	if (r >= 0)
		r = take_be32(c, &row.waiting_ms);
	if (r >= 0)
		r = take_be64(c, &row.bytes_in);
	if (r >= 0)
		r = take_be64(c, &row.bits_in);
	if (r >= 0)
		r = take_be64(c, &row.bits_out);
	if (r >= 0)
		r = take_be64(c, &row.bytes_drbg);
	if (r >= 0)
		r = take_be64(c, &row.quota_left_bits);
	if (r >= 0)
		r = take_text(c, EB_KIND_MAX, row.user);
	if (r >= 0)
		r = take_text(c, EB_KIND_MAX, row.kind);
	if (r >= 0)
		r = take_text(c, EB_PEER_MAX, row.peer);
	if (r >= 0 && version >= 1)
		r = take_be64(c, &row.empty_answers);
	if (r >= 0 && version >= 1)
		r = take_be32(c, &row.starving_ms);
	if (r >= 0 && version >= 2)
		r = take_be64(c, &row.quota_answers);
	if (r < 0)
		return r;
	/* Range-checked below; a u8 always fits the enum. */
	row.health = (enum eb_source_health)health;
	if (session_validate(&row, version, &n) < 0)
		return -EBADMSG;
	*ret = row;
	return 0;
}

static int user_take(struct cursor *c, uint8_t version, struct eb_report_user *ret)
{
	struct eb_report_user row = {};
	size_t n;
	int r;

	r = take_be64(c, &row.id);
	if (r >= 0)
		r = take_u8(c, &row.roles);
	if (r >= 0)
		r = take_u8(c, &row.flags);
	if (r >= 0)
		r = take_zero(c, 2);
	if (r >= 0)
		r = take_be32(c, &row.sessions);
	if (r >= 0)
		r = take_be32(c, &row.sources);
	if (r >= 0)
		r = take_be32(c, &row.sinks);
	if (r >= 0)
		r = take_be64(c, &row.bytes_in);
	if (r >= 0)
		r = take_be64(c, &row.bits_in);
	if (r >= 0)
		r = take_be64(c, &row.bits_out);
	if (r >= 0)
		r = take_be64(c, &row.bytes_drbg);
	if (r >= 0)
		r = take_be64(c, &row.quota_bits_per_hour);
	if (r >= 0)
		r = take_be64(c, &row.quota_left_bits);
	if (r >= 0)
		r = take_text(c, EB_KIND_MAX, row.name);
	if (r >= 0 && version >= 1)
		r = take_be64(c, &row.empty_answers);
	if (r >= 0 && version >= 2)
		r = take_be64(c, &row.quota_answers);
	if (r >= 0 && version >= 2)
		r = take_be32(c, &row.max_sessions);
	if (r < 0)
		return r;
	if (user_validate(&row, version, &n) < 0)
		return -EBADMSG;
	*ret = row;
	return 0;
}

/* Walks a page's rows: exactly count of them, filling rows_len, in increasing id order, and next
 * naming the last one when it is not 0. The ids let a client page on after a session closed
 * between two requests without seeing a row twice. */
static int rows_valid(const struct eb_msg_report *m)
{
	struct cursor c = {m->rows, m->rows_len};
	uint64_t last = 0;

	for (unsigned i = 0; i < m->count; i++) {
		uint64_t id;
		int r;

		if (m->table == EB_REPORT_SESSIONS) {
			struct eb_report_session row;

			r = session_take(&c, m->version, &row);
			id = row.id;
		} else if (m->table == EB_REPORT_HISTORY) {
			struct eb_report_history_row row;

			r = eb_report_history_take(&c, &row);
			id = r < 0 ? 0 : eb_report_history_id(&row);
		} else if (m->table == EB_REPORT_COUNTERS) {
			struct eb_report_counter row;

			r = eb_report_counter_take(&c, &row);
			id = r < 0 ? 0 : row.id;
		} else {
			struct eb_report_user row;

			r = user_take(&c, m->version, &row);
			id = row.id;
		}
		if (r < 0 || id <= last)
			return -EINVAL;
		last = id;
	}
	if (c.left != 0 || (m->next != 0 && m->next != last))
		return -EINVAL;
	return 0;
}

int eb_report_msg_validate(const struct eb_msg *m, size_t *ret_size)
{
	switch (m->type) {
	case EB_MSG_REPORT_REQ:
		if (!table_valid(m->report_req.table, m->report_req.version))
			return -EINVAL;
		*ret_size = REPORT_REQ_SIZE;
		return 0;
	case EB_MSG_REPORT:
		if (!table_valid(m->report.table, m->report.version) ||
		    m->report.count > EB_REPORT_ROWS_MAX ||
		    m->report.rows_len > REPORT_ROWS_LEN_MAX ||
		    (m->report.rows_len > 0 && !m->report.rows))
			return -EINVAL;
		if (rows_valid(&m->report) < 0)
			return -EINVAL;
		*ret_size = REPORT_FIXED_SIZE + m->report.rows_len;
		return 0;
	case EB_MSG_HELLO:
	case EB_MSG_WELCOME:
	case EB_MSG_PUT:
	case EB_MSG_PUT_ACK:
	case EB_MSG_GET:
	case EB_MSG_DATA:
	case EB_MSG_EMPTY:
	case EB_MSG_SLEEP:
	case EB_MSG_WAKE:
	case EB_MSG_QUOTA:
	case EB_MSG_ERROR:
	case EB_MSG_STATUS_REQ:
	case EB_MSG_STATUS:
	case EB_MSG_ACTION_REQ:
	case EB_MSG_ACTION:
	case EB_MSG_STATE_REQ:
	case EB_MSG_STATE:
	case _EB_MSG_MAX:
	case _EB_MSG_INVALID:
		break;
	}
	return -EINVAL;
}

int eb_report_msg_decode(struct cursor *c, struct eb_msg *m)
{
	const uint8_t *rows;
	size_t n;
	int r;

	if (m->type == EB_MSG_REPORT_REQ) {
		r = take_u8(c, &m->report_req.table);
		if (r >= 0)
			r = take_u8(c, &m->report_req.version);
		if (r >= 0)
			r = take_zero(c, 2);
		if (r >= 0)
			r = take_be64(c, &m->report_req.after);
		return r;
	}
	assert(m->type == EB_MSG_REPORT);
	r = take_u8(c, &m->report.table);
	if (r >= 0)
		r = take_u8(c, &m->report.version);
	if (r >= 0)
		r = take_be16(c, &m->report.count);
	if (r >= 0)
		r = take_be64(c, &m->report.next);
	if (r < 0)
		return r;
	/* The rows are the rest; eb_msg_decode() has them checked, one by one. */
	n = c->left;
	r = take(c, n, &rows);
	if (r < 0)
		return r;
	m->report.rows = n > 0 ? rows : NULL;
	m->report.rows_len = (uint32_t)n;
	return 0;
}

void eb_report_msg_encode(struct writer *w, const struct eb_msg *m)
{
	if (m->type == EB_MSG_REPORT_REQ) {
		put_u8(w, m->report_req.table);
		put_u8(w, m->report_req.version);
		put_zero(w, 2);
		put_be64(w, m->report_req.after);
		return;
	}
	assert(m->type == EB_MSG_REPORT);
	put_u8(w, m->report.table);
	put_u8(w, m->report.version);
	put_be16(w, m->report.count);
	put_be64(w, m->report.next);
	put(w, m->report.rows, m->report.rows_len);
}

void eb_report_rows_init(struct eb_report_rows *it, const struct eb_msg_report *m)
{
	assert(it);
	assert(m);
	*it = (struct eb_report_rows){m->rows, m->rows_len, m->version};
}

int eb_report_next_session(struct eb_report_rows *it, struct eb_report_session *ret)
{
	struct cursor c = {it->p, it->left};
	int r;

	if (it->left == 0)
		return 0;
	r = session_take(&c, it->version, ret);
	if (r < 0)
		return -EBADMSG;
	*it = (struct eb_report_rows){c.p, c.left, it->version};
	return 1;
}

int eb_report_next_user(struct eb_report_rows *it, struct eb_report_user *ret)
{
	struct cursor c = {it->p, it->left};
	int r;

	if (it->left == 0)
		return 0;
	r = user_take(&c, it->version, ret);
	if (r < 0)
		return -EBADMSG;
	*it = (struct eb_report_rows){c.p, c.left, it->version};
	return 1;
}

enum eb_source_health eb_source_health(const struct eb_source_seen *s)
{
	if (!s->source)
		return EB_SOURCE_NONE;
	/* Asleep, a source is quiet because it was told to be. */
	if (!s->asleep && s->idle_ms >= EB_SOURCE_SILENT_MS)
		return EB_SOURCE_SILENT;
	if (s->bytes_in == 0)
		return EB_SOURCE_NEW;
	if (s->put_stuck)
		return EB_SOURCE_STUCK;
	return s->put_claimed ? EB_SOURCE_OK : EB_SOURCE_NO_CLAIM;
}

static const char *const table_names[_EB_REPORT_TABLE_MAX] = {
    [EB_REPORT_SESSIONS] = "sessions",
    [EB_REPORT_USERS] = "users",
    [EB_REPORT_HISTORY] = "history",
    [EB_REPORT_COUNTERS] = "counters",
};

EB_DEFINE_STRING_TABLE_LOOKUP(eb_report_table_to_string, enum eb_report_table, table_names)

static const char *const health_names[_EB_SOURCE_HEALTH_MAX] = {
    [EB_SOURCE_NONE] = "-",      [EB_SOURCE_NEW] = "new",
    [EB_SOURCE_OK] = "ok",       [EB_SOURCE_NO_CLAIM] = "no-claim",
    [EB_SOURCE_STUCK] = "stuck", [EB_SOURCE_SILENT] = "silent",
};

EB_DEFINE_STRING_TABLE_LOOKUP(eb_source_health_to_string, enum eb_source_health, health_names)
