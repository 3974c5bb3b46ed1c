/* SPDX-License-Identifier: MIT */
/* Unit tests for daemon/history.c: the rings' wrap-around, the day's roll-up of hour samples,
 * the bounded rows of sources and sinks, and the pages read back through the decoder. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../daemon/history.h"
#include "macro.h"
#include "proto.h"
#include "report.h"

/* Reads the whole table as a client does: page by page, each through the frame codec. Every row
 * the broker sends must be one the client keeps: the client's decoder drops what does not fit
 * its rings, and would hide a broker that sends a sample older than its ring still holds. */
static struct eb_history *gather(const struct history *h, uint64_t now_usec)
{
	static uint8_t rows[EB_REPORT_ROWS_SIZE], frame[EB_FRAME_MAX];
	struct eb_history *out = calloc(1, sizeof(*out));
	size_t sent[_EB_HISTORY_KIND_MAX] = {0};
	uint64_t after = 0;
	unsigned pages = 0;

	assert_non_null(out);
	for (;;) {
		struct eb_msg m = {.type = EB_MSG_REPORT}, back;
		struct eb_report_history_row row;
		struct eb_report_rows it;
		struct eb_frame f;
		size_t n;
		int r;

		assert_int_equal(history_page(h, after, now_usec, rows, sizeof(rows), &m.report),
		                 0);
		r = eb_msg_encode(&m, frame, sizeof(frame));
		assert_true(r > 0);
		assert_int_equal(eb_frame_parse(frame, (size_t)r, &f, &n), 0);
		assert_int_equal(eb_msg_decode(&f, &back), 0);
		eb_report_rows_init(&it, &back.report);
		while ((r = eb_report_next_history(&it, &row)) > 0) {
			assert_true(eb_report_history_id(&row) > after);
			assert_true(row.kind > 0 && row.kind < _EB_HISTORY_KIND_MAX);
			sent[row.kind]++;
			assert_int_equal(eb_history_add(out, &row), 0);
		}
		assert_int_equal(r, 0);
		pages++;
		if (back.report.next == 0)
			break;
		assert_int_equal(back.report.count, EB_REPORT_ROWS_MAX);
		after = back.report.next;
	}
	assert_true(pages < 20);
	assert_int_equal(sent[EB_HISTORY_HOUR], out->n_hour);
	assert_int_equal(sent[EB_HISTORY_DAY], out->n_day);
	assert_int_equal(sent[EB_HISTORY_SOURCE], out->n_sources);
	assert_int_equal(sent[EB_HISTORY_SINK], out->n_sinks);
	return out;
}

/* One interval: bits_in and bits_out totals grow by i and 2i, the gauges are i. */
static void tick(struct history *h, uint64_t i, uint64_t *in, uint64_t *out)
{
	struct history_gauges g = {
	    .end_ms = 1000 * i, .pool_bits = i, .sources = (uint32_t)i, .sinks = 1, .admins = 2};

	*in += i;
	*out += 2 * i;
	g.bits_in = *in;
	g.bits_out = *out;
	history_tick(h, &g);
}

static void test_wrap(void **state)
{
	_cleanup_(history_freep) struct history *h = NULL;
	_cleanup_free_ struct eb_history *e = NULL;
	uint64_t in = 0, out = 0;

	(void)state;
	assert_int_equal(history_new(0, &h), -EINVAL);
	assert_int_equal(history_new(100, &h), 0);
	e = gather(h, 0);
	assert_int_equal(e->n_hour + e->n_day + e->n_sources + e->n_sinks, 0);
	free(e);

	for (uint64_t i = 1; i <= EB_HISTORY_HOUR_MAX + 40; i++)
		tick(h, i, &in, &out);
	e = gather(h, 0);
	/* The hour holds the newest 360, oldest first; the 40 before them are gone. */
	assert_int_equal(e->n_hour, EB_HISTORY_HOUR_MAX);
	for (unsigned k = 0; k < e->n_hour; k++) {
		const struct eb_history_sample *s = &e->hour[k];

		assert_int_equal(s->seq, 41 + k);
		assert_int_equal(s->pool_bits, 41 + k);
		assert_int_equal(s->bits_in, 41 + k);
		assert_int_equal(s->bits_out, 2 * (41 + k));
		assert_int_equal(s->interval_ms, 100);
	}
	assert_int_equal(e->n_day, (EB_HISTORY_HOUR_MAX + 40) / 6);
}

/* Six hour samples make a day sample: counts summed, gauges of the last. */
static void test_rollup(void **state)
{
	_cleanup_(history_freep) struct history *h = NULL;
	_cleanup_free_ struct eb_history *e = NULL;
	uint64_t in = 0, out = 0;

	(void)state;
	assert_int_equal(history_new(EB_HISTORY_FINE_MS, &h), 0);
	for (uint64_t i = 1; i <= 13; i++) {
		if (i == 2 || i == 8)
			history_count_alarm(h);
		if (i <= 3)
			history_count_empty(h);
		tick(h, i, &in, &out);
	}
	e = gather(h, 0);
	assert_int_equal(e->n_hour, 13);
	assert_int_equal(e->hour[1].alarms, 1);
	assert_int_equal(e->hour[0].empty, 1);
	assert_int_equal(e->hour[3].empty, 0);
	/* Two whole day samples; the 13th hour sample waits for five more. */
	assert_int_equal(e->n_day, 2);
	assert_int_equal(e->day[0].seq, 1);
	assert_int_equal(e->day[0].interval_ms, 6 * EB_HISTORY_FINE_MS);
	assert_int_equal(e->day[0].bits_in, 1 + 2 + 3 + 4 + 5 + 6);
	assert_int_equal(e->day[0].bits_out, 2 * 21);
	assert_int_equal(e->day[0].pool_bits, 6);
	assert_int_equal(e->day[0].sources, 6);
	assert_int_equal(e->day[0].end_ms, 6000);
	assert_int_equal(e->day[0].alarms, 1);
	assert_int_equal(e->day[0].empty, 3);
	assert_int_equal(e->day[1].bits_in, 7 + 8 + 9 + 10 + 11 + 12);
	assert_int_equal(e->day[1].pool_bits, 12);
	assert_int_equal(e->day[1].alarms, 1);
	assert_int_equal(e->day[1].empty, 0);
}

/* The day ring wraps too: 1440 minutes kept, a page chain of more than 11 pages. */
static void test_day_wrap(void **state)
{
	_cleanup_(history_freep) struct history *h = NULL;
	_cleanup_free_ struct eb_history *e = NULL;
	uint64_t in = 0, out = 0, n = 6 * (EB_HISTORY_DAY_MAX + 5);

	(void)state;
	assert_int_equal(history_new(1, &h), 0);
	for (uint64_t i = 1; i <= n; i++)
		tick(h, i, &in, &out);
	e = gather(h, 0);
	assert_int_equal(e->n_hour, EB_HISTORY_HOUR_MAX);
	assert_int_equal(e->n_day, EB_HISTORY_DAY_MAX);
	assert_int_equal(e->day[0].seq, 6);
	assert_int_equal(e->day[EB_HISTORY_DAY_MAX - 1].seq, EB_HISTORY_DAY_MAX + 5);
	assert_int_equal(e->day[EB_HISTORY_DAY_MAX - 1].pool_bits, n);
}

/* 40 sources: the first 32 names get slots, the rest count together as others; the hour and
 * the day windows; a day without anything frees every slot. */
static void test_rows(void **state)
{
	_cleanup_(history_freep) struct history *h = NULL;
	_cleanup_free_ struct eb_history *e = NULL;
	uint64_t in = 0, out = 0, i = 1, others = 0;
	char user[16];

	(void)state;
	assert_int_equal(history_new(1, &h), 0);
	for (unsigned k = 0; k < 40; k++) {
		snprintf(user, sizeof(user), "u%u", k);
		history_count(h, HISTORY_SOURCE, user, "kernel", 100 + k, 0);
		others += k >= EB_HISTORY_NAMED_MAX ? 100 + k : 0;
	}
	history_count(h, HISTORY_SOURCE, "u3", "kernel", 7, 0);
	history_count(h, HISTORY_SOURCE, "u3", "jitter", 9, 0);
	history_count(h, HISTORY_SINK, "vm1", "kernel", 4096, 3000000);
	e = gather(h, 5000000);
	assert_int_equal(e->n_sources, EB_HISTORY_NAMED_MAX + 1);
	assert_int_equal(e->n_sinks, 1);
	assert_string_equal(e->sources[3].user, "u3");
	assert_int_equal(e->sources[3].day_bits, 103 + 7);
	assert_int_equal(e->sources[3].hour_bits, 103 + 7);
	assert_int_equal(e->sources[3].slot, 4);
	/* All 32 slots taken: u3/jitter, a new name, counts with the others. */
	assert_int_equal(e->sources[EB_HISTORY_NAMED_MAX].flags, EB_HISTORY_OTHERS_ROW);
	assert_int_equal(e->sources[EB_HISTORY_NAMED_MAX].slot, EB_HISTORY_OTHERS);
	assert_int_equal(e->sources[EB_HISTORY_NAMED_MAX].day_bits, others + 9);
	assert_int_equal(e->sinks[0].idle_s, 2);
	assert_string_equal(e->sinks[0].user, "vm1");
	free(e);

	/* An hour (60 day samples) later the hour window is empty, the day's is not. */
	for (; i <= 6 * 60; i++)
		tick(h, i, &in, &out);
	e = gather(h, 0);
	assert_int_equal(e->sources[3].hour_bits, 0);
	assert_int_equal(e->sources[3].day_bits, 110);
	free(e);
	/* A source that goes on counting keeps its slot; the rest free theirs after a day. */
	for (; i <= 6 * EB_HISTORY_DAY_MAX + 6; i++) {
		if (i % 600 == 0)
			history_count(h, HISTORY_SOURCE, "u5", "kernel", 1, 0);
		tick(h, i, &in, &out);
	}
	e = gather(h, 0);
	assert_int_equal(e->n_sinks, 0);
	assert_int_equal(e->n_sources, 1);
	assert_string_equal(e->sources[0].user, "u5");
	assert_true(e->sources[0].hour_bits <= e->sources[0].day_bits);
	assert_true(e->sources[0].day_bits >= 13);
	assert_true(e->sources[0].day_bits <= 15);
	/* The slot freed is taken by the next new name. */
	history_count(h, HISTORY_SINK, "vm2", "kernel", 8, 0);
	free(e);
	e = gather(h, 0);
	assert_int_equal(e->sinks[0].slot, 1);
	assert_string_equal(e->sinks[0].user, "vm2");
}

/* hour_bits <= day_bits always, whatever the pattern of counts and ticks. */
static void test_windows(void **state)
{
	_cleanup_(history_freep) struct history *h = NULL;
	uint64_t in = 0, out = 0, x = 88172645463325252ULL;

	(void)state;
	assert_int_equal(history_new(1, &h), 0);
	for (uint64_t i = 1; i <= 6 * 3000; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		if (x % 3 == 0)
			history_count(h, HISTORY_SINK, x % 2 ? "a" : "b", "", x % 1000, 0);
		tick(h, i, &in, &out);
		if (i % 997 == 0) {
			_cleanup_free_ struct eb_history *e = gather(h, 0);

			for (unsigned k = 0; k < e->n_sinks; k++)
				assert_true(e->sinks[k].hour_bits <= e->sinks[k].day_bits);
		}
	}
}

static void test_size(void **state)
{
	(void)state;
	/* What docs/design.md states: the rings and the rows, fixed. */
	printf("# history_size() = %zu bytes\n", history_size());
	assert_true(history_size() < 192 * 1024);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_wrap),     cmocka_unit_test(test_rollup),
	    cmocka_unit_test(test_day_wrap), cmocka_unit_test(test_rows),
	    cmocka_unit_test(test_windows),  cmocka_unit_test(test_size),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
