/* SPDX-License-Identifier: MIT */
/* Unit tests for shared/report.c: the REPORT rows' golden bytes, their rules, and a full page. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "macro.h"
#include "proto.h"
#include "report.h"

static struct eb_report_session session_sample(void)
{
	return (struct eb_report_session){
	    .id = 7,
	    .roles = EB_ROLE_SOURCE | EB_ROLE_SINK,
	    .health = EB_SOURCE_OK,
	    .flags = EB_REPORT_WAITING | EB_REPORT_TLS,
	    .claim_mbits_per_byte = 7500,
	    .connected_s = 60,
	    .last_ms = 250,
	    .waiting_ms = 100,
	    .bytes_in = 4096,
	    .bits_in = 30000,
	    .bits_out = 8192,
	    .bytes_drbg = 1,
	    .user = "al",
	    .kind = "k",
	    .peer = "tcp",
	};
}

/* Encodes a page of rows into a frame and decodes it back: the decoder's verdict. */
static int page(uint8_t table, const uint8_t *rows, size_t len, uint16_t count, uint64_t next)
{
	uint8_t buf[EB_FRAME_MAX];
	struct eb_msg m = {.type = EB_MSG_REPORT,
	                   .report = {.table = table,
	                              .version = EB_REPORT_VERSION,
	                              .count = count,
	                              .next = next,
	                              .rows = len ? rows : NULL,
	                              .rows_len = (uint32_t)len}};
	struct eb_frame f;
	size_t n;
	int r;

	r = eb_msg_encode(&m, buf, sizeof(buf));
	if (r < 0)
		return r;
	assert_int_equal(eb_frame_parse(buf, (size_t)r, &f, &n), 0);
	return eb_msg_decode(&f, &m);
}

/* These bytes are the wire format of docs/protocol.md's section on REPORT. */
static void test_golden(void **state)
{
	static const uint8_t golden[] = {
	    0,    0,    0,    0,    0, 0, 0,    7, /* id */
	    0x03, 0x02, 0x0a, 0x00, /* roles, health ok, flags waiting|tls, reserved */
	    0x00, 0x00, 0x1d, 0x4c, /* claim 7500 */
	    0x00, 0x00, 0x00, 0x3c, /* connected 60 s */
	    0x00, 0x00, 0x00, 0xfa, /* last 250 ms */
	    0x00, 0x00, 0x00, 0x64, /* waiting 100 ms */
	    0,    0,    0,    0,    0, 0, 0x10, 0x00, /* bytes in */
	    0,    0,    0,    0,    0, 0, 0x75, 0x30, /* bits in */
	    0,    0,    0,    0,    0, 0, 0x20, 0x00, /* bits out */
	    0,    0,    0,    0,    0, 0, 0,    1,    /* drbg bytes */
	    0,    0,    0,    0,    0, 0, 0,    0,    /* quota left */
	    0,    2,    'a',  'l',  0, 1, 'k',  0,    3, 't', 'c', 'p',
	};
	static const uint8_t req[] = {
	    0x0e, 0, 0, 0, 0, 0, 0, 12, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x00,
	};
	struct eb_report_session s = session_sample(), back;
	struct eb_msg m = {.type = EB_MSG_REPORT_REQ, .report_req = {.table = 2, .after = 256}};
	struct eb_report_rows it;
	uint8_t buf[EB_REPORT_SESSION_ROW_MAX];
	int r;

	(void)state;
	r = eb_report_session_encode(&s, buf, sizeof(buf));
	assert_int_equal(r, sizeof(golden));
	assert_memory_equal(buf, golden, sizeof(golden));
	for (int size = 0; size < r; size++)
		assert_int_equal(eb_report_session_encode(&s, buf, (size_t)size), -ENOBUFS);

	it = (struct eb_report_rows){golden, sizeof(golden)};
	assert_int_equal(eb_report_next_session(&it, &back), 1);
	/* Field by field: the structs' padding is nobody's. */
	assert_int_equal(back.id, s.id);
	assert_int_equal(back.roles, s.roles);
	assert_int_equal(back.health, s.health);
	assert_int_equal(back.flags, s.flags);
	assert_int_equal(back.claim_mbits_per_byte, s.claim_mbits_per_byte);
	assert_int_equal(back.connected_s, s.connected_s);
	assert_int_equal(back.last_ms, s.last_ms);
	assert_int_equal(back.waiting_ms, s.waiting_ms);
	assert_int_equal(back.bytes_in, s.bytes_in);
	assert_int_equal(back.bits_in, s.bits_in);
	assert_int_equal(back.bits_out, s.bits_out);
	assert_int_equal(back.bytes_drbg, s.bytes_drbg);
	assert_int_equal(back.quota_left_bits, s.quota_left_bits);
	assert_string_equal(back.user, "al");
	assert_string_equal(back.kind, "k");
	assert_string_equal(back.peer, "tcp");
	assert_int_equal(eb_report_next_session(&it, &back), 0);

	r = eb_msg_encode(&m, buf, sizeof(buf));
	assert_int_equal(r, sizeof(req));
	assert_memory_equal(buf, req, sizeof(req));
}

/* What a row may not say, each refused by the encoder (and so by the decoder). */
static void test_session_rules(void **state)
{
	uint8_t buf[EB_REPORT_SESSION_ROW_MAX];
	struct eb_report_session s;

#define REFUSED(change)                                                                            \
	do {                                                                                       \
		s = session_sample();                                                              \
		change;                                                                            \
		assert_int_equal(eb_report_session_encode(&s, buf, sizeof(buf)), -EINVAL);         \
	} while (0)

	(void)state;
	REFUSED(s.id = 0);
	REFUSED(s.roles = 0);
	REFUSED(s.roles = 8 | EB_ROLE_SOURCE);
	REFUSED(s.health = EB_SOURCE_NONE); /* a source has a health */
	REFUSED(s.roles = EB_ROLE_SINK);    /* a sink has none */
	REFUSED(s.health = _EB_SOURCE_HEALTH_MAX);
	REFUSED(s.flags |= 0x10);
	REFUSED(s.flags &= ~EB_REPORT_WAITING); /* waiting_ms without it */
	REFUSED(s.roles = EB_ROLE_SOURCE);      /* waiting, not a sink */
	REFUSED(s.quota_left_bits = 1);         /* no quota flag */
	REFUSED(s.claim_mbits_per_byte = 8001);
	REFUSED(s.bits_in = 4096 * 8 + 1); /* more than 8 per byte */
	REFUSED(s.user[0] = '\0');
	REFUSED(s.peer[0] = '\0');
	REFUSED(memset(s.kind, 'x', sizeof(s.kind))); /* unterminated */
	REFUSED(s.kind[0] = '\n');                    /* control character */
	REFUSED(s.flags |= EB_REPORT_UPSTREAM);       /* the upstream is a source alone */
	REFUSED(s.roles = EB_ROLE_SOURCE; s.flags = EB_REPORT_UPSTREAM;
	        s.waiting_ms = 0); /* its id */
	REFUSED(s.roles = EB_ROLE_SINK; s.health = EB_SOURCE_NONE; s.waiting_ms = 0;
	        s.flags = EB_REPORT_ASLEEP); /* only a source sleeps */
#undef REFUSED

	s = session_sample();
	s.roles = EB_ROLE_SOURCE;
	s.flags = EB_REPORT_UPSTREAM;
	s.waiting_ms = 0;
	s.id = EB_REPORT_UPSTREAM_ID;
	assert_true(eb_report_session_encode(&s, buf, sizeof(buf)) > 0);

	s = session_sample();
	s.bits_in = UINT64_MAX;
	s.bytes_in = UINT64_MAX / 8 + 1;
	assert_true(eb_report_session_encode(&s, buf, sizeof(buf)) > 0);
}

static void test_user_rules(void **state)
{
	uint8_t buf[EB_REPORT_USER_ROW_MAX];
	struct eb_report_user u;

#define REFUSED(change)                                                                            \
	do {                                                                                       \
		u = (struct eb_report_user){.id = 1,                                               \
		                            .roles = EB_ROLE_SINK,                                 \
		                            .flags = EB_REPORT_USER_QUOTA,                         \
		                            .sessions = 2,                                         \
		                            .sinks = 2,                                            \
		                            .quota_bits_per_hour = 100,                            \
		                            .quota_left_bits = 100,                                \
		                            .name = "vm1"};                                        \
		assert_true(eb_report_user_encode(&u, buf, sizeof(buf)) > 0);                      \
		change;                                                                            \
		assert_int_equal(eb_report_user_encode(&u, buf, sizeof(buf)), -EINVAL);            \
	} while (0)

	(void)state;
	REFUSED(u.id = 0);
	REFUSED(u.sinks = 3);
	REFUSED(u.sources = 3);
	REFUSED(u.quota_left_bits = 101); /* a bucket holds an hour at most */
	REFUSED(u.quota_bits_per_hour = 0);
	REFUSED(u.flags = 0);
	REFUSED(u.flags = 2);
	REFUSED(u.bits_in = 1);
	REFUSED(u.name[0] = '\0');
#undef REFUSED
}

/* 128 rows of the widest kind fit one frame; the page's rules hold on the way in. */
static void test_pages(void **state)
{
	static uint8_t rows[EB_REPORT_ROWS_SIZE + EB_REPORT_SESSION_ROW_MAX];
	struct eb_report_session s = session_sample();
	size_t used = 0, first = 0;
	uint64_t last = 0;

	(void)state;
	memset(s.user, 'u', EB_KIND_MAX);
	memset(s.kind, 'k', EB_KIND_MAX);
	memset(s.peer, 'p', EB_PEER_MAX);
	for (unsigned i = 0; i <= EB_REPORT_ROWS_MAX; i++) {
		int r;

		s.id = last = 10 + i;
		r = eb_report_session_encode_version(&s, EB_REPORT_VERSION, rows + used,
		                                     sizeof(rows) - used);
		assert_int_equal(r, EB_REPORT_SESSION_ROW_MAX);
		if (i == 0)
			first = (size_t)r;
		if (i < EB_REPORT_ROWS_MAX)
			used += (size_t)r;
	}
	assert_int_equal(page(EB_REPORT_SESSIONS, rows, used, EB_REPORT_ROWS_MAX, last - 1), 0);
	assert_int_equal(page(EB_REPORT_SESSIONS, rows, used, EB_REPORT_ROWS_MAX, 0), 0);
	/* One row more than a page may have. */
	assert_int_equal(page(EB_REPORT_SESSIONS, rows, used + first, EB_REPORT_ROWS_MAX + 1, 0),
	                 -EINVAL);
	/* next names the last row or nothing. */
	assert_int_equal(page(EB_REPORT_SESSIONS, rows, used, EB_REPORT_ROWS_MAX, last), -EINVAL);
	assert_int_equal(page(EB_REPORT_SESSIONS, rows, 0, 0, 5), -EINVAL);
	assert_int_equal(page(EB_REPORT_SESSIONS, NULL, 0, 0, 0), 0);
	/* The count is the rows there, the table the kind of row. */
	assert_int_equal(page(EB_REPORT_SESSIONS, rows, used, EB_REPORT_ROWS_MAX - 1, 0), -EINVAL);
	assert_int_equal(page(EB_REPORT_USERS, rows, first, 1, 0), -EINVAL);
	assert_int_equal(page(_EB_REPORT_TABLE_MAX, NULL, 0, 0, 0), -EINVAL);
	/* Ids increase: the same row twice is refused. */
	memcpy(rows + first, rows, first);
	assert_int_equal(page(EB_REPORT_SESSIONS, rows, 2 * first, 2, 0), -EINVAL);
}

/* Version 1 adds fields after the texts; a version 0 client reads exactly what it always read. */
static void test_versions(void **state)
{
	struct eb_report_session s = session_sample(), back;
	struct eb_report_user u = {
	    .id = 1, .roles = EB_ROLE_SINK, .empty_answers = 3, .name = "vm"};
	struct eb_report_user uback;
	uint8_t v0[EB_REPORT_SESSION_ROW_MAX], v1[EB_REPORT_SESSION_ROW_MAX];
	struct eb_msg_report m = {.table = EB_REPORT_SESSIONS, .count = 1};
	struct eb_report_rows it;
	int n0, n1;

	(void)state;
	n0 = eb_report_session_encode(&s, v0, sizeof(v0));
	s.empty_answers = 5;
	s.starving_ms = 1234;
	n1 = eb_report_session_encode_version(&s, 1, v1, sizeof(v1));
	assert_int_equal(n1, n0 + 12);
	/* The same bytes up to the texts' end: a version 0 reader of the first part agrees. */
	assert_memory_equal(v0, v1, (size_t)n0);
	assert_memory_equal(v1 + n0, "\0\0\0\0\0\0\0\x05\0\0\x04\xd2", 12);
	m.version = 1;
	m.rows = v1;
	m.rows_len = (uint32_t)n1;
	eb_report_rows_init(&it, &m);
	assert_int_equal(eb_report_next_session(&it, &back), 1);
	assert_true(back.empty_answers == 5 && back.starving_ms == 1234);
	assert_int_equal(eb_report_next_session(&it, &back), 0);
	/* Version 0 has no room for them; a source-only session never starves; no version 4. */
	assert_int_equal(eb_report_session_encode_version(&s, 0, v0, sizeof(v0)), -EINVAL);
	assert_int_equal(eb_report_session_encode_version(&s, 4, v0, sizeof(v0)), -EINVAL);
	/* Version 2: QUOTA answers after version 1's fields, and a wait's reason among the flags,
	 * which versions before it have no room for. */
	s.quota_answers = 7;
	s.flags |= EB_REPORT_QUOTA_SPENT;
	assert_int_equal(eb_report_session_encode_version(&s, 1, v0, sizeof(v0)), -EINVAL);
	n1 = eb_report_session_encode_version(&s, 2, v1, sizeof(v1));
	assert_int_equal(n1, n0 + 20);
	assert_memory_equal(v1 + n0 + 12, "\0\0\0\0\0\0\0\x07", 8);
	m.version = 2;
	m.rows_len = (uint32_t)n1;
	eb_report_rows_init(&it, &m);
	assert_int_equal(eb_report_next_session(&it, &back), 1);
	assert_true(back.quota_answers == 7 && (back.flags & EB_REPORT_QUOTA_SPENT));
	/* Version 3: version 2's layout, and a clone's mark among the flags, for a sink alone. */
	s.flags |= EB_REPORT_CLONE;
	assert_int_equal(eb_report_session_encode_version(&s, 2, v0, sizeof(v0)), -EINVAL);
	assert_int_equal(eb_report_session_encode_version(&s, 3, v0, sizeof(v0)), n1);
	/* The flags are the row's eleventh byte (after u64 id, u8 roles, u8 health). */
	assert_memory_equal(v0, v1, 10);
	assert_int_equal(v0[10], v1[10] | EB_REPORT_CLONE);
	assert_memory_equal(v0 + 11, v1 + 11, (size_t)n1 - 11);
	m.version = 3;
	m.rows = v0;
	eb_report_rows_init(&it, &m);
	assert_int_equal(eb_report_next_session(&it, &back), 1);
	assert_true(back.quota_answers == 7 && (back.flags & EB_REPORT_CLONE));
	m.version = 2;
	eb_report_rows_init(&it, &m);
	assert_int_equal(eb_report_next_session(&it, &back), -EBADMSG);
	m.rows = v1;
	s.flags &= (uint8_t)~EB_REPORT_CLONE;
	/* Spent quota names why a sink starves: a sink that does not starve has no reason. */
	s.starving_ms = 0;
	assert_int_equal(eb_report_session_encode_version(&s, 2, v0, sizeof(v0)), -EINVAL);
	s.starving_ms = 1234;
	s.flags &= (uint8_t)~EB_REPORT_QUOTA_SPENT;
	s.quota_answers = 0;
	s.roles = EB_ROLE_SOURCE;
	s.flags &= (uint8_t)~EB_REPORT_WAITING;
	s.waiting_ms = 0;
	assert_int_equal(eb_report_session_encode_version(&s, 1, v0, sizeof(v0)), -EINVAL);

	n1 = eb_report_user_encode_version(&u, 1, v1, sizeof(v1));
	assert_true(n1 > 8);
	m = (struct eb_msg_report){.table = EB_REPORT_USERS,
	                           .version = 1,
	                           .count = 1,
	                           .rows = v1,
	                           .rows_len = (uint32_t)n1};
	eb_report_rows_init(&it, &m);
	assert_int_equal(eb_report_next_user(&it, &uback), 1);
	assert_true(uback.empty_answers == 3);
	/* Read as version 0, the extra bytes are not a row. */
	m.version = 0;
	eb_report_rows_init(&it, &m);
	assert_int_equal(eb_report_next_user(&it, &uback), 1);
	assert_int_equal(eb_report_next_user(&it, &uback), -EBADMSG);
	assert_int_equal(eb_report_user_encode(&u, v1, sizeof(v1)), -EINVAL);
	/* Version 2: the user's QUOTA answers and max-sessions. */
	u.quota_answers = 9;
	u.max_sessions = 128;
	assert_int_equal(eb_report_user_encode_version(&u, 1, v1, sizeof(v1)), -EINVAL);
	n0 = eb_report_user_encode_version(&u, 2, v1, sizeof(v1));
	assert_int_equal(n0, n1 + 12);
	m.version = 2;
	m.rows_len = (uint32_t)n0;
	eb_report_rows_init(&it, &m);
	assert_int_equal(eb_report_next_user(&it, &uback), 1);
	assert_true(uback.quota_answers == 9 && uback.max_sessions == 128);
}

/* The counters table: version 2 alone, rows of id and value in id order, an unknown id read as
 * a row (a newer broker counts more), id 0 refused. */
static void test_counters(void **state)
{
	uint8_t rows[3 * EB_REPORT_COUNTER_ROW], frame[EB_FRAME_MAX];
	struct eb_report_counter c[3] = {
	    {EB_COUNTER_LIMIT_MAX_SESSIONS, 4}, {EB_COUNTER_AUTH_WRONG_KEY, 2}, {1000, 1}};
	struct eb_msg m = {.type = EB_MSG_REPORT,
	                   .report = {.table = EB_REPORT_COUNTERS, .version = 2, .count = 3}};
	struct eb_msg back;
	struct eb_frame f;
	struct eb_report_rows it;
	struct eb_report_counter row;
	size_t used = 0, size;
	int n;

	(void)state;
	for (int i = 0; i < 3; i++) {
		n = eb_report_counter_encode(&c[i], rows + used, sizeof(rows) - used);
		assert_int_equal(n, EB_REPORT_COUNTER_ROW);
		used += (size_t)n;
	}
	assert_memory_equal(rows, "\0\0\0\0\0\0\0\x01\0\0\0\0\0\0\0\x04", 16);
	m.report.rows = rows;
	m.report.rows_len = (uint32_t)used;
	n = eb_msg_encode(&m, frame, sizeof(frame));
	assert_true(n > 0);
	assert_int_equal(eb_frame_parse(frame, (size_t)n, &f, &size), 0);
	assert_int_equal(eb_msg_decode(&f, &back), 0);
	eb_report_rows_init(&it, &back.report);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(eb_report_next_counter(&it, &row), 1);
		assert_true(row.id == c[i].id && row.value == c[i].value);
	}
	assert_int_equal(eb_report_next_counter(&it, &row), 0);
	assert_string_equal(eb_counter_to_string(EB_COUNTER_AUTH_WRONG_KEY), "auth-wrong-key");
	assert_string_equal(eb_counter_to_string(EB_COUNTER_CLONES), "clones");
	assert_null(eb_counter_to_string(15));
	/* Out of order, and a table older than version 2. */
	memcpy(rows, rows + 16, 16);
	assert_int_equal(eb_msg_encode(&m, frame, sizeof(frame)), -EINVAL);
	m.report.rows_len = 0;
	m.report.count = 0;
	m.report.version = 1;
	assert_int_equal(eb_msg_encode(&m, frame, sizeof(frame)), -EINVAL);
	c[0].id = 0;
	assert_int_equal(eb_report_counter_encode(&c[0], rows, sizeof(rows)), -EINVAL);
}

static void test_health(void **state)
{
	struct eb_source_seen s = {.source = true, .bytes_in = 1, .put_claimed = true};

	(void)state;
	assert_int_equal(eb_source_health(&s), EB_SOURCE_OK);
	s.put_claimed = false;
	assert_int_equal(eb_source_health(&s), EB_SOURCE_NO_CLAIM);
	s.put_stuck = true;
	assert_int_equal(eb_source_health(&s), EB_SOURCE_STUCK);
	s.idle_ms = EB_SOURCE_SILENT_MS - 1;
	assert_int_equal(eb_source_health(&s), EB_SOURCE_STUCK);
	s.idle_ms = EB_SOURCE_SILENT_MS;
	assert_int_equal(eb_source_health(&s), EB_SOURCE_SILENT);
	/* Told to rest, it is not silent but as its last PUT left it. */
	s.asleep = true;
	assert_int_equal(eb_source_health(&s), EB_SOURCE_STUCK);
	s.bytes_in = 0;
	assert_int_equal(eb_source_health(&s), EB_SOURCE_NEW);
	s.asleep = false;
	assert_int_equal(eb_source_health(&s), EB_SOURCE_SILENT);
	s.source = false;
	assert_int_equal(eb_source_health(&s), EB_SOURCE_NONE);
}

static void test_strings(void **state)
{
	(void)state;
	assert_string_equal(eb_report_table_to_string(EB_REPORT_USERS), "users");
	assert_null(eb_report_table_to_string(_EB_REPORT_TABLE_MAX));
	for (int h = 0; h < _EB_SOURCE_HEALTH_MAX; h++)
		assert_non_null(eb_source_health_to_string(h));
	assert_string_equal(eb_source_health_to_string(EB_SOURCE_STUCK), "stuck");
	assert_null(eb_source_health_to_string(_EB_SOURCE_HEALTH_INVALID));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_golden),     cmocka_unit_test(test_session_rules),
	    cmocka_unit_test(test_user_rules), cmocka_unit_test(test_pages),
	    cmocka_unit_test(test_health),     cmocka_unit_test(test_strings),
	    cmocka_unit_test(test_versions),   cmocka_unit_test(test_counters),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
