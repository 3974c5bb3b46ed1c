/* SPDX-License-Identifier: MIT */
/* Unit tests for shared/proto.c: round trips, truncation, limits, field ranges, golden bytes. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "macro.h"
#include "proto.h"
#include "report.h"

static const uint8_t sample_bytes[] = {0xde, 0xad, 0xbe, 0xef, 0x00, 0x01, 0x02, 0x03, 0xff};

/* A page of one user row, for the sample REPORT (tests/test-report.c tests the rows). */
static uint32_t sample_rows(uint8_t *buf, size_t size)
{
	struct eb_report_user row = {.id = 2,
	                             .roles = EB_ROLE_SINK,
	                             .sessions = 1,
	                             .sinks = 1,
	                             .bits_out = 4096,
	                             .name = "vm1"};
	int r = eb_report_user_encode(&row, buf, size);

	assert_true(r > 0);
	return (uint32_t)r;
}

/* One valid message of every type; index i holds type i + 1. */
static struct eb_msg sample(enum eb_msg_type t)
{
	static uint8_t rows[EB_REPORT_USER_ROW_MAX];
	struct eb_msg m = {.type = t};

	switch (t) {
	case EB_MSG_HELLO:
		m.hello = (struct eb_msg_hello){.version = EB_PROTO_VERSION,
		                                .roles = EB_ROLE_SOURCE,
		                                .claim_mbits_per_byte = 7500,
		                                .kind = "stream /dev/hwrng"};
		break;
	case EB_MSG_WELCOME:
		m.welcome = (struct eb_msg_welcome){.version = EB_PROTO_VERSION,
		                                    .roles = EB_ROLE_SOURCE | EB_ROLE_SINK,
		                                    .max_data = EB_DATA_MAX,
		                                    .user = "alice"};
		break;
	case EB_MSG_PUT:
		m.put = (struct eb_msg_put){
		    .credit_bits = 60, .data = sample_bytes, .len = sizeof(sample_bytes)};
		break;
	case EB_MSG_PUT_ACK:
		m.put_ack = (struct eb_msg_put_ack){.credited_bits = 60, .accepted_bytes = 9};
		break;
	case EB_MSG_GET:
		m.get = (struct eb_msg_get){.bits = 256, .mode = EB_GET_FULL};
		break;
	case EB_MSG_DATA:
		m.data = (struct eb_msg_data){
		    .bits = 72, .data = sample_bytes, .len = sizeof(sample_bytes)};
		break;
	case EB_MSG_EMPTY:
		m.retry.retry_ms = 250;
		break;
	case EB_MSG_SLEEP:
		m.retry.retry_ms = 60000;
		break;
	case EB_MSG_QUOTA:
		m.retry.retry_ms = 0x01020304;
		break;
	case EB_MSG_WAKE:
	case EB_MSG_STATUS_REQ:
		break;
	case EB_MSG_ERROR:
		m.error.code = EB_ERR_FORBIDDEN;
		(void)snprintf(m.error.text, sizeof(m.error.text), "%s",
		               "role sink not granted to \xc3\xa9ve"); /* UTF-8 "é" */
		break;
	case EB_MSG_STATUS:
		m.status = (struct eb_msg_status){.pool_bits = 4096,
		                                  .capacity_bits = 1048576,
		                                  .bits_in = 0x0102030405060708ULL,
		                                  .bits_out = 1,
		                                  .bytes_drbg = UINT64_MAX,
		                                  .sources = 3,
		                                  .sinks = 4,
		                                  .uptime_s = 86400};
		break;
	case EB_MSG_REPORT_REQ:
		m.report_req = (struct eb_msg_report_req){.table = EB_REPORT_USERS, .after = 1};
		break;
	case EB_MSG_REPORT:
		m.report = (struct eb_msg_report){.table = EB_REPORT_USERS,
		                                  .count = 1,
		                                  .next = 2,
		                                  .rows = rows,
		                                  .rows_len = sample_rows(rows, sizeof(rows))};
		break;
	case EB_MSG_ACTION_REQ:
		m.action_req = (struct eb_msg_action_req){.action = EB_ACTION_DISCONNECT_USER,
		                                          .user = "guest-07"};
		break;
	case EB_MSG_ACTION:
		m.action = (struct eb_msg_action){.action = EB_ACTION_DISCONNECT,
		                                  .result = EB_ACTION_LIMITED,
		                                  .retry_ms = 4000,
		                                  .text = "too many actions"};
		break;
	case EB_MSG_STATE_REQ:
		break;
	case EB_MSG_STATE:
		m.state = (struct eb_msg_state){.flags = EB_STATE_DRAINED | EB_STATE_UPSTREAM,
		                                .upstream = EB_UPSTREAM_FAILING,
		                                .reloads = 2,
		                                .reload_failures = 1,
		                                .config_loaded_ms = 1700000000000,
		                                .last_reload_ms = 1700000001000,
		                                .drained_ms = 1700000002000,
		                                .upstream_since_ms = 1700000003000,
		                                .upstream_data_ms = 0,
		                                .drained_by = "ops",
		                                .reload_text = "users added: g1",
		                                .upstream_broker = "tcp://site:55225",
		                                .upstream_reason = "Connection refused"};
		break;
	case _EB_MSG_MAX:
	case _EB_MSG_INVALID:
		fail();
	}
	return m;
}

static void assert_msg_equal(const struct eb_msg *a, const struct eb_msg *b)
{
	assert_int_equal(a->type, b->type);
	switch (a->type) {
	case EB_MSG_HELLO:
		assert_int_equal(a->hello.version, b->hello.version);
		assert_int_equal(a->hello.roles, b->hello.roles);
		assert_int_equal(a->hello.claim_mbits_per_byte, b->hello.claim_mbits_per_byte);
		assert_string_equal(a->hello.kind, b->hello.kind);
		assert_int_equal(a->hello.n_chain, b->hello.n_chain);
		for (unsigned i = 0; i < a->hello.n_chain; i++)
			assert_int_equal(a->hello.chain[i], b->hello.chain[i]);
		break;
	case EB_MSG_WELCOME:
		assert_int_equal(a->welcome.version, b->welcome.version);
		assert_int_equal(a->welcome.roles, b->welcome.roles);
		assert_int_equal(a->welcome.max_data, b->welcome.max_data);
		assert_string_equal(a->welcome.user, b->welcome.user);
		break;
	case EB_MSG_PUT:
		assert_int_equal(a->put.credit_bits, b->put.credit_bits);
		assert_int_equal(a->put.len, b->put.len);
		assert_memory_equal(a->put.data, b->put.data, a->put.len);
		break;
	case EB_MSG_PUT_ACK:
		assert_int_equal(a->put_ack.credited_bits, b->put_ack.credited_bits);
		assert_int_equal(a->put_ack.accepted_bytes, b->put_ack.accepted_bytes);
		break;
	case EB_MSG_GET:
		assert_int_equal(a->get.bits, b->get.bits);
		assert_int_equal(a->get.mode, b->get.mode);
		break;
	case EB_MSG_DATA:
		assert_int_equal(a->data.bits, b->data.bits);
		assert_int_equal(a->data.len, b->data.len);
		if (a->data.len > 0)
			assert_memory_equal(a->data.data, b->data.data, a->data.len);
		break;
	case EB_MSG_EMPTY:
	case EB_MSG_SLEEP:
	case EB_MSG_QUOTA:
		assert_int_equal(a->retry.retry_ms, b->retry.retry_ms);
		break;
	case EB_MSG_WAKE:
		break;
	case EB_MSG_STATUS_REQ:
		assert_int_equal(a->status_req.version, b->status_req.version);
		break;
	case EB_MSG_ERROR:
		assert_int_equal(a->error.code, b->error.code);
		assert_string_equal(a->error.text, b->error.text);
		break;
	case EB_MSG_STATUS:
		/* Field by field: the struct's tail padding is not part of the message. */
		assert_int_equal(a->status.pool_bits, b->status.pool_bits);
		assert_int_equal(a->status.capacity_bits, b->status.capacity_bits);
		assert_int_equal(a->status.bits_in, b->status.bits_in);
		assert_int_equal(a->status.bits_out, b->status.bits_out);
		assert_int_equal(a->status.bytes_drbg, b->status.bytes_drbg);
		assert_int_equal(a->status.sources, b->status.sources);
		assert_int_equal(a->status.sinks, b->status.sinks);
		assert_int_equal(a->status.uptime_s, b->status.uptime_s);
		assert_int_equal(a->status.version, b->status.version);
		assert_int_equal(a->status.carried_bits, b->status.carried_bits);
		assert_int_equal(a->status.dropped_bits, b->status.dropped_bits);
		break;
	case EB_MSG_REPORT_REQ:
		assert_int_equal(a->report_req.table, b->report_req.table);
		assert_int_equal(a->report_req.after, b->report_req.after);
		break;
	case EB_MSG_REPORT:
		assert_int_equal(a->report.table, b->report.table);
		assert_int_equal(a->report.count, b->report.count);
		assert_int_equal(a->report.next, b->report.next);
		assert_int_equal(a->report.rows_len, b->report.rows_len);
		if (a->report.rows_len > 0)
			assert_memory_equal(a->report.rows, b->report.rows, a->report.rows_len);
		break;
	case EB_MSG_ACTION_REQ:
		assert_int_equal(a->action_req.action, b->action_req.action);
		assert_int_equal(a->action_req.session, b->action_req.session);
		assert_string_equal(a->action_req.user, b->action_req.user);
		break;
	case EB_MSG_ACTION:
		assert_int_equal(a->action.action, b->action.action);
		assert_int_equal(a->action.result, b->action.result);
		assert_int_equal(a->action.sessions, b->action.sessions);
		assert_int_equal(a->action.retry_ms, b->action.retry_ms);
		assert_string_equal(a->action.text, b->action.text);
		break;
	case EB_MSG_STATE_REQ:
		break;
	case EB_MSG_STATE:
		assert_int_equal(a->state.flags, b->state.flags);
		assert_int_equal(a->state.upstream, b->state.upstream);
		assert_int_equal(a->state.reloads, b->state.reloads);
		assert_int_equal(a->state.reload_failures, b->state.reload_failures);
		assert_int_equal(a->state.config_loaded_ms, b->state.config_loaded_ms);
		assert_int_equal(a->state.last_reload_ms, b->state.last_reload_ms);
		assert_int_equal(a->state.drained_ms, b->state.drained_ms);
		assert_int_equal(a->state.upstream_since_ms, b->state.upstream_since_ms);
		assert_int_equal(a->state.upstream_data_ms, b->state.upstream_data_ms);
		assert_string_equal(a->state.drained_by, b->state.drained_by);
		assert_string_equal(a->state.reload_text, b->state.reload_text);
		assert_string_equal(a->state.upstream_broker, b->state.upstream_broker);
		assert_string_equal(a->state.upstream_reason, b->state.upstream_reason);
		break;
	case _EB_MSG_MAX:
	case _EB_MSG_INVALID:
		fail();
	}
}

/* Encodes m, parses the frame back and decodes it; returns the frame size. */
static size_t round_trip(const struct eb_msg *m, uint8_t *buf, size_t size)
{
	struct eb_frame f;
	struct eb_msg d;
	size_t n;
	int r;

	r = eb_msg_encode(m, buf, size);
	assert_true(r >= EB_FRAME_HEADER_SIZE);
	assert_int_equal(eb_frame_parse(buf, (size_t)r, &f, &n), 0);
	assert_int_equal(n, (size_t)r);
	assert_int_equal(f.type, m->type);
	assert_int_equal(f.flags, 0);
	assert_int_equal(f.length, (size_t)r - EB_FRAME_HEADER_SIZE);
	assert_ptr_equal(f.payload, buf + EB_FRAME_HEADER_SIZE);
	assert_int_equal(eb_msg_decode(&f, &d), 0);
	assert_msg_equal(m, &d);
	return n;
}

/* Decodes a payload of len bytes given directly, as a frame of type t. */
static int decode_payload(enum eb_msg_type t, const uint8_t *p, size_t len, struct eb_msg *ret)
{
	struct eb_frame f = {.type = t, .flags = 0, .length = (uint32_t)len, .payload = p};

	return eb_msg_decode(&f, ret);
}

/* The encoder refuses to send what the decoder would refuse to take. */
static void assert_encode_einval(const struct eb_msg *m)
{
	uint8_t buf[EB_FRAME_MAX];

	assert_int_equal(eb_msg_encode(m, buf, sizeof(buf)), -EINVAL);
}

static void assert_decode_ebadmsg(enum eb_msg_type t, const uint8_t *p, size_t len)
{
	struct eb_msg d = {.type = _EB_MSG_INVALID};

	assert_int_equal(decode_payload(t, p, len, &d), -EBADMSG);
	/* ret_* is written only on success. */
	assert_int_equal(d.type, _EB_MSG_INVALID);
}

static void test_round_trip_all(void **state)
{
	uint8_t buf[EB_FRAME_MAX];

	(void)state;
	for (int t = 1; t < _EB_MSG_MAX; t++) {
		struct eb_msg m = sample(t);

		round_trip(&m, buf, sizeof(buf));
	}
}

static void test_round_trip_limits(void **state)
{
	static uint8_t big[EB_DATA_MAX + 1];
	uint8_t buf[EB_FRAME_MAX];
	struct eb_msg m;
	size_t n;

	(void)state;
	memset(big, 0xa5, sizeof(big));

	m = (struct eb_msg){.type = EB_MSG_PUT};
	m.put =
	    (struct eb_msg_put){.credit_bits = EB_DATA_MAX * 8, .data = big, .len = EB_DATA_MAX};
	n = round_trip(&m, buf, sizeof(buf));
	assert_int_equal(n, EB_FRAME_HEADER_SIZE + 8 + EB_DATA_MAX);
	assert_true(n <= EB_FRAME_MAX);

	m = (struct eb_msg){.type = EB_MSG_DATA};
	m.data = (struct eb_msg_data){.bits = 0, .data = big, .len = EB_DATA_MAX};
	round_trip(&m, buf, sizeof(buf));
	m.data = (struct eb_msg_data){.bits = 0, .data = NULL, .len = 0};
	round_trip(&m, buf, sizeof(buf));

	m = (struct eb_msg){.type = EB_MSG_HELLO};
	m.hello = (struct eb_msg_hello){.version = 0xffff, .roles = EB_ROLE_ALL};
	memset(m.hello.kind, 'k', EB_KIND_MAX);
	round_trip(&m, buf, sizeof(buf));
	m.hello.kind[0] = '\0';
	m.hello.claim_mbits_per_byte = 8000;
	round_trip(&m, buf, sizeof(buf));

	m = (struct eb_msg){.type = EB_MSG_ERROR};
	m.error.code = EB_ERR_SHUTDOWN;
	memset(m.error.text, 't', EB_TEXT_MAX);
	round_trip(&m, buf, sizeof(buf));

	m = (struct eb_msg){.type = EB_MSG_GET};
	m.get = (struct eb_msg_get){.bits = 8, .mode = EB_GET_DRBG};
	round_trip(&m, buf, sizeof(buf));
	m.get.bits = EB_DATA_MAX * 8;
	round_trip(&m, buf, sizeof(buf));

	m = (struct eb_msg){.type = EB_MSG_STATUS};
	m.status.pool_bits = m.status.capacity_bits = UINT64_MAX;
	round_trip(&m, buf, sizeof(buf));
}

/* Every prefix of every frame is "need more" at the frame level, and every shorter payload, as
 * well as a payload with one byte more, is refused by the decoder. */
static void test_truncation(void **state)
{
	uint8_t buf[EB_FRAME_MAX], longer[EB_FRAME_MAX + 1];

	(void)state;
	for (int t = 1; t < _EB_MSG_MAX; t++) {
		struct eb_msg m = sample(t);
		struct eb_frame f;
		size_t total, n;
		int r;

		r = eb_msg_encode(&m, buf, sizeof(buf));
		assert_true(r > 0);
		total = (size_t)r;

		for (size_t len = 0; len < total; len++) {
			f.type = _EB_MSG_INVALID;
			assert_int_equal(eb_frame_parse(buf, len, &f, &n), -EAGAIN);
			assert_int_equal(f.type, _EB_MSG_INVALID);
		}

		for (size_t len = 0; len < total - EB_FRAME_HEADER_SIZE; len++)
			assert_decode_ebadmsg(t, buf + EB_FRAME_HEADER_SIZE, len);

		memcpy(longer, buf + EB_FRAME_HEADER_SIZE, total - EB_FRAME_HEADER_SIZE);
		longer[total - EB_FRAME_HEADER_SIZE] = 0;
		assert_decode_ebadmsg(t, longer, total - EB_FRAME_HEADER_SIZE + 1);
	}
}

/* Frames that arrive back to back parse one at a time, each knowing its own size. */
static void test_stream(void **state)
{
	uint8_t buf[4096];
	size_t total = 0, off = 0;
	int count = 0;

	(void)state;
	for (int t = 1; t < _EB_MSG_MAX; t++) {
		struct eb_msg m = sample(t);
		int r = eb_msg_encode(&m, buf + total, sizeof(buf) - total);

		assert_true(r > 0);
		total += (size_t)r;
	}

	while (off < total) {
		struct eb_frame f;
		struct eb_msg d, m;
		size_t n;

		assert_int_equal(eb_frame_parse(buf + off, total - off, &f, &n), 0);
		assert_int_equal(eb_msg_decode(&f, &d), 0);
		m = sample(count + 1);
		assert_msg_equal(&m, &d);
		off += n;
		count++;
	}
	assert_int_equal(off, total);
	assert_int_equal(count, _EB_MSG_MAX - 1);
}

/* The header alone: the length a reader must take next, and the same refusals as
 * eb_frame_parse() before a byte of the payload is there. */
static void test_frame_header_alone(void **state)
{
	uint8_t h[EB_FRAME_HEADER_SIZE];
	struct eb_frame f;

	(void)state;

	eb_frame_header_write(h, EB_MSG_DATA, 1234);
	assert_int_equal(eb_frame_header_parse(h, 7, &f), -EAGAIN);
	assert_int_equal(eb_frame_header_parse(h, sizeof(h), &f), 0);
	assert_int_equal(f.type, EB_MSG_DATA);
	assert_int_equal(f.length, 1234);
	assert_null(f.payload);

	eb_frame_header_write(h, EB_MSG_DATA, EB_FRAME_PAYLOAD_MAX);
	assert_int_equal(eb_frame_header_parse(h, sizeof(h), &f), 0);
	assert_int_equal(f.length, EB_FRAME_PAYLOAD_MAX);
	h[7]++; /* EB_FRAME_PAYLOAD_MAX + 1, which eb_frame_header_write() would not write */
	assert_int_equal(eb_frame_header_parse(h, sizeof(h), &f), -EMSGSIZE);

	eb_frame_header_write(h, EB_MSG_WAKE, 0);
	h[1] = 1;
	assert_int_equal(eb_frame_header_parse(h, sizeof(h), &f), -EBADMSG);
	h[1] = 0, h[0] = 0;
	assert_int_equal(eb_frame_header_parse(h, sizeof(h), &f), -EBADMSG);
}

static void test_frame_header(void **state)
{
	uint8_t h[EB_FRAME_HEADER_SIZE + 4] = {0};
	struct eb_frame f;
	size_t n;

	(void)state;

	eb_frame_header_write(h, EB_MSG_EMPTY, 4);
	assert_memory_equal(h, ((const uint8_t[]){7, 0, 0, 0, 0, 0, 0, 4}), 8);
	assert_int_equal(eb_frame_parse(h, sizeof(h), &f, &n), 0);
	assert_int_equal(n, 12);

	/* Oversized length: refused from the header alone, before the payload is there. */
	eb_frame_header_write(h, EB_MSG_PUT, 0);
	h[4] = 0x00, h[5] = 0x01, h[6] = 0x00, h[7] = 0x41; /* EB_FRAME_PAYLOAD_MAX + 1 */
	assert_int_equal(EB_FRAME_PAYLOAD_MAX + 1, 0x10041);
	assert_int_equal(eb_frame_parse(h, EB_FRAME_HEADER_SIZE, &f, &n), -EMSGSIZE);
	h[0] = EB_MSG_PUT, h[4] = 0xff, h[5] = 0xff, h[6] = 0xff, h[7] = 0xff;
	assert_int_equal(eb_frame_parse(h, EB_FRAME_HEADER_SIZE, &f, &n), -EMSGSIZE);
	/* Exactly the maximum is fine, and needs its payload. */
	h[4] = 0x00, h[5] = 0x01, h[6] = 0x00, h[7] = 0x40;
	assert_int_equal(eb_frame_parse(h, EB_FRAME_HEADER_SIZE, &f, &n), -EAGAIN);

	/* Unknown types. */
	eb_frame_header_write(h, EB_MSG_WAKE, 0);
	for (unsigned t = 0; t < 256; t++) {
		h[0] = (uint8_t)t;
		if (t >= 1 && t < _EB_MSG_MAX)
			assert_int_equal(eb_frame_parse(h, 8, &f, &n), 0);
		else
			assert_int_equal(eb_frame_parse(h, 8, &f, &n), -EBADMSG);
	}

	/* Any flag bit, any reserved bit. */
	for (int bit = 0; bit < 8; bit++) {
		eb_frame_header_write(h, EB_MSG_WAKE, 0);
		h[1] = (uint8_t)(1u << bit);
		assert_int_equal(eb_frame_parse(h, 8, &f, &n), -EBADMSG);
	}
	for (int bit = 0; bit < 16; bit++) {
		eb_frame_header_write(h, EB_MSG_WAKE, 0);
		h[2 + bit / 8] = (uint8_t)(1u << (bit % 8));
		assert_int_equal(eb_frame_parse(h, 8, &f, &n), -EBADMSG);
	}

	/* A frame handed to the decoder with flags or a bad type is refused there too. */
	{
		struct eb_msg d;

		f = (struct eb_frame){.type = EB_MSG_WAKE, .flags = 1};
		assert_int_equal(eb_msg_decode(&f, &d), -EBADMSG);
		f = (struct eb_frame){.type = 0};
		assert_int_equal(eb_msg_decode(&f, &d), -EBADMSG);
		f = (struct eb_frame){.type = _EB_MSG_MAX};
		assert_int_equal(eb_msg_decode(&f, &d), -EBADMSG);
		f = (struct eb_frame){.type = _EB_MSG_INVALID};
		assert_int_equal(eb_msg_decode(&f, &d), -EBADMSG);
	}
}

static void test_encode_buffer(void **state)
{
	uint8_t buf[EB_FRAME_MAX];

	(void)state;
	for (int t = 1; t < _EB_MSG_MAX; t++) {
		struct eb_msg m = sample(t);
		int total = eb_msg_encode(&m, buf, sizeof(buf));

		assert_true(total > 0);
		for (int size = 0; size < total; size++)
			assert_int_equal(eb_msg_encode(&m, buf, (size_t)size), -ENOBUFS);
		assert_int_equal(eb_msg_encode(&m, buf, (size_t)total), total);
	}

	{
		struct eb_msg m = {.type = 0};

		assert_encode_einval(&m);
		m.type = _EB_MSG_MAX;
		assert_encode_einval(&m);
		m.type = _EB_MSG_INVALID;
		assert_encode_einval(&m);
	}
}

/* Patches byte off of a valid sample's payload and checks the decoder refuses it. */
static void assert_patched_ebadmsg(enum eb_msg_type t, size_t off, uint8_t v)
{
	uint8_t buf[EB_FRAME_MAX];
	struct eb_msg m = sample(t);
	int r;

	r = eb_msg_encode(&m, buf, sizeof(buf));
	assert_true(r > 0);
	assert_true(off < (size_t)r - EB_FRAME_HEADER_SIZE);
	buf[EB_FRAME_HEADER_SIZE + off] = v;
	assert_decode_ebadmsg(t, buf + EB_FRAME_HEADER_SIZE, (size_t)r - EB_FRAME_HEADER_SIZE);
}

static void test_reserved(void **state)
{
	(void)state;
	for (unsigned v = 1; v < 256; v <<= 1) {
		assert_patched_ebadmsg(EB_MSG_HELLO, 3, (uint8_t)v);
		assert_patched_ebadmsg(EB_MSG_WELCOME, 3, (uint8_t)v);
		for (size_t off = 5; off < 8; off++)
			assert_patched_ebadmsg(EB_MSG_GET, off, (uint8_t)v);
	}
}

static void test_ranges_hello_welcome(void **state)
{
	struct eb_msg m;

	(void)state;

	m = sample(EB_MSG_HELLO);
	m.hello.version = 0;
	assert_encode_einval(&m);
	assert_patched_ebadmsg(EB_MSG_HELLO, 1, 0); /* version 0x0000 */

	m = sample(EB_MSG_HELLO);
	m.hello.roles = 0;
	assert_encode_einval(&m);
	m.hello.roles = EB_ROLE_ALL + 1;
	assert_encode_einval(&m);
	m.hello.roles = 0x80 | EB_ROLE_SINK;
	assert_encode_einval(&m);
	assert_patched_ebadmsg(EB_MSG_HELLO, 2, 0);
	assert_patched_ebadmsg(EB_MSG_HELLO, 2, 8);
	assert_patched_ebadmsg(EB_MSG_HELLO, 2, 0xff);

	m = sample(EB_MSG_HELLO);
	m.hello.claim_mbits_per_byte = 8001;
	assert_encode_einval(&m);
	assert_patched_ebadmsg(EB_MSG_HELLO, 4, 0x01); /* claim >= 2^24 */

	/* Kind: one byte over the ceiling, not terminated, and bad characters. */
	m = sample(EB_MSG_HELLO);
	memset(m.hello.kind, 'k', sizeof(m.hello.kind));
	assert_encode_einval(&m);
	{
		uint8_t p[10 + EB_KIND_MAX + 1] = {0, 1, EB_ROLE_SINK,   0, 0, 0, 0,
		                                   0, 0, EB_KIND_MAX + 1};

		memset(p + 10, 'k', EB_KIND_MAX + 1);
		assert_decode_ebadmsg(EB_MSG_HELLO, p, sizeof(p));
		p[9] = EB_KIND_MAX; /* and the right length with a byte left over */
		assert_decode_ebadmsg(EB_MSG_HELLO, p, sizeof(p));
		{
			struct eb_msg d;

			assert_int_equal(decode_payload(EB_MSG_HELLO, p, sizeof(p) - 1, &d), 0);
			assert_int_equal(strlen(d.hello.kind), EB_KIND_MAX);
		}
		/* A u16 length far past the payload. */
		p[8] = 0xff, p[9] = 0xff;
		assert_decode_ebadmsg(EB_MSG_HELLO, p, sizeof(p));
	}
	/* "stream /dev/hwrng" starts at payload offset 10. */
	assert_patched_ebadmsg(EB_MSG_HELLO, 12, '\0');
	assert_patched_ebadmsg(EB_MSG_HELLO, 12, '\n');
	assert_patched_ebadmsg(EB_MSG_HELLO, 12, 0x1b);
	assert_patched_ebadmsg(EB_MSG_HELLO, 12, 0x7f);
	assert_patched_ebadmsg(EB_MSG_HELLO, 12, 0x80);
	assert_patched_ebadmsg(EB_MSG_HELLO, 12, 0xff);
	m = sample(EB_MSG_HELLO);
	m.hello.kind[3] = '\t';
	assert_encode_einval(&m);

	m = sample(EB_MSG_WELCOME);
	m.welcome.version = 0;
	assert_encode_einval(&m);
	m = sample(EB_MSG_WELCOME);
	m.welcome.roles = 0;
	assert_encode_einval(&m);
	assert_patched_ebadmsg(EB_MSG_WELCOME, 2, 0);
	assert_patched_ebadmsg(EB_MSG_WELCOME, 2, 0x10);
	m = sample(EB_MSG_WELCOME);
	m.welcome.max_data = 0;
	assert_encode_einval(&m);
	m.welcome.max_data = EB_DATA_MAX + 1;
	assert_encode_einval(&m);
	assert_patched_ebadmsg(EB_MSG_WELCOME, 5, 0x02); /* max_data = 0x20000 */
	m = sample(EB_MSG_WELCOME);
	m.welcome.user[0] = '\0';
	assert_encode_einval(&m);
	{
		const uint8_t p[] = {0, 1, EB_ROLE_SINK, 0, 0, 0, 1, 0, 0, 0};

		assert_decode_ebadmsg(EB_MSG_WELCOME, p, sizeof(p)); /* empty user */
	}
}

/* Text must be valid UTF-8 without control characters. */
static void test_text(void **state)
{
	static const struct {
		const char *s;
		bool ok;
	} cases[] = {
	    {"", true},
	    {"plain ascii ~!", true},
	    {"caf\xc3\xa9", true},       /* U+00E9 */
	    {"\xc2\xa0", true},          /* U+00A0, first after C1 */
	    {"\xe2\x82\xac", true},      /* U+20AC */
	    {"\xf0\x9f\x8e\xb2", true},  /* U+1F3B2 */
	    {"\xf4\x8f\xbf\xbf", true},  /* U+10FFFF */
	    {"a\x01", false},            /* C0 */
	    {"\x1f", false},             /* C0 */
	    {"del\x7f", false},          /* DEL */
	    {"\xc2\x80", false},         /* U+0080, C1 */
	    {"\xc2\x9f", false},         /* U+009F, C1 */
	    {"\xc0\xaf", false},         /* overlong '/' */
	    {"\xc1\xbf", false},         /* overlong */
	    {"\xe0\x80\xaf", false},     /* overlong */
	    {"\xf0\x80\x80\xaf", false}, /* overlong */
	    {"\xed\xa0\x80", false},     /* surrogate U+D800 */
	    {"\xf4\x90\x80\x80", false}, /* U+110000 */
	    {"\xf5\x80\x80\x80", false}, /* never valid lead byte */
	    {"\xc3", false},             /* truncated sequence */
	    {"\xe2\x82", false},         /* truncated sequence */
	    {"\xc3\x28", false},         /* bad continuation */
	    {"\x80", false},             /* stray continuation */
	};
	uint8_t buf[EB_FRAME_MAX];

	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		struct eb_msg m = sample(EB_MSG_ERROR);
		uint8_t p[4 + 64];
		size_t n = strlen(cases[i].s);
		struct eb_msg d;

		(void)snprintf(m.error.text, sizeof(m.error.text), "%s", cases[i].s);
		if (cases[i].ok)
			round_trip(&m, buf, sizeof(buf));
		else
			assert_encode_einval(&m);

		p[0] = 0, p[1] = EB_ERR_PROTOCOL, p[2] = 0, p[3] = (uint8_t)n;
		memcpy(p + 4, cases[i].s, n);
		assert_int_equal(decode_payload(EB_MSG_ERROR, p, 4 + n, &d),
		                 cases[i].ok ? 0 : -EBADMSG);
	}

	/* A NUL inside the bytes would silently shorten the C string; it is refused. */
	{
		const uint8_t p[] = {0, 1, 0, 3, 'a', 0, 'b'};

		assert_decode_ebadmsg(EB_MSG_ERROR, p, sizeof(p));
	}
}

static void test_ranges_data(void **state)
{
	static uint8_t big[EB_DATA_MAX + 1];
	uint8_t p[8 + EB_DATA_MAX + 1];
	struct eb_msg m;

	(void)state;

	/* PUT: 1..EB_DATA_MAX bytes, credit at most 8 bits a byte. */
	m = sample(EB_MSG_PUT);
	m.put.len = 0;
	assert_encode_einval(&m);
	m = sample(EB_MSG_PUT);
	m.put.credit_bits = 8 * m.put.len + 1;
	assert_encode_einval(&m);
	m.put.credit_bits = 8 * m.put.len;
	assert_int_equal(eb_msg_encode(&m, p, sizeof(p)), 8 + 8 + (int)m.put.len);
	m = sample(EB_MSG_PUT);
	m.put.data = big;
	m.put.len = EB_DATA_MAX + 1;
	assert_encode_einval(&m);
	m.put.data = NULL;
	m.put.len = 1;
	assert_encode_einval(&m);

	{
		const uint8_t empty[] = {0, 0, 0, 0, 0, 0, 0, 0};
		const uint8_t overcredit[] = {0, 0, 0, 9, 0, 0, 0, 1, 0xaa};
		const uint8_t wrap[] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 0xaa};

		assert_decode_ebadmsg(EB_MSG_PUT, empty, sizeof(empty));
		assert_decode_ebadmsg(EB_MSG_PUT, overcredit, sizeof(overcredit));
		assert_decode_ebadmsg(EB_MSG_PUT, wrap, sizeof(wrap));
	}
	memset(p, 0, sizeof(p));
	p[4] = 0x00, p[5] = 0x01, p[6] = 0x00, p[7] = 0x01; /* len EB_DATA_MAX + 1 */
	assert_decode_ebadmsg(EB_MSG_PUT, p, sizeof(p));
	assert_decode_ebadmsg(EB_MSG_DATA, p, sizeof(p));
	p[7] = 0x00; /* len EB_DATA_MAX, one byte left over */
	assert_decode_ebadmsg(EB_MSG_PUT, p, sizeof(p));
	{
		struct eb_msg d;

		assert_int_equal(decode_payload(EB_MSG_PUT, p, sizeof(p) - 1, &d), 0);
		assert_int_equal(d.put.len, EB_DATA_MAX);
		assert_ptr_equal(d.put.data, p + 8);
	}

	/* DATA: 0..EB_DATA_MAX bytes, bits at most 8 a byte. */
	m = sample(EB_MSG_DATA);
	m.data.bits = 8 * m.data.len + 1;
	assert_encode_einval(&m);
	m = sample(EB_MSG_DATA);
	m.data.len = 0;
	m.data.bits = 1;
	assert_encode_einval(&m);
	m.data.data = NULL;
	m.data.len = 3;
	m.data.bits = 0;
	assert_encode_einval(&m);
	{
		const uint8_t zero_bits[] = {0, 0, 0, 1, 0, 0, 0, 0};

		assert_decode_ebadmsg(EB_MSG_DATA, zero_bits, sizeof(zero_bits));
	}

	/* PUT_ACK: credited at most 8 bits per accepted byte, accepted at most EB_DATA_MAX. */
	m = sample(EB_MSG_PUT_ACK);
	m.put_ack.credited_bits = 8 * m.put_ack.accepted_bytes + 1;
	assert_encode_einval(&m);
	m.put_ack.accepted_bytes = EB_DATA_MAX + 1;
	m.put_ack.credited_bits = 0;
	assert_encode_einval(&m);
	assert_patched_ebadmsg(EB_MSG_PUT_ACK, 3, 0xff); /* 255 bits for 9 bytes */
	assert_patched_ebadmsg(EB_MSG_PUT_ACK, 5, 0x02); /* 0x20009 bytes */
}

static void test_ranges_get_error_status(void **state)
{
	uint8_t buf[EB_FRAME_MAX];
	struct eb_msg m;
	const uint32_t bad_bits[] = {0, 1, 7, 9, 12, 255, EB_DATA_MAX * 8 + 8, UINT32_MAX};

	(void)state;

	for (size_t i = 0; i < ELEMENTSOF(bad_bits); i++) {
		uint8_t p[8] = {0};

		m = sample(EB_MSG_GET);
		m.get.bits = bad_bits[i];
		assert_encode_einval(&m);
		p[0] = (uint8_t)(bad_bits[i] >> 24), p[1] = (uint8_t)(bad_bits[i] >> 16);
		p[2] = (uint8_t)(bad_bits[i] >> 8), p[3] = (uint8_t)bad_bits[i];
		assert_decode_ebadmsg(EB_MSG_GET, p, sizeof(p));
	}
	m = sample(EB_MSG_GET);
	m.get.mode = _EB_GET_MODE_MAX;
	assert_encode_einval(&m);
	m.get.mode = _EB_GET_MODE_INVALID;
	assert_encode_einval(&m);
	assert_patched_ebadmsg(EB_MSG_GET, 4, 2);
	assert_patched_ebadmsg(EB_MSG_GET, 4, 0xff);

	m = sample(EB_MSG_ERROR);
	m.error.code = 0;
	assert_encode_einval(&m);
	m.error.code = _EB_ERR_MAX;
	assert_encode_einval(&m);
	m.error.code = _EB_ERR_INVALID;
	assert_encode_einval(&m);
	assert_patched_ebadmsg(EB_MSG_ERROR, 1, 0);
	assert_patched_ebadmsg(EB_MSG_ERROR, 1, _EB_ERR_MAX);
	assert_patched_ebadmsg(EB_MSG_ERROR, 0, 1); /* code 0x0104 */
	m = sample(EB_MSG_ERROR);
	memset(m.error.text, 'x', sizeof(m.error.text));
	assert_encode_einval(&m);
	{
		uint8_t p[4 + EB_TEXT_MAX + 1];

		memset(p, 'x', sizeof(p));
		p[0] = 0, p[1] = 1, p[2] = (EB_TEXT_MAX + 1) >> 8, p[3] = (EB_TEXT_MAX + 1) & 0xff;
		assert_decode_ebadmsg(EB_MSG_ERROR, p, sizeof(p));
	}

	m = sample(EB_MSG_STATUS);
	m.status.pool_bits = m.status.capacity_bits + 1;
	assert_encode_einval(&m);
	assert_patched_ebadmsg(EB_MSG_STATUS, 0, 1); /* pool_bits > capacity_bits */

	/* STATUS's versions (docs/protocol.md 3.10, 3.11): version 0 is the empty STATUS_REQ and
	 * the 52-byte STATUS alone, so that each has one encoding; version 1 carries the pool's
	 * carried credit (less than a block's 576 bits) and dropped credit. */
	m = (struct eb_msg){.type = EB_MSG_STATUS_REQ, .status_req = {.version = 1}};
	round_trip(&m, buf, sizeof(buf));
	m.status_req.version = EB_STATUS_VERSION + 1;
	assert_encode_einval(&m);
	{
		static const uint8_t zero[4] = {0, 0, 0, 0}, two[4] = {2, 0, 0, 0},
				     reserved[4] = {1, 0, 0, 1}, short3[3] = {1, 0, 0};

		assert_decode_ebadmsg(EB_MSG_STATUS_REQ, zero, sizeof(zero));
		assert_decode_ebadmsg(EB_MSG_STATUS_REQ, two, sizeof(two));
		assert_decode_ebadmsg(EB_MSG_STATUS_REQ, reserved, sizeof(reserved));
		assert_decode_ebadmsg(EB_MSG_STATUS_REQ, short3, sizeof(short3));
	}
	m = sample(EB_MSG_STATUS);
	m.status.version = 1;
	m.status.carried_bits = 575;
	m.status.dropped_bits = UINT64_MAX;
	round_trip(&m, buf, sizeof(buf));
	m.status.carried_bits = 576;
	assert_encode_einval(&m);
	m.status.carried_bits = 0;
	m.status.version = 2;
	assert_encode_einval(&m);
	m = sample(EB_MSG_STATUS);
	m.status.dropped_bits = 1; /* version 0 has no room for it */
	assert_encode_einval(&m);
	{
		uint8_t p[68] = {0};

		/* pool 0 of capacity 0, carried 576 */
		p[52 + 6] = 0x02, p[52 + 7] = 0x40;
		assert_decode_ebadmsg(EB_MSG_STATUS, p, sizeof(p));
		assert_decode_ebadmsg(EB_MSG_STATUS, p, 60); /* cut inside the version 1 fields */
	}
}

static void assert_golden(const struct eb_msg *m, const uint8_t *expected, size_t len)
{
	uint8_t buf[EB_FRAME_MAX];
	int r;

	r = eb_msg_encode(m, buf, sizeof(buf));
	assert_int_equal(r, (int)len);
	assert_memory_equal(buf, expected, len);
	round_trip(m, buf, sizeof(buf));
}

/* A chained broker's HELLO: the ids follow the kind as u8 n, n x u64; none is no field (so one
 * HELLO has one encoding), and n = 0 or n > EB_CHAIN_MAX is refused both ways. */
static void test_hello_chain(void **state)
{
	static const uint8_t chained[] = {
	    0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x15, /* header, 21 bytes */
	    0x00, 0x01, 0x02, 0x00,                         /* version 1, sink, reserved */
	    0x00, 0x00, 0x00, 0x00,                         /* no claim */
	    0x00, 0x02, 'e',  'b',                          /* kind "eb" */
	    0x01,                                           /* one broker id */
	    0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, /* the id */
	};
	uint8_t buf[EB_FRAME_MAX], payload[10 + 2 + 1 + 8 * (EB_CHAIN_MAX + 1)];
	struct eb_msg m = {.type = EB_MSG_HELLO}, d;

	(void)state;
	m.hello = (struct eb_msg_hello){.version = 1, .roles = EB_ROLE_SINK, .kind = "eb"};
	m.hello.n_chain = 1;
	m.hello.chain[0] = UINT64_C(0x0123456789abcdef);
	assert_golden(&m, chained, sizeof(chained));

	m.hello.n_chain = EB_CHAIN_MAX;
	for (unsigned i = 0; i < EB_CHAIN_MAX; i++)
		m.hello.chain[i] = i + 1;
	round_trip(&m, buf, sizeof(buf));
	m.hello.n_chain = EB_CHAIN_MAX + 1;
	assert_encode_einval(&m);

	/* n = 0, n over the limit, and n promising more ids than follow. */
	memcpy(payload, chained + EB_FRAME_HEADER_SIZE, 12);
	payload[12] = 0;
	assert_decode_ebadmsg(EB_MSG_HELLO, payload, 13);
	payload[12] = EB_CHAIN_MAX + 1;
	memset(payload + 13, 0, 8 * (EB_CHAIN_MAX + 1));
	assert_decode_ebadmsg(EB_MSG_HELLO, payload, 13 + 8 * (EB_CHAIN_MAX + 1));
	payload[12] = 2;
	assert_decode_ebadmsg(EB_MSG_HELLO, payload, 13 + 8);
	payload[12] = 1;
	assert_int_equal(decode_payload(EB_MSG_HELLO, payload, 13 + 8, &d), 0);
	assert_int_equal(d.hello.n_chain, 1);
}

/* These bytes are the wire format; docs/protocol.md shows the HELLO and GET dumps. Changing
 * any of them breaks every deployed peer. */
static void test_golden(void **state)
{
	struct eb_msg m;

	(void)state;

	{
		static const uint8_t hello[] = {
		    0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1b, /* header, 27 bytes */
		    0x00, 0x01,                                     /* version 1 */
		    0x01,                                           /* roles: source */
		    0x00,                                           /* reserved */
		    0x00, 0x00, 0x1d, 0x4c,                         /* 7500 mbit/byte */
		    0x00, 0x11,                                     /* kind: 17 bytes */
		    's',  't',  'r',  'e',  'a',  'm',  ' ',  '/',  'd',
		    'e',  'v',  '/',  'h',  'w',  'r',  'n',  'g'};

		m = sample(EB_MSG_HELLO);
		assert_golden(&m, hello, sizeof(hello));
	}
	{
		static const uint8_t get[] = {
		    0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, /* header, 8 bytes */
		    0x00, 0x00, 0x01, 0x00,                         /* 256 bits */
		    0x00,                                           /* mode full */
		    0x00, 0x00, 0x00,                               /* reserved */
		};

		m = sample(EB_MSG_GET);
		assert_golden(&m, get, sizeof(get));
	}
	{
		static const uint8_t put[] = {
		    0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0b, 0x00, 0x00,
		    0x00, 0x0c, 0x00, 0x00, 0x00, 0x03, 0xaa, 0xbb, 0xcc,
		};
		static const uint8_t body[] = {0xaa, 0xbb, 0xcc};

		m = (struct eb_msg){.type = EB_MSG_PUT};
		m.put = (struct eb_msg_put){.credit_bits = 12, .data = body, .len = 3};
		assert_golden(&m, put, sizeof(put));
	}
	{
		static const uint8_t sleep_[] = {
		    0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0xea, 0x60,
		};
		static const uint8_t wake[] = {0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};

		m = sample(EB_MSG_SLEEP);
		assert_golden(&m, sleep_, sizeof(sleep_));
		m = sample(EB_MSG_WAKE);
		assert_golden(&m, wake, sizeof(wake));
	}
	{
		static const uint8_t error[] = {
		    0x0b, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0b, 0x00, 0x02,
		    0x00, 0x07, 'v',  '=',  '9',  ' ',  'n',  'o',  't',
		};

		m = (struct eb_msg){.type = EB_MSG_ERROR};
		m.error.code = EB_ERR_VERSION;
		(void)snprintf(m.error.text, sizeof(m.error.text), "%s", "v=9 not");
		assert_golden(&m, error, sizeof(error));
	}
	{
		static const uint8_t status[] = {
		    0x0d, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x34, /* header, 52 bytes */
		    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, /* pool 4096 */
		    0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, /* capacity 2^20 */
		    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, /* in */
		    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, /* out */
		    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, /* drbg bytes */
		    0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x04, /* sources, sinks */
		    0x00, 0x01, 0x51, 0x80,                         /* uptime 86400 s */
		};

		m = sample(EB_MSG_STATUS);
		assert_golden(&m, status, sizeof(status));
	}
	{
		static const uint8_t req[] = {12, 0, 0, 0, 0, 0, 0, 4, 1, 0, 0, 0};
		uint8_t status1[8 + 68];

		m = (struct eb_msg){.type = EB_MSG_STATUS_REQ, .status_req = {.version = 1}};
		assert_golden(&m, req, sizeof(req));
		/* Version 1: the first layout, 68 bytes long, then carried and dropped. */
		m = sample(EB_MSG_STATUS);
		m.status.version = 1;
		m.status.carried_bits = 0x23f;
		m.status.dropped_bits = 0x0a0b0c0d0e0f1011ULL;
		assert_int_equal(eb_msg_encode(&m, status1, sizeof(status1)), sizeof(status1));
		assert_int_equal(status1[7], 68);
		{
			static const uint8_t tail[16] = {0,    0,    0,    0,    0,    0,
			                                 0x02, 0x3f, 0x0a, 0x0b, 0x0c, 0x0d,
			                                 0x0e, 0x0f, 0x10, 0x11};

			assert_memory_equal(status1 + 8 + 52, tail, sizeof(tail));
		}
	}
}

static void test_strings(void **state)
{
	char buf[64];

	(void)state;
	assert_string_equal(eb_msg_type_to_string(EB_MSG_HELLO), "HELLO");
	assert_string_equal(eb_msg_type_to_string(EB_MSG_STATUS_REQ), "STATUS_REQ");
	assert_string_equal(eb_msg_type_to_string(EB_MSG_STATUS), "STATUS");
	for (int t = 1; t < _EB_MSG_MAX; t++)
		assert_non_null(eb_msg_type_to_string(t));
	assert_null(eb_msg_type_to_string(0));
	assert_null(eb_msg_type_to_string(_EB_MSG_MAX));
	assert_null(eb_msg_type_to_string(_EB_MSG_INVALID));

	for (int c = 1; c < _EB_ERR_MAX; c++)
		assert_non_null(eb_error_code_to_string(c));
	assert_string_equal(eb_error_code_to_string(EB_ERR_TOO_LARGE), "too-large");
	assert_null(eb_error_code_to_string(0));
	assert_null(eb_error_code_to_string(_EB_ERR_MAX));
	assert_null(eb_error_code_to_string(_EB_ERR_INVALID));

	assert_string_equal(eb_roles_to_string(0, buf, sizeof(buf)), "");
	assert_string_equal(eb_roles_to_string(EB_ROLE_SINK, buf, sizeof(buf)), "sink");
	assert_string_equal(eb_roles_to_string(EB_ROLE_SOURCE | EB_ROLE_SINK, buf, sizeof(buf)),
	                    "source,sink");
	assert_string_equal(eb_roles_to_string(EB_ROLE_ALL, buf, sizeof(buf)), "source,sink,admin");
	assert_string_equal(eb_roles_to_string(EB_ROLE_ADMIN | 0x30, buf, sizeof(buf)),
	                    "admin,0x30");
	assert_string_equal(eb_roles_to_string(0x80000000u, buf, sizeof(buf)), "0x80000000");
	/* Truncated, still terminated. */
	assert_string_equal(eb_roles_to_string(EB_ROLE_ALL, buf, 9), "source,s");
	assert_string_equal(eb_roles_to_string(EB_ROLE_ALL, buf, 1), "");
	assert_ptr_equal(eb_roles_to_string(EB_ROLE_ALL, buf, 0), buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip_all),
	    cmocka_unit_test(test_round_trip_limits),
	    cmocka_unit_test(test_truncation),
	    cmocka_unit_test(test_stream),
	    cmocka_unit_test(test_frame_header),
	    cmocka_unit_test(test_frame_header_alone),
	    cmocka_unit_test(test_encode_buffer),
	    cmocka_unit_test(test_reserved),
	    cmocka_unit_test(test_ranges_hello_welcome),
	    cmocka_unit_test(test_text),
	    cmocka_unit_test(test_ranges_data),
	    cmocka_unit_test(test_ranges_get_error_status),
	    cmocka_unit_test(test_golden),
	    cmocka_unit_test(test_hello_chain),
	    cmocka_unit_test(test_strings),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
