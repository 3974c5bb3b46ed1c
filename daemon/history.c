/* SPDX-License-Identifier: MIT */
/* The broker's history: rings of samples and per-source and per-sink windows, in fixed memory. */
#include "history.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "report.h"

/* A day sample rolls up this many hour samples; a row's hour bucket, this many minutes. */
#define FINE_PER_COARSE 6u
#define ROW_MINUTES     60u
#define ROW_HOURS       24u
/* A named row that has counted nothing for a day (in hour samples) gives its slot up. */
#define ROW_IDLE_TICKS ((uint64_t)EB_HISTORY_DAY_MAX * FINE_PER_COARSE)
#define ROWS           (EB_HISTORY_NAMED_MAX + 1) /* the last is "others" */

/* A sample as kept: its seq is its place in the ring. */
struct sample {
	uint64_t end_ms, pool_bits, bits_in, bits_out;
	uint32_t sources, sinks, admins, alarms, empty;
};

/* The windows of one source or sink: bits per minute for the hour, per hour for the day, each
 * bucket the current one or one before it. Buckets are indexed by the count of day samples. */
struct row {
	bool used;
	char user[EB_KIND_MAX + 1];
	char kind[EB_KIND_MAX + 1];
	uint64_t last_tick; /* the hour samples taken when it last counted */
	uint64_t last_usec;
	uint64_t minute[ROW_MINUTES];
	uint64_t hour[ROW_HOURS];
};

struct history {
	uint32_t interval_ms;
	uint64_t fine_seq, coarse_seq; /* samples taken of each kind since start */
	struct sample fine[EB_HISTORY_HOUR_MAX];
	struct sample coarse[EB_HISTORY_DAY_MAX];
	struct sample now;          /* the interval in progress: its counts */
	struct sample rollup;       /* the day sample in progress: its hour samples summed */
	uint64_t last_in, last_out; /* the broker's totals at the last tick */
	struct row rows[_HISTORY_DIR_MAX][ROWS];
};

size_t history_size(void)
{
	return sizeof(struct history);
}

int history_new(uint32_t interval_ms, struct history **ret)
{
	struct history *h;

	if (interval_ms == 0)
		return -EINVAL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->interval_ms = interval_ms;
	*ret = h;
	return 0;
}

struct history *history_free(struct history *h)
{
	free(h);
	return NULL;
}

uint32_t history_interval_ms(const struct history *h)
{
	return h->interval_ms;
}

static struct row *row_find(struct history *h, enum history_dir dir, const char *user,
                            const char *kind)
{
	struct row *rows = h->rows[dir], *free_row = NULL;

	for (unsigned i = 0; i < EB_HISTORY_NAMED_MAX; i++) {
		if (!rows[i].used) {
			free_row = free_row ? free_row : &rows[i];
			continue;
		}
		if (strcmp(rows[i].user, user) == 0 && strcmp(rows[i].kind, kind) == 0)
			return &rows[i];
	}
	/* A new name takes the first free slot; with none free, it counts with the others. */
	if (!free_row || !user[0])
		return &rows[EB_HISTORY_NAMED_MAX];
	*free_row = (struct row){.used = true};
	snprintf(free_row->user, sizeof(free_row->user), "%s", user);
	snprintf(free_row->kind, sizeof(free_row->kind), "%s", kind);
	return free_row;
}

void history_count(struct history *h, enum history_dir dir, const char *user, const char *kind,
                   uint64_t bits, uint64_t now_usec)
{
	struct row *row;

	assert(dir >= 0 && dir < _HISTORY_DIR_MAX);
	row = row_find(h, dir, user, kind);
	row->used = true;
	row->last_tick = h->fine_seq;
	row->last_usec = now_usec;
	row->minute[h->coarse_seq % ROW_MINUTES] += bits;
	row->hour[h->coarse_seq / ROW_MINUTES % ROW_HOURS] += bits;
}

void history_count_alarm(struct history *h)
{
	h->now.alarms++;
}

void history_count_empty(struct history *h)
{
	h->now.empty++;
}

/* Counts are summed; gauges are the last interval's. */
static void roll_into(struct sample *sum, const struct sample *s)
{
	sum->end_ms = s->end_ms;
	sum->pool_bits = s->pool_bits;
	sum->sources = s->sources;
	sum->sinks = s->sinks;
	sum->admins = s->admins;
	sum->bits_in += s->bits_in;
	sum->bits_out += s->bits_out;
	sum->alarms += s->alarms;
	sum->empty += s->empty;
}

/* A day sample begins: the rows' current buckets move on and start empty, and a row that has
 * counted nothing for a day frees its slot (all its buckets are empty by then). */
static void rows_roll(struct history *h)
{
	for (unsigned d = 0; d < _HISTORY_DIR_MAX; d++)
		for (unsigned i = 0; i < ROWS; i++) {
			struct row *row = &h->rows[d][i];

			if (!row->used)
				continue;
			row->minute[h->coarse_seq % ROW_MINUTES] = 0;
			if (h->coarse_seq % ROW_MINUTES == 0)
				row->hour[h->coarse_seq / ROW_MINUTES % ROW_HOURS] = 0;
			if (h->fine_seq - row->last_tick >= ROW_IDLE_TICKS)
				*row = (struct row){};
		}
}

void history_tick(struct history *h, const struct history_gauges *g)
{
	struct sample s = h->now;

	s.end_ms = g->end_ms;
	s.pool_bits = g->pool_bits;
	s.sources = g->sources;
	s.sinks = g->sinks;
	s.admins = g->admins;
	/* The broker's totals only grow; a smaller one would be our bug, counted as nothing. */
	s.bits_in = g->bits_in >= h->last_in ? g->bits_in - h->last_in : 0;
	s.bits_out = g->bits_out >= h->last_out ? g->bits_out - h->last_out : 0;
	h->last_in = g->bits_in;
	h->last_out = g->bits_out;
	h->now = (struct sample){};

	h->fine[h->fine_seq % EB_HISTORY_HOUR_MAX] = s;
	h->fine_seq++;
	roll_into(&h->rollup, &s);
	if (h->fine_seq % FINE_PER_COARSE != 0)
		return;
	h->coarse[h->coarse_seq % EB_HISTORY_DAY_MAX] = h->rollup;
	h->coarse_seq++;
	h->rollup = (struct sample){};
	rows_roll(h);
}

/* The oldest seq a ring of max still holds, after taken samples. */
static uint64_t first_seq(uint64_t taken, uint64_t max)
{
	return taken > max ? taken - max + 1 : 1;
}

/* The sample of seq or the first after it that the ring holds, or false. */
static bool sample_row(const struct history *h, enum eb_history_kind kind, uint64_t seq,
                       struct eb_report_history_row *ret)
{
	bool hour = kind == EB_HISTORY_HOUR;
	uint64_t taken = hour ? h->fine_seq : h->coarse_seq;
	uint64_t max = hour ? EB_HISTORY_HOUR_MAX : EB_HISTORY_DAY_MAX;
	const struct sample *s;

	seq = MAX(seq, first_seq(taken, max));
	if (seq > taken)
		return false;
	s = hour ? &h->fine[(seq - 1) % max] : &h->coarse[(seq - 1) % max];
	*ret = (struct eb_report_history_row){
	    .kind = kind,
	    .sample = {.seq = seq,
	               .end_ms = s->end_ms,
	               .interval_ms = hour ? h->interval_ms : h->interval_ms * FINE_PER_COARSE,
	               .pool_bits = s->pool_bits,
	               .bits_in = s->bits_in,
	               .bits_out = s->bits_out,
	               .sources = s->sources,
	               .sinks = s->sinks,
	               .admins = s->admins,
	               .alarms = s->alarms,
	               .empty = s->empty},
	};
	return true;
}

/* The row of slot or the first used one after it, or false. Slots count from 1; the others
 * row's slot is EB_HISTORY_OTHERS. */
static bool total_row(const struct history *h, enum eb_history_kind kind, uint64_t slot,
                      uint64_t now_usec, struct eb_report_history_row *ret)
{
	const struct row *rows = h->rows[kind == EB_HISTORY_SOURCE ? HISTORY_SOURCE : HISTORY_SINK];
	const struct row *row = NULL;
	struct eb_history_total *t;
	unsigned i;
	uint64_t idle;

	for (i = (unsigned)MIN(MAX(slot, 1u), (uint64_t)EB_HISTORY_NAMED_MAX + 1) - 1; i < ROWS;
	     i++)
		if (rows[i].used) {
			row = &rows[i];
			break;
		}
	if (!row)
		return false;
	*ret = (struct eb_report_history_row){.kind = kind};
	t = &ret->total;
	t->slot = i < EB_HISTORY_NAMED_MAX ? i + 1 : EB_HISTORY_OTHERS;
	t->flags = i < EB_HISTORY_NAMED_MAX ? 0 : EB_HISTORY_OTHERS_ROW;
	idle = now_usec > row->last_usec ? (now_usec - row->last_usec) / 1000000 : 0;
	t->idle_s = (uint32_t)MIN(idle, (uint64_t)UINT32_MAX);
	for (unsigned m = 0; m < ROW_MINUTES; m++)
		t->hour_bits += row->minute[m];
	for (unsigned m = 0; m < ROW_HOURS; m++)
		t->day_bits += row->hour[m];
	memcpy(t->user, row->user, sizeof(t->user));
	memcpy(t->kind, row->kind, sizeof(t->kind));
	return true;
}

/* The first row whose id is above after, in id order: the kinds in turn. */
static bool next_row(const struct history *h, uint64_t after, uint64_t now_usec,
                     struct eb_report_history_row *ret)
{
	for (unsigned k = EB_HISTORY_HOUR; k < _EB_HISTORY_KIND_MAX; k++) {
		uint64_t from;

		if (after >= EB_HISTORY_ID(k, EB_HISTORY_SEQ_MAX))
			continue;
		from = after < EB_HISTORY_ID(k, 0) ? 1 : (after & EB_HISTORY_SEQ_MAX) + 1;
		if (k == EB_HISTORY_HOUR || k == EB_HISTORY_DAY) {
			if (sample_row(h, k, from, ret))
				return true;
		} else if (total_row(h, k, from, now_usec, ret)) {
			return true;
		}
	}
	return false;
}

int history_page(const struct history *h, uint64_t after, uint64_t now_usec, uint8_t *buf,
                 size_t size, struct eb_msg_report *ret)
{
	struct eb_report_history_row row;
	uint64_t last = after;
	size_t used = 0;
	unsigned count = 0;
	bool more;

	while ((more = next_row(h, last, now_usec, &row)) && count < EB_REPORT_ROWS_MAX) {
		int k = eb_report_history_encode(&row, buf + used, size - used);

		if (k < 0)
			return k;
		used += (size_t)k;
		count++;
		last = eb_report_history_id(&row);
	}
	*ret = (struct eb_msg_report){
	    .table = EB_REPORT_HISTORY,
	    .version = 1,
	    .count = (uint16_t)count,
	    .next = more ? last : 0,
	    .rows = used > 0 ? buf : NULL,
	    .rows_len = (uint32_t)used,
	};
	return 0;
}
