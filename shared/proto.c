/* SPDX-License-Identifier: MIT */
/* The wire protocol codec: frame headers and the payload of every message, both ways.
 * check-source: allow long-file (one codec: validate, decode, encode side by side) */
#include "proto.h"

#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "macro.h"
#include "proto-internal.h"

/*
 * Payload layouts (big-endian; docs/protocol.md has the tables). Every payload is consumed
 * exactly: a byte left over is as much an error as a byte missing, so one message has one
 * encoding and the fuzzer can check that decode(encode(m)) reproduces the input bytes.
 *
 *   HELLO      u16 version, u8 roles, u8 reserved, u32 claim_mbits_per_byte, u16 len, kind,
 *              and from a chained broker only: u8 n (1..EB_CHAIN_MAX), n x u64 broker id
 *   WELCOME    u16 version, u8 roles, u8 reserved, u32 max_data, u16 len, user
 *   PUT        u32 credit_bits, u32 len, data
 *   PUT_ACK    u32 credited_bits, u32 accepted_bytes
 *   GET        u32 bits, u8 mode, u8 reserved[3]
 *   DATA       u32 bits, u32 len, data
 *   EMPTY, SLEEP, QUOTA   u32 retry_ms
 *   WAKE       (empty)
 *   STATUS_REQ (empty: version 0), or u8 version (1), u8 reserved[3]
 *   ERROR      u16 code, u16 len, text
 *   STATUS     u64 pool_bits, u64 capacity_bits, u64 bits_in, u64 bits_out, u64 bytes_drbg,
 *              u32 sources, u32 sinks, u32 uptime_s; version 1 adds u64 carried_bits,
 *              u64 dropped_bits. The length says which: a client knows what it asked for.
 *   REPORT_REQ, REPORT    report.c
 *   ACTION_REQ, ACTION, STATE_REQ, STATE    proto-admin.c
 */
#define HELLO_FIXED_SIZE   10
#define WELCOME_FIXED_SIZE 10
#define PUT_FIXED_SIZE     8
#define PUT_ACK_SIZE       8
#define GET_SIZE           8
#define DATA_FIXED_SIZE    8
#define RETRY_SIZE         4
#define ERROR_FIXED_SIZE   4
#define STATUS_SIZE        52
#define STATUS_V1_SIZE     68
#define STATUS_REQ_V1_SIZE 4
#define STATUS_CARRIED_MAX 575 /* a block is 512 + 64 bits of input credit (pool.h) */

/*
 * Text from a peer ends up in the journal and on terminals, so it must be valid UTF-8 with no
 * control characters: no C0 (which includes NUL, so the C string we make of it is the whole
 * text), no DEL, no C1. Overlong forms, surrogates and code points past U+10FFFF are refused
 * as invalid UTF-8 (RFC 3629).
 */
bool eb_proto_text_valid(const uint8_t *p, size_t n)
{
	size_t i = 0;

	while (i < n) {
		uint8_t c = p[i];
		uint32_t cp, min;
		size_t k;

		if (c < 0x80) {
			if (c < 0x20 || c == 0x7f)
				return false;
			i++;
			continue;
		}

		if (c >= 0xc2 && c <= 0xdf) {
			k = 2;
			cp = c & 0x1f;
			min = 0x80;
		} else if (c >= 0xe0 && c <= 0xef) {
			k = 3;
			cp = c & 0x0f;
			min = 0x800;
		} else if (c >= 0xf0 && c <= 0xf4) {
			k = 4;
			cp = c & 0x07;
			min = 0x10000;
		} else
			return false;

		if (n - i < k)
			return false;
		for (size_t j = 1; j < k; j++) {
			if ((p[i + j] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (p[i + j] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		if (cp <= 0x9f) /* C1 controls, U+0080..U+009F */
			return false;
		i += k;
	}

	return true;
}

static bool type_valid(int t)
{
	return t > 0 && t < _EB_MSG_MAX;
}

int eb_proto_text_length(const char *s, size_t max, size_t *ret)
{
	size_t n = strnlen(s, max + 1);

	if (n > max || !eb_proto_text_valid((const uint8_t *)s, n))
		return -EINVAL;
	*ret = n;
	return 0;
}

static int hello_validate(const struct eb_msg_hello *h, size_t *ret_size)
{
	size_t n;
	int r;

	/* Any version above 0 is well-formed: whether it is supported is the session's call, so
	 * that the broker can answer EB_ERR_VERSION rather than EB_ERR_PROTOCOL. */
	if (h->version == 0 || !roles_valid(h->roles) || h->claim_mbits_per_byte > CLAIM_MBITS_MAX)
		return -EINVAL;
	r = eb_proto_text_length(h->kind, EB_KIND_MAX, &n);
	if (r < 0)
		return r;
	if (h->n_chain > EB_CHAIN_MAX)
		return -EINVAL;
	/* No chain is no field at all, so that each HELLO has one encoding. */
	*ret_size = HELLO_FIXED_SIZE + n + (h->n_chain > 0 ? 1 + 8 * h->n_chain : 0);
	return 0;
}

static int welcome_validate(const struct eb_msg_welcome *w, size_t *ret_size)
{
	size_t n;
	int r;

	if (w->version == 0 || !roles_valid(w->roles) || w->max_data == 0 ||
	    w->max_data > EB_DATA_MAX)
		return -EINVAL;
	r = eb_proto_text_length(w->user, EB_KIND_MAX, &n);
	if (r < 0)
		return r;
	if (n == 0) /* every session has a user, or it would have been refused */
		return -EINVAL;
	*ret_size = WELCOME_FIXED_SIZE + n;
	return 0;
}

/* The broker's answers to an admin and their requests: STATUS here, the rest in report.c and
 * proto-admin.c. */
static int admin_validate(const struct eb_msg *m, size_t *ret_size)
{
	if (m->type == EB_MSG_STATUS_REQ) {
		/* Version 0 is the empty payload alone, as before versions existed. */
		if (m->status_req.version > EB_STATUS_VERSION)
			return -EINVAL;
		*ret_size = m->status_req.version == 0 ? 0 : STATUS_REQ_V1_SIZE;
		return 0;
	}
	if (m->type == EB_MSG_STATUS) {
		/* The broker never holds more than its capacity; a status that says otherwise is
		 * from a broker that is broken, and better refused than shown. */
		if (m->status.pool_bits > m->status.capacity_bits)
			return -EINVAL;
		/* One encoding: version 0 has no room for the later fields. Carried credit is short
		 * of a block. (Dropped credit is not bounded by bits_in: a seed file conditioned
		 * at start drops some that bits_in does not count.) */
		if (m->status.version == 0) {
			if (m->status.carried_bits != 0 || m->status.dropped_bits != 0)
				return -EINVAL;
			*ret_size = STATUS_SIZE;
			return 0;
		}
		if (m->status.version > EB_STATUS_VERSION ||
		    m->status.carried_bits > STATUS_CARRIED_MAX)
			return -EINVAL;
		*ret_size = STATUS_V1_SIZE;
		return 0;
	}
	if (m->type == EB_MSG_REPORT_REQ || m->type == EB_MSG_REPORT)
		return eb_report_msg_validate(m, ret_size);
	return eb_admin_msg_validate(m, ret_size);
}

/*
 * The one place the rules for field values live: encode refuses to send what decode would
 * refuse to take. Returns the payload size of msg, or -EINVAL.
 */
static int msg_validate(const struct eb_msg *m, size_t *ret_size)
{
	size_t n, size;
	int r;

	if (!type_valid(m->type))
		return -EINVAL;

	switch (m->type) {
	case EB_MSG_HELLO:
		r = hello_validate(&m->hello, &size);
		if (r < 0)
			return r;
		break;
	case EB_MSG_WELCOME:
		r = welcome_validate(&m->welcome, &size);
		if (r < 0)
			return r;
		break;
	case EB_MSG_PUT:
		if (m->put.len == 0 || m->put.len > EB_DATA_MAX || !m->put.data ||
		    m->put.credit_bits > 8 * (uint64_t)m->put.len)
			return -EINVAL;
		size = PUT_FIXED_SIZE + m->put.len;
		break;
	case EB_MSG_PUT_ACK:
		if (m->put_ack.accepted_bytes > EB_DATA_MAX ||
		    m->put_ack.credited_bits > 8 * (uint64_t)m->put_ack.accepted_bytes)
			return -EINVAL;
		size = PUT_ACK_SIZE;
		break;
	case EB_MSG_GET:
		if (m->get.bits < 8 || m->get.bits > EB_DATA_MAX * 8 || m->get.bits % 8 != 0 ||
		    m->get.mode < 0 || m->get.mode >= _EB_GET_MODE_MAX)
			return -EINVAL;
		size = GET_SIZE;
		break;
	case EB_MSG_DATA:
		if (m->data.len > EB_DATA_MAX || (m->data.len > 0 && !m->data.data) ||
		    m->data.bits > 8 * (uint64_t)m->data.len)
			return -EINVAL;
		size = DATA_FIXED_SIZE + m->data.len;
		break;
	case EB_MSG_EMPTY:
	case EB_MSG_SLEEP:
	case EB_MSG_QUOTA:
		size = RETRY_SIZE;
		break;
	case EB_MSG_WAKE:
		size = 0;
		break;
	case EB_MSG_ERROR:
		if (m->error.code <= 0 || m->error.code >= _EB_ERR_MAX)
			return -EINVAL;
		r = eb_proto_text_length(m->error.text, EB_TEXT_MAX, &n);
		if (r < 0)
			return r;
		size = ERROR_FIXED_SIZE + n;
		break;
	case EB_MSG_STATUS_REQ:
	case EB_MSG_STATUS:
	case EB_MSG_REPORT_REQ:
	case EB_MSG_REPORT:
	case EB_MSG_ACTION_REQ:
	case EB_MSG_ACTION:
	case EB_MSG_STATE_REQ:
	case EB_MSG_STATE:
		r = admin_validate(m, &size);
		if (r < 0)
			return r;
		break;
	case _EB_MSG_MAX:
	case _EB_MSG_INVALID:
		return -EINVAL;
	}

	assert(size <= EB_FRAME_PAYLOAD_MAX);
	if (ret_size)
		*ret_size = size;
	return 0;
}

int eb_frame_header_parse(const uint8_t *buf, size_t len, struct eb_frame *ret)
{
	struct cursor c = {buf, len};
	uint8_t type, flags;
	uint16_t reserved;
	uint32_t length;
	int r;

	assert(buf || len == 0);
	assert(ret);

	if (len < EB_FRAME_HEADER_SIZE)
		return -EAGAIN;

	r = take_u8(&c, &type);
	if (r >= 0)
		r = take_u8(&c, &flags);
	if (r >= 0)
		r = take_be16(&c, &reserved);
	if (r >= 0)
		r = take_be32(&c, &length);
	assert(r >= 0); /* the header is there, we checked */

	if (!type_valid(type) || flags != 0 || reserved != 0)
		return -EBADMSG;
	/* Refuse an oversized frame from its header alone, before anyone buffers its payload. */
	if (length > EB_FRAME_PAYLOAD_MAX)
		return -EMSGSIZE;

	*ret = (struct eb_frame){
	    .type = type,
	    .flags = flags,
	    .length = length,
	};
	return 0;
}

int eb_frame_parse(const uint8_t *buf, size_t len, struct eb_frame *ret, size_t *ret_size)
{
	struct eb_frame f;
	int r;

	assert(ret_size);

	r = eb_frame_header_parse(buf, len, &f);
	if (r < 0)
		return r;
	if (len - EB_FRAME_HEADER_SIZE < f.length)
		return -EAGAIN;
	f.payload = buf + EB_FRAME_HEADER_SIZE;
	*ret = f;
	*ret_size = EB_FRAME_HEADER_SIZE + (size_t)f.length;
	return 0;
}

void eb_frame_header_write(uint8_t *buf, enum eb_msg_type type, uint32_t length)
{
	struct writer w = {buf, EB_FRAME_HEADER_SIZE};

	assert(buf);
	assert(type_valid(type));
	assert(length <= EB_FRAME_PAYLOAD_MAX);

	put_u8(&w, (uint8_t)type);
	put_u8(&w, 0); /* flags */
	put_be16(&w, 0);
	put_be32(&w, length);
}

static int hello_decode(struct cursor *c, struct eb_msg_hello *h)
{
	int r;

	r = take_be16(c, &h->version);
	if (r >= 0)
		r = take_u8(c, &h->roles);
	if (r >= 0)
		r = take_zero(c, 1);
	if (r >= 0)
		r = take_be32(c, &h->claim_mbits_per_byte);
	if (r >= 0)
		r = take_text(c, EB_KIND_MAX, h->kind);
	/* The chain is there or not at all; when there, it names at least one broker. */
	if (r >= 0 && c->left > 0) {
		r = take_u8(c, &h->n_chain);
		if (r >= 0 && (h->n_chain == 0 || h->n_chain > EB_CHAIN_MAX))
			r = -EBADMSG;
		for (unsigned i = 0; r >= 0 && i < h->n_chain; i++)
			r = take_be64(c, &h->chain[i]);
	}
	return r;
}

static int welcome_decode(struct cursor *c, struct eb_msg_welcome *w)
{
	int r;

	r = take_be16(c, &w->version);
	if (r >= 0)
		r = take_u8(c, &w->roles);
	if (r >= 0)
		r = take_zero(c, 1);
	if (r >= 0)
		r = take_be32(c, &w->max_data);
	if (r >= 0)
		r = take_text(c, EB_KIND_MAX, w->user);
	return r;
}

/* PUT and DATA alike: bits, a length, and that many bytes. */
static int bytes_decode(struct cursor *c, uint32_t *ret_bits, uint32_t *ret_len,
                        const uint8_t **ret_data)
{
	int r;

	r = take_be32(c, ret_bits);
	if (r >= 0)
		r = take_be32(c, ret_len);
	if (r >= 0)
		r = take(c, *ret_len, ret_data);
	return r;
}

static int get_decode(struct cursor *c, struct eb_msg_get *g)
{
	uint8_t mode;
	int r;

	r = take_be32(c, &g->bits);
	if (r >= 0)
		r = take_u8(c, &mode);
	if (r < 0)
		return r;
	/* Range-checked in msg_validate(); a u8 always fits the enum. */
	g->mode = (enum eb_get_mode)mode;
	return take_zero(c, 3);
}

static int status_decode(struct cursor *c, struct eb_msg_status *st)
{
	int r;

	r = take_be64(c, &st->pool_bits);
	if (r >= 0)
		r = take_be64(c, &st->capacity_bits);
	if (r >= 0)
		r = take_be64(c, &st->bits_in);
	if (r >= 0)
		r = take_be64(c, &st->bits_out);
	if (r >= 0)
		r = take_be64(c, &st->bytes_drbg);
	if (r >= 0)
		r = take_be32(c, &st->sources);
	if (r >= 0)
		r = take_be32(c, &st->sinks);
	if (r >= 0)
		r = take_be32(c, &st->uptime_s);
	if (r < 0 || c->left == 0)
		return r;
	st->version = 1;
	r = take_be64(c, &st->carried_bits);
	if (r >= 0)
		r = take_be64(c, &st->dropped_bits);
	return r;
}

static int status_req_decode(struct cursor *c, struct eb_msg_status_req *q)
{
	int r;

	if (c->left == 0)
		return 0;
	r = take_u8(c, &q->version);
	if (r >= 0 && q->version == 0)
		r = -EBADMSG; /* version 0 is the empty payload */
	if (r >= 0)
		r = take_zero(c, 3);
	return r;
}

/* The same split for decoding. */
static int admin_decode(struct cursor *c, struct eb_msg *m)
{
	if (m->type == EB_MSG_STATUS_REQ)
		return status_req_decode(c, &m->status_req);
	if (m->type == EB_MSG_STATUS)
		return status_decode(c, &m->status);
	if (m->type == EB_MSG_REPORT_REQ || m->type == EB_MSG_REPORT)
		return eb_report_msg_decode(c, m);
	return eb_admin_msg_decode(c, m);
}

int eb_msg_decode(const struct eb_frame *frame, struct eb_msg *ret)
{
	struct cursor c;
	struct eb_msg m;
	uint16_t u16;
	uint32_t u32;
	int r;

	assert(frame);
	assert(ret);
	assert(frame->payload || frame->length == 0);

	/* The frame may not come from eb_frame_parse(), so check what it would have. */
	if (!type_valid(frame->type) || frame->flags != 0 || frame->length > EB_FRAME_PAYLOAD_MAX)
		return -EBADMSG;

	c = (struct cursor){frame->payload, frame->length};
	m = (struct eb_msg){.type = frame->type};

	switch (frame->type) {
	case EB_MSG_HELLO:
		r = hello_decode(&c, &m.hello);
		break;
	case EB_MSG_WELCOME:
		r = welcome_decode(&c, &m.welcome);
		break;
	case EB_MSG_PUT:
		r = bytes_decode(&c, &m.put.credit_bits, &m.put.len, &m.put.data);
		break;
	case EB_MSG_PUT_ACK:
		r = take_be32(&c, &m.put_ack.credited_bits);
		if (r >= 0)
			r = take_be32(&c, &m.put_ack.accepted_bytes);
		break;
	case EB_MSG_GET:
		r = get_decode(&c, &m.get);
		break;
	case EB_MSG_DATA:
		r = bytes_decode(&c, &m.data.bits, &m.data.len, &m.data.data);
		break;
	case EB_MSG_EMPTY:
	case EB_MSG_SLEEP:
	case EB_MSG_QUOTA:
		r = take_be32(&c, &u32);
		if (r >= 0)
			m.retry.retry_ms = u32;
		break;
	case EB_MSG_WAKE:
		r = 0;
		break;
	case EB_MSG_ERROR:
		r = take_be16(&c, &u16);
		if (r >= 0) {
			m.error.code = (enum eb_error_code)u16;
			r = take_text(&c, EB_TEXT_MAX, m.error.text);
		}
		break;
	case EB_MSG_STATUS_REQ:
	case EB_MSG_STATUS:
	case EB_MSG_REPORT_REQ:
	case EB_MSG_REPORT:
	case EB_MSG_ACTION_REQ:
	case EB_MSG_ACTION:
	case EB_MSG_STATE_REQ:
	case EB_MSG_STATE:
		r = admin_decode(&c, &m);
		break;
	case _EB_MSG_MAX:
	case _EB_MSG_INVALID:
		return -EBADMSG;
	}
	if (r < 0)
		return r;
	if (c.left != 0)
		return -EBADMSG;

	/* A field out of range is the peer's fault here, not the caller's. */
	if (msg_validate(&m, NULL) < 0)
		return -EBADMSG;

	*ret = m;
	return 0;
}

static void hello_encode(struct writer *w, const struct eb_msg_hello *h)
{
	put_be16(w, h->version);
	put_u8(w, h->roles);
	put_zero(w, 1);
	put_be32(w, h->claim_mbits_per_byte);
	put_text(w, h->kind);
	if (h->n_chain > 0) {
		put_u8(w, h->n_chain);
		for (unsigned i = 0; i < h->n_chain; i++)
			put_be64(w, h->chain[i]);
	}
}

/* STATUS_REQ and STATUS, in the version's layout. */
static void status_encode(struct writer *w, const struct eb_msg *m)
{
	const struct eb_msg_status *st = &m->status;

	if (m->type == EB_MSG_STATUS_REQ) {
		if (m->status_req.version == 0)
			return;
		put_u8(w, m->status_req.version);
		put_zero(w, 3);
		return;
	}
	put_be64(w, st->pool_bits);
	put_be64(w, st->capacity_bits);
	put_be64(w, st->bits_in);
	put_be64(w, st->bits_out);
	put_be64(w, st->bytes_drbg);
	put_be32(w, st->sources);
	put_be32(w, st->sinks);
	put_be32(w, st->uptime_s);
	if (st->version == 0)
		return;
	put_be64(w, st->carried_bits);
	put_be64(w, st->dropped_bits);
}

int eb_msg_encode(const struct eb_msg *msg, uint8_t *buf, size_t size)
{
	struct writer w;
	size_t payload;
	int r;

	assert(msg);
	assert(buf || size == 0);

	r = msg_validate(msg, &payload);
	if (r < 0)
		return r;
	if (size < EB_FRAME_HEADER_SIZE + payload)
		return -ENOBUFS;

	eb_frame_header_write(buf, msg->type, (uint32_t)payload);
	w = (struct writer){buf + EB_FRAME_HEADER_SIZE, payload};

	switch (msg->type) {
	case EB_MSG_HELLO:
		hello_encode(&w, &msg->hello);
		break;
	case EB_MSG_WELCOME:
		put_be16(&w, msg->welcome.version);
		put_u8(&w, msg->welcome.roles);
		put_zero(&w, 1);
		put_be32(&w, msg->welcome.max_data);
		put_text(&w, msg->welcome.user);
		break;
	case EB_MSG_PUT:
		put_be32(&w, msg->put.credit_bits);
		put_be32(&w, msg->put.len);
		put(&w, msg->put.data, msg->put.len);
		break;
	case EB_MSG_PUT_ACK:
		put_be32(&w, msg->put_ack.credited_bits);
		put_be32(&w, msg->put_ack.accepted_bytes);
		break;
	case EB_MSG_GET:
		put_be32(&w, msg->get.bits);
		put_u8(&w, (uint8_t)msg->get.mode);
		put_zero(&w, 3);
		break;
	case EB_MSG_DATA:
		put_be32(&w, msg->data.bits);
		put_be32(&w, msg->data.len);
		put(&w, msg->data.data, msg->data.len);
		break;
	case EB_MSG_EMPTY:
	case EB_MSG_SLEEP:
	case EB_MSG_QUOTA:
		put_be32(&w, msg->retry.retry_ms);
		break;
	case EB_MSG_WAKE:
		break;
	case EB_MSG_ERROR:
		put_be16(&w, (uint16_t)msg->error.code);
		put_text(&w, msg->error.text);
		break;
	case EB_MSG_STATUS_REQ:
	case EB_MSG_STATUS:
		status_encode(&w, msg);
		break;
	case EB_MSG_REPORT_REQ:
	case EB_MSG_REPORT:
		eb_report_msg_encode(&w, msg);
		break;
	case EB_MSG_ACTION_REQ:
	case EB_MSG_ACTION:
	case EB_MSG_STATE_REQ:
	case EB_MSG_STATE:
		eb_admin_msg_encode(&w, msg);
		break;
	case _EB_MSG_MAX:
	case _EB_MSG_INVALID:
		assert(!"msg_validate() let an invalid type through");
		return -EINVAL;
	}
	assert(w.left == 0);

	return (int)(EB_FRAME_HEADER_SIZE + payload);
}

static const char *const msg_type_table[_EB_MSG_MAX] = {
    [EB_MSG_HELLO] = "HELLO",   [EB_MSG_WELCOME] = "WELCOME",
    [EB_MSG_PUT] = "PUT",       [EB_MSG_PUT_ACK] = "PUT_ACK",
    [EB_MSG_GET] = "GET",       [EB_MSG_DATA] = "DATA",
    [EB_MSG_EMPTY] = "EMPTY",   [EB_MSG_SLEEP] = "SLEEP",
    [EB_MSG_WAKE] = "WAKE",     [EB_MSG_QUOTA] = "QUOTA",
    [EB_MSG_ERROR] = "ERROR",   [EB_MSG_STATUS_REQ] = "STATUS_REQ",
    [EB_MSG_STATUS] = "STATUS", [EB_MSG_REPORT_REQ] = "REPORT_REQ",
    [EB_MSG_REPORT] = "REPORT", [EB_MSG_ACTION_REQ] = "ACTION_REQ",
    [EB_MSG_ACTION] = "ACTION", [EB_MSG_STATE_REQ] = "STATE_REQ",
    [EB_MSG_STATE] = "STATE",
};

/* NULL for a value outside the enum, as systemd's *_to_string() do. */
EB_DEFINE_STRING_TABLE_LOOKUP(eb_msg_type_to_string, enum eb_msg_type, msg_type_table)

static const char *const error_code_table[_EB_ERR_MAX] = {
    [EB_ERR_PROTOCOL] = "protocol",   [EB_ERR_VERSION] = "version",
    [EB_ERR_AUTH] = "auth",           [EB_ERR_FORBIDDEN] = "forbidden",
    [EB_ERR_TOO_LARGE] = "too-large", [EB_ERR_INTERNAL] = "internal",
    [EB_ERR_SHUTDOWN] = "shutdown",   [EB_ERR_BUSY] = "busy",
};

EB_DEFINE_STRING_TABLE_LOOKUP(eb_error_code_to_string, enum eb_error_code, error_code_table)

/* Appends s to buf, truncating, always leaving it terminated. */
static void append(char *buf, size_t size, size_t *pos, const char *s)
{
	size_t n = strlen(s);

	if (*pos + 1 >= size)
		return;
	n = MIN(n, size - 1 - *pos);
	memcpy(buf + *pos, s, n);
	*pos += n;
	buf[*pos] = '\0';
}

const char *eb_roles_to_string(unsigned roles, char *buf, size_t size)
{
	static const struct {
		unsigned bit;
		const char *name;
	} names[] = {
	    {EB_ROLE_SOURCE, "source"},
	    {EB_ROLE_SINK, "sink"},
	    {EB_ROLE_ADMIN, "admin"},
	};
	size_t pos = 0;
	bool first = true;

	assert(buf || size == 0);

	if (size == 0)
		return buf;
	buf[0] = '\0';

	for (size_t i = 0; i < ELEMENTSOF(names); i++) {
		if (!(roles & names[i].bit))
			continue;
		if (!first)
			append(buf, size, &pos, ",");
		append(buf, size, &pos, names[i].name);
		first = false;
	}

	/* Bits we have no name for are shown, not hidden, so a bad mask is visible in a log. */
	if (roles & ~(unsigned)EB_ROLE_ALL) {
		char tmp[2 + 2 * sizeof(unsigned) + 1];

		(void)snprintf(tmp, sizeof(tmp), "0x%x", roles & ~(unsigned)EB_ROLE_ALL);
		if (!first)
			append(buf, size, &pos, ",");
		append(buf, size, &pos, tmp);
	}

	return buf;
}
