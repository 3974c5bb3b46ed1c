/* SPDX-License-Identifier: MIT */
/* The history table of REPORT: its rows' codec, and the listing gathered into one struct. */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "macro.h"
#include "proto-internal.h"
#include "report.h"

/*
 * Layouts (big-endian; docs/protocol.md has the tables). The kind is the top byte of the id,
 * the low 56 bits its seq or slot; each kind has one layout, consumed exactly.
 *
 *   sample (1, 2)  u64 id, u64 end_ms, u32 interval_ms, u32 alarms, u64 pool_bits,
 *                  u64 bits_in, u64 bits_out, u32 sources, u32 sinks, u32 admins, u32 empty
 *   total (3, 4)   u64 id, u8 flags, u8 reserved[3], u32 idle_s, u64 hour_bits, u64 day_bits,
 *                  text user, text kind
 */
#define TOTAL_ROW_FIXED 32

_Static_assert(EB_REPORT_ROWS_MAX *EB_REPORT_HISTORY_TOTAL_ROW_MAX <= EB_REPORT_ROWS_SIZE,
               "a full page of history rows fits where a page of sessions does");

static bool is_sample(enum eb_history_kind k)
{
	return k == EB_HISTORY_HOUR || k == EB_HISTORY_DAY;
}

static bool kind_valid(unsigned k)
{
	return k > 0 && k < _EB_HISTORY_KIND_MAX;
}

/* The rules a row obeys; its size on the wire, or -EINVAL. */
static int history_validate(const struct eb_report_history_row *r, size_t *ret_size)
{
	const struct eb_history_total *t = &r->total;
	size_t user, kind;
	bool others;
	int k;

	if (!kind_valid((unsigned)r->kind))
		return -EINVAL;
	if (is_sample(r->kind)) {
		if (r->sample.seq == 0 || r->sample.seq > EB_HISTORY_SEQ_MAX ||
		    r->sample.interval_ms == 0)
			return -EINVAL;
		*ret_size = EB_REPORT_HISTORY_SAMPLE_ROW;
		return 0;
	}
	/* The others row has no name; a named row has a user, as a session row does. */
	others = t->flags & EB_HISTORY_OTHERS_ROW;
	if ((t->flags & ~EB_HISTORY_OTHERS_ROW) != 0 || t->hour_bits > t->day_bits ||
	    (others ? t->slot != EB_HISTORY_OTHERS
	            : t->slot == 0 || t->slot > EB_HISTORY_NAMED_MAX))
		return -EINVAL;
	k = eb_proto_text_length(t->user, EB_KIND_MAX, &user);
	if (k < 0 || eb_proto_text_length(t->kind, EB_KIND_MAX, &kind) < 0 ||
	    (others ? user != 0 || kind != 0 : user == 0))
		return -EINVAL;
	*ret_size = TOTAL_ROW_FIXED + 2 + user + 2 + kind;
	return 0;
}

int eb_report_history_encode(const struct eb_report_history_row *row, uint8_t *buf, size_t size)
{
	struct writer w;
	size_t n;
	int r;

	assert(row);
	assert(buf || size == 0);

	r = history_validate(row, &n);
	if (r < 0)
		return r;
	if (n > size)
		return -ENOBUFS;
	w = (struct writer){buf, n};
	if (is_sample(row->kind)) {
		const struct eb_history_sample *s = &row->sample;

		put_be64(&w, EB_HISTORY_ID(row->kind, s->seq));
		put_be64(&w, s->end_ms);
		put_be32(&w, s->interval_ms);
		put_be32(&w, s->alarms);
		put_be64(&w, s->pool_bits);
		put_be64(&w, s->bits_in);
		put_be64(&w, s->bits_out);
		put_be32(&w, s->sources);
		put_be32(&w, s->sinks);
		put_be32(&w, s->admins);
		put_be32(&w, s->empty);
	} else {
		const struct eb_history_total *t = &row->total;

		put_be64(&w, EB_HISTORY_ID(row->kind, t->slot));
		put_u8(&w, t->flags);
		put_zero(&w, 3);
		put_be32(&w, t->idle_s);
		put_be64(&w, t->hour_bits);
		put_be64(&w, t->day_bits);
		put_text(&w, t->user);
		put_text(&w, t->kind);
	}
	assert(w.left == 0);
	return (int)n;
}

static int sample_take(struct cursor *c, struct eb_history_sample *s)
{
	int r;

	r = take_be64(c, &s->end_ms);
	if (r >= 0)
		r = take_be32(c, &s->interval_ms);
	if (r >= 0)
		r = take_be32(c, &s->alarms);
	if (r >= 0)
		r = take_be64(c, &s->pool_bits);
	if (r >= 0)
		r = take_be64(c, &s->bits_in);
	if (r >= 0)
		r = take_be64(c, &s->bits_out);
	if (r >= 0)
		r = take_be32(c, &s->sources);
	if (r >= 0)
		r = take_be32(c, &s->sinks);
	if (r >= 0)
		r = take_be32(c, &s->admins);
	if (r >= 0)
		r = take_be32(c, &s->empty);
	return r;
}

static int total_take(struct cursor *c, struct eb_history_total *t)
{
	int r;

	r = take_u8(c, &t->flags);
	if (r >= 0)
		r = take_zero(c, 3);
	if (r >= 0)
		r = take_be32(c, &t->idle_s);
	if (r >= 0)
		r = take_be64(c, &t->hour_bits);
	if (r >= 0)
		r = take_be64(c, &t->day_bits);
	if (r >= 0)
		r = take_text(c, EB_KIND_MAX, t->user);
	if (r >= 0)
		r = take_text(c, EB_KIND_MAX, t->kind);
	return r;
}

int eb_report_history_take(struct cursor *c, struct eb_report_history_row *ret)
{
	struct eb_report_history_row row = {};
	uint64_t id;
	size_t n;
	int r;

	r = take_be64(c, &id);
	if (r < 0)
		return r;
	/* Range-checked below; a byte always fits the enum. */
	row.kind = (enum eb_history_kind)(id >> EB_HISTORY_ID_SHIFT);
	if (!kind_valid((unsigned)row.kind))
		return -EBADMSG;
	if (is_sample(row.kind)) {
		row.sample.seq = id & EB_HISTORY_SEQ_MAX;
		r = sample_take(c, &row.sample);
	} else {
		row.total.slot = id & EB_HISTORY_SEQ_MAX;
		r = total_take(c, &row.total);
	}
	if (r < 0)
		return r;
	if (history_validate(&row, &n) < 0)
		return -EBADMSG;
	*ret = row;
	return 0;
}

uint64_t eb_report_history_id(const struct eb_report_history_row *row)
{
	return EB_HISTORY_ID(row->kind, is_sample(row->kind) ? row->sample.seq : row->total.slot);
}

int eb_report_next_history(struct eb_report_rows *it, struct eb_report_history_row *ret)
{
	struct cursor c = {it->p, it->left};
	int r;

	if (it->left == 0)
		return 0;
	r = eb_report_history_take(&c, ret);
	if (r < 0)
		return -EBADMSG;
	*it = (struct eb_report_rows){c.p, c.left, it->version};
	return 1;
}

/* Appends v to an array of max, after its last element if its key is above the last's. A sample
 * array that is full drops its oldest: the broker may take a sample between two pages. */
static int append(void *array, size_t size, uint32_t *n, uint32_t max, bool ring, const void *v,
                  uint64_t key, uint64_t last_key)
{
	uint8_t *a = array;

	if (*n > 0 && key <= last_key)
		return -EBADMSG;
	if (*n >= max) {
		if (!ring)
			return -E2BIG;
		memmove(a, a + size, (size_t)(max - 1) * size);
		(*n)--;
	}
	memcpy(a + (size_t)*n * size, v, size);
	(*n)++;
	return 0;
}

int eb_history_add(struct eb_history *h, const struct eb_report_history_row *row)
{
	const struct eb_history_sample *s = &row->sample;
	const struct eb_history_total *t = &row->total;

	assert(h);
	assert(row);

	switch (row->kind) {
	case EB_HISTORY_HOUR:
		return append(h->hour, sizeof(*s), &h->n_hour, EB_HISTORY_HOUR_MAX, true, s, s->seq,
		              h->n_hour ? h->hour[h->n_hour - 1].seq : 0);
	case EB_HISTORY_DAY:
		return append(h->day, sizeof(*s), &h->n_day, EB_HISTORY_DAY_MAX, true, s, s->seq,
		              h->n_day ? h->day[h->n_day - 1].seq : 0);
	case EB_HISTORY_SOURCE:
		return append(h->sources, sizeof(*t), &h->n_sources, EB_HISTORY_NAMED_MAX + 1,
		              false, t, t->slot,
		              h->n_sources ? h->sources[h->n_sources - 1].slot : 0);
	case EB_HISTORY_SINK:
		return append(h->sinks, sizeof(*t), &h->n_sinks, EB_HISTORY_NAMED_MAX + 1, false, t,
		              t->slot, h->n_sinks ? h->sinks[h->n_sinks - 1].slot : 0);
	case _EB_HISTORY_KIND_MAX:
	case _EB_HISTORY_KIND_INVALID:
		break;
	}
	return -EBADMSG;
}

static const char *const kind_names[_EB_HISTORY_KIND_MAX] = {
    [EB_HISTORY_HOUR] = "hour",
    [EB_HISTORY_DAY] = "day",
    [EB_HISTORY_SOURCE] = "source",
    [EB_HISTORY_SINK] = "sink",
};

const char *eb_history_kind_to_string(enum eb_history_kind k)
{
	if (k <= 0 || k >= (int)ELEMENTSOF(kind_names))
		return NULL;
	return kind_names[k];
}
