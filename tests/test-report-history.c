/* SPDX-License-Identifier: MIT */
/* Unit tests for shared/report-history.c: the history rows' golden bytes, their refusals, a page
 * of them through the frame codec, and the listing gathered into struct eb_history. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "macro.h"
#include "proto.h"
#include "report.h"

static struct eb_report_history_row sample_row(enum eb_history_kind kind, uint64_t seq)
{
	return (struct eb_report_history_row){
	    .kind = kind,
	    .sample = {.seq = seq,
	               .end_ms = 1700000000000ULL,
	               .interval_ms = 10000,
	               .pool_bits = 4096,
	               .bits_in = 1000,
	               .bits_out = 512,
	               .sources = 2,
	               .sinks = 3,
	               .admins = 1,
	               .alarms = 4,
	               .empty = 5},
	};
}

static struct eb_report_history_row total_row(enum eb_history_kind kind, uint64_t slot)
{
	return (struct eb_report_history_row){
	    .kind = kind,
	    .total = {.slot = slot,
	              .idle_s = 9,
	              .hour_bits = 100,
	              .day_bits = 300,
	              .user = "al",
	              .kind = "k"},
	};
}

/* Field by field: the struct's padding is whatever the stack held (memcmp of it failed under
 * clang's ASan build with one MALLOC_PERTURB_ and not another). */
static void sample_equal(const struct eb_history_sample *a, const struct eb_history_sample *b)
{
	assert_int_equal(a->seq, b->seq);
	assert_int_equal(a->end_ms, b->end_ms);
	assert_int_equal(a->interval_ms, b->interval_ms);
	assert_int_equal(a->pool_bits, b->pool_bits);
	assert_int_equal(a->bits_in, b->bits_in);
	assert_int_equal(a->bits_out, b->bits_out);
	assert_int_equal(a->sources, b->sources);
	assert_int_equal(a->sinks, b->sinks);
	assert_int_equal(a->admins, b->admins);
	assert_int_equal(a->alarms, b->alarms);
	assert_int_equal(a->empty, b->empty);
}

/* Encodes rows into a REPORT frame of the history table and decodes it: the decoder's verdict. */
static int page(uint8_t version, const uint8_t *rows, size_t len, uint16_t count, uint64_t next,
                struct eb_msg *ret)
{
	static uint8_t buf[EB_FRAME_MAX];
	struct eb_msg m = {.type = EB_MSG_REPORT,
	                   .report = {.table = EB_REPORT_HISTORY,
	                              .version = version,
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
	return eb_msg_decode(&f, ret);
}

/* These bytes are the wire format of docs/protocol.md's history rows. */
static void test_golden(void **state)
{
	static const uint8_t sample[] = {
	    0x01, 0, 0,    0,    0,    0,    0,    7,    /* id: hour, seq 7 */
	    0,    0, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00, /* end_ms */
	    0,    0, 0x27, 0x10, 0,    0,    0,    4,    /* interval 10000 ms, alarms 4 */
	    0,    0, 0,    0,    0,    0,    0x10, 0x00, /* pool bits */
	    0,    0, 0,    0,    0,    0,    0x03, 0xe8, /* bits in */
	    0,    0, 0,    0,    0,    0,    0x02, 0x00, /* bits out */
	    0,    0, 0,    2,    0,    0,    0,    3,    /* sources, sinks */
	    0,    0, 0,    1,    0,    0,    0,    5,    /* admins, empty */
	};
	static const uint8_t total[] = {
	    0x04, 0, 0,   0,   0, 0, 0,   2,    /* id: sink, slot 2 */
	    0,    0, 0,   0,   0, 0, 0,   9,    /* flags, reserved, idle 9 s */
	    0,    0, 0,   0,   0, 0, 0,   100,  /* hour bits */
	    0,    0, 0,   0,   0, 0, 0x1, 0x2c, /* day bits */
	    0,    2, 'a', 'l', 0, 1, 'k',       /* user, kind */
	};
	struct eb_report_history_row s = sample_row(EB_HISTORY_HOUR, 7),
				     t = total_row(EB_HISTORY_SINK, 2);
	struct eb_report_history_row back;
	struct eb_report_rows it;
	uint8_t buf[256];
	struct eb_msg m;

	(void)state;
	assert_int_equal(eb_report_history_encode(&s, buf, sizeof(buf)), sizeof(sample));
	assert_memory_equal(buf, sample, sizeof(sample));
	assert_int_equal(
	    eb_report_history_encode(&t, buf + sizeof(sample), sizeof(buf) - sizeof(sample)),
	    sizeof(total));
	assert_memory_equal(buf + sizeof(sample), total, sizeof(total));
	assert_int_equal(eb_report_history_id(&t), (UINT64_C(4) << 56) | 2);

	assert_int_equal(page(1, buf, sizeof(sample) + sizeof(total), 2, 0, &m), 0);
	eb_report_rows_init(&it, &m.report);
	assert_int_equal(eb_report_next_history(&it, &back), 1);
	assert_int_equal(back.kind, EB_HISTORY_HOUR);
	sample_equal(&back.sample, &s.sample);
	assert_int_equal(eb_report_next_history(&it, &back), 1);
	assert_int_equal(back.kind, EB_HISTORY_SINK);
	assert_int_equal(back.total.slot, 2);
	assert_int_equal(back.total.day_bits, 300);
	assert_string_equal(back.total.user, "al");
	assert_string_equal(back.total.kind, "k");
	assert_int_equal(eb_report_next_history(&it, &back), 0);
}

/* What the encoder refuses, the decoder refuses: each rule broken once, on both sides. */
static void test_refusals(void **state)
{
	struct eb_report_history_row bad[12];
	uint8_t buf[256], good[256];
	unsigned n = 0;
	struct eb_msg m;
	int k;

	(void)state;
	bad[n] = sample_row(EB_HISTORY_HOUR, 0); /* seq 0 */
	n++;
	bad[n] = sample_row(EB_HISTORY_DAY, 1);
	bad[n++].sample.interval_ms = 0;
	bad[n++] = total_row(EB_HISTORY_SOURCE, 0); /* slot 0 */
	bad[n++] = total_row(EB_HISTORY_SOURCE, EB_HISTORY_NAMED_MAX + 1);
	bad[n] = total_row(EB_HISTORY_SINK, 1);
	bad[n++].total.hour_bits = 301; /* more in the hour than in the day */
	bad[n] = total_row(EB_HISTORY_SINK, 1);
	bad[n++].total.flags = 0x02;
	bad[n] = total_row(EB_HISTORY_SINK, 1);
	bad[n++].total.user[0] = '\0';          /* a named row without a user */
	bad[n] = total_row(EB_HISTORY_SINK, 1); /* others with a name */
	bad[n].total.flags = EB_HISTORY_OTHERS_ROW;
	bad[n++].total.slot = EB_HISTORY_OTHERS;
	bad[n] = total_row(EB_HISTORY_SINK, 3); /* others in a named slot */
	bad[n].total.flags = EB_HISTORY_OTHERS_ROW;
	bad[n].total.user[0] = '\0';
	bad[n++].total.kind[0] = '\0';
	bad[n] = total_row(EB_HISTORY_SINK, 1);
	bad[n++].total.kind[0] = 0x07; /* a control character */
	bad[n] = sample_row(EB_HISTORY_HOUR, 1);
	bad[n++].kind = _EB_HISTORY_KIND_MAX;
	assert_true(n <= ELEMENTSOF(bad));

	for (unsigned i = 0; i < n; i++) {
		struct eb_report_history_row ok = bad[i];

		assert_int_equal(eb_report_history_encode(&bad[i], buf, sizeof(buf)), -EINVAL);
		/* Write a good row of the same shape, then break its bytes the same way. */
		if (ok.kind == _EB_HISTORY_KIND_MAX) {
			ok.kind = EB_HISTORY_HOUR;
			k = eb_report_history_encode(&ok, good, sizeof(good));
			assert_true(k > 0);
			good[0] = _EB_HISTORY_KIND_MAX;
		} else if (ok.kind == EB_HISTORY_HOUR || ok.kind == EB_HISTORY_DAY) {
			ok.sample.seq = 1;
			ok.sample.interval_ms = 1;
			k = eb_report_history_encode(&ok, good, sizeof(good));
			assert_true(k > 0);
			if (bad[i].sample.seq == 0)
				good[7] = 0;
			else
				memset(good + 16, 0, 4);
		} else {
			struct eb_report_history_row fine = total_row(ok.kind, 1);

			k = eb_report_history_encode(&fine, good, sizeof(good));
			assert_true(k > 0);
			/* Re-encode the fields as the bad row has them, bypassing the encoder. */
			good[0] = (uint8_t)ok.kind;
			for (int b = 0; b < 7; b++)
				good[1 + b] = (uint8_t)(ok.total.slot >> (8 * (6 - b)));
			good[8] = ok.total.flags;
			for (int b = 0; b < 8; b++)
				good[16 + b] = (uint8_t)(ok.total.hour_bits >> (8 * (7 - b)));
			if (ok.total.user[0] == '\0') {
				/* user "al" becomes "" and kind "k" stays: rebuild the texts. */
				size_t at = 32;

				good[at++] = 0, good[at++] = 0;
				good[at++] = 0, good[at++] = ok.total.kind[0] ? 1 : 0;
				if (ok.total.kind[0])
					good[at++] = (uint8_t)ok.total.kind[0];
				k = (int)at;
			} else {
				good[38] = (uint8_t)ok.total.kind[0];
			}
		}
		assert_int_equal(page(1, good, (size_t)k, 1, 0, &m), -EINVAL);
	}
}

/* A page obeys the table's order and count; table 3 is version 1 alone. */
static void test_pages(void **state)
{
	struct eb_report_history_row a = sample_row(EB_HISTORY_HOUR, 5),
				     b = sample_row(EB_HISTORY_DAY, 1);
	struct eb_msg m, q = {.type = EB_MSG_REPORT_REQ,
	                      .report_req = {.table = EB_REPORT_HISTORY, .version = 0}};
	uint8_t buf[256], frame[256];
	int x, y;

	(void)state;
	x = eb_report_history_encode(&a, buf, sizeof(buf));
	y = eb_report_history_encode(&b, buf + x, sizeof(buf) - (size_t)x);
	assert_true(x > 0 && y > 0);
	/* In order (hour 5 then day 1: the kind is the id's top byte), and next naming the last. */
	assert_int_equal(page(1, buf, (size_t)(x + y), 2, 0, &m), 0);
	assert_int_equal(page(1, buf, (size_t)(x + y), 2, eb_report_history_id(&b), &m), 0);
	assert_int_equal(page(1, buf, (size_t)(x + y), 2, eb_report_history_id(&a), &m), -EINVAL);
	/* Out of order: day before hour. */
	memcpy(frame, buf + x, (size_t)y);
	memcpy(frame + y, buf, (size_t)x);
	assert_int_equal(page(1, frame, (size_t)(x + y), 2, 0, &m), -EINVAL);
	/* A count that does not match the bytes, and version 0 of the history table. */
	assert_int_equal(page(1, buf, (size_t)(x + y), 1, 0, &m), -EINVAL);
	assert_int_equal(page(0, buf, (size_t)x, 1, 0, &m), -EINVAL);
	assert_int_equal(eb_msg_encode(&q, frame, sizeof(frame)), -EINVAL);
	q.report_req.version = 1;
	assert_int_equal(eb_msg_encode(&q, frame, sizeof(frame)), 20);
	/* Versions 2 and 3 have the same history rows; there is none past EB_REPORT_VERSION. */
	q.report_req.version = 2;
	assert_int_equal(eb_msg_encode(&q, frame, sizeof(frame)), 20);
	q.report_req.version = 3;
	assert_int_equal(eb_msg_encode(&q, frame, sizeof(frame)), 20);
	q.report_req.version = EB_REPORT_VERSION + 1;
	assert_int_equal(eb_msg_encode(&q, frame, sizeof(frame)), -EINVAL);
}

/* The listing gathered: kinds in order, samples past the maximum push out the oldest, a row out
 * of order is refused, totals past theirs are refused. */
static void test_gather(void **state)
{
	_cleanup_free_ struct eb_history *h = calloc(1, sizeof(*h));
	struct eb_report_history_row r;

	(void)state;
	assert_non_null(h);
	for (uint64_t i = 1; i <= EB_HISTORY_HOUR_MAX + 3; i++) {
		r = sample_row(EB_HISTORY_HOUR, i);
		assert_int_equal(eb_history_add(h, &r), 0);
	}
	assert_int_equal(h->n_hour, EB_HISTORY_HOUR_MAX);
	assert_int_equal(h->hour[0].seq, 4);
	assert_int_equal(h->hour[EB_HISTORY_HOUR_MAX - 1].seq, EB_HISTORY_HOUR_MAX + 3);
	r = sample_row(EB_HISTORY_HOUR, 2);
	assert_int_equal(eb_history_add(h, &r), -EBADMSG);

	for (uint64_t i = 1; i <= EB_HISTORY_NAMED_MAX; i++) {
		r = total_row(EB_HISTORY_SINK, i);
		assert_int_equal(eb_history_add(h, &r), 0);
	}
	r = total_row(EB_HISTORY_SINK, EB_HISTORY_OTHERS);
	r.total.flags = EB_HISTORY_OTHERS_ROW;
	assert_int_equal(eb_history_add(h, &r), 0);
	assert_int_equal(h->n_sinks, EB_HISTORY_NAMED_MAX + 1);
	assert_int_equal(h->n_sources, 0);
	assert_int_equal(h->n_day, 0);
	r.kind = _EB_HISTORY_KIND_MAX;
	assert_int_equal(eb_history_add(h, &r), -EBADMSG);
}

static void test_strings(void **state)
{
	(void)state;
	assert_string_equal(eb_history_kind_to_string(EB_HISTORY_HOUR), "hour");
	assert_string_equal(eb_history_kind_to_string(EB_HISTORY_SINK), "sink");
	assert_null(eb_history_kind_to_string(_EB_HISTORY_KIND_MAX));
	assert_string_equal(eb_report_table_to_string(EB_REPORT_HISTORY), "history");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_golden),  cmocka_unit_test(test_refusals),
	    cmocka_unit_test(test_pages),   cmocka_unit_test(test_gather),
	    cmocka_unit_test(test_strings),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
