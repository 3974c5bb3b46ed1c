/* SPDX-License-Identifier: MIT */
/* eb-brokerctl history: the broker's last hour and day as sparklines, or as JSON. */
#include "brokerctl-history.h"

#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <langinfo.h>
#include <locale.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "log.h"
#include "macro.h"
#include "report.h"
#include "table.h"

/* The hour in 60 columns of 6 samples (a minute each), the day in 48 of 30 (half an hour). */
#define HOUR_COLUMNS 60u
#define DAY_COLUMNS  48u

enum series {
	SERIES_POOL,
	SERIES_IN,
	SERIES_OUT,
	SERIES_SOURCES,
	SERIES_SINKS,
	SERIES_ALARMS,
	SERIES_EMPTY,
	_SERIES_MAX,
	_SERIES_INVALID = -EINVAL,
};

/* A gauge shows its last value in a column; a count, its sum. */
static const struct {
	const char *name, *json;
	bool gauge;
} series_info[_SERIES_MAX] = {
    [SERIES_POOL] = {"pool", "pool_bits", true}, [SERIES_IN] = {"in", "bits_in", false},
    [SERIES_OUT] = {"out", "bits_out", false},   [SERIES_SOURCES] = {"sources", "sources", true},
    [SERIES_SINKS] = {"sinks", "sinks", true},   [SERIES_ALARMS] = {"alarms", "alarms", false},
    [SERIES_EMPTY] = {"empty", "empty", false},
};

static uint64_t value(const struct eb_history_sample *s, enum series k)
{
	switch (k) {
	case SERIES_POOL:
		return s->pool_bits;
	case SERIES_IN:
		return s->bits_in;
	case SERIES_OUT:
		return s->bits_out;
	case SERIES_SOURCES:
		return s->sources;
	case SERIES_SINKS:
		return s->sinks;
	case SERIES_ALARMS:
		return s->alarms;
	case SERIES_EMPTY:
		return s->empty;
	case _SERIES_MAX:
	case _SERIES_INVALID:
		break;
	}
	return 0;
}

/* Eight heights, then what a column with no sample and one of zero show. */
static const char *const bars_utf8[10] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█", " ", "·"};
static const char *const bars_ascii[10] = {"_", ".", "-", "~", "=", "+", "*", "#", " ", "0"};

/* The columns of one series, newest on the right: n samples grouped per column from the newest
 * back. Returns the column values (UINT64_MAX: no sample) and their largest. */
static uint64_t columns(const struct eb_history_sample *v, uint32_t n, enum series k,
                        unsigned n_cols, unsigned per_col, uint64_t *col)
{
	uint64_t max = 0;

	for (unsigned c = 0; c < n_cols; c++) {
		unsigned back = (n_cols - 1 - c) * per_col; /* samples newer than the column's */
		uint64_t sum = 0;

		col[c] = UINT64_MAX;
		if (back >= n)
			continue;
		for (unsigned i = 0; i < per_col && back + i < n; i++) {
			const struct eb_history_sample *s = &v[n - 1 - back - i];

			/* The column's newest sample comes first: a gauge keeps it. */
			if (series_info[k].gauge)
				sum = i == 0 ? value(s, k) : sum;
			else
				sum += value(s, k);
		}
		col[c] = sum;
		max = MAX(max, sum);
	}
	return max;
}

static void sparkline(FILE *f, const struct eb_history_sample *v, uint32_t n, enum series k,
                      unsigned n_cols, unsigned per_col, bool utf8)
{
	const char *const *bars = utf8 ? bars_utf8 : bars_ascii;
	uint64_t col[HOUR_COLUMNS > DAY_COLUMNS ? HOUR_COLUMNS : DAY_COLUMNS];
	uint64_t max = columns(v, n, k, n_cols, per_col, col), total = 0;

	fprintf(f, "  %-8s |", series_info[k].name);
	for (unsigned c = 0; c < n_cols; c++) {
		unsigned h;

		if (col[c] == UINT64_MAX) {
			fputs(bars[8], f);
			continue;
		}
		if (col[c] == 0) {
			fputs(bars[9], f);
			continue;
		}
		/* 1..8 eighths of the largest, rounded up so that a small value still shows. */
		h = (unsigned)((col[c] * 8 + max - 1) / max);
		fputs(bars[MIN(h, 8u) - 1], f);
	}
	if (n == 0)
		fprintf(f, "| no samples\n");
	else if (series_info[k].gauge)
		fprintf(f, "| now %" PRIu64 ", max %" PRIu64 "\n", value(&v[n - 1], k), max);
	else {
		for (uint32_t i = 0; i < n; i++)
			total += value(&v[i], k);
		fprintf(f, "| total %" PRIu64 "\n", total);
	}
}

static int totals_table(FILE *f, const char *title, const struct eb_history_total *v, uint32_t n)
{
	_cleanup_(table_freep) struct table *t = NULL;
	int r;

	if (n == 0) {
		fprintf(f, "\n%s: none in the last day.\n", title);
		return 0;
	}
	r = table_new(&t, 5, "USER", "KIND", ">BITS HOUR", ">BITS DAY", ">IDLE");
	if (r < 0)
		return r;
	for (uint32_t i = 0; i < n; i++) {
		char hour[24], day[24], idle[24];
		bool others = v[i].flags & EB_HISTORY_OTHERS_ROW;

		snprintf(hour, sizeof(hour), "%" PRIu64, v[i].hour_bits);
		snprintf(day, sizeof(day), "%" PRIu64, v[i].day_bits);
		snprintf(idle, sizeof(idle), "%" PRIu32 "s", v[i].idle_s);
		r = table_add_row(t, others ? "(others)" : v[i].user,
		                  others ? "-" : (v[i].kind[0] ? v[i].kind : "-"), hour, day, idle);
		if (r < 0)
			return r;
	}
	fprintf(f, "\n%s:\n", title);
	table_print(t, f);
	return 0;
}

static int print_text(const char *broker, const struct eb_history *h)
{
	const char *cs;
	bool utf8;
	uint32_t fine = h->n_hour ? h->hour[h->n_hour - 1].interval_ms : EB_HISTORY_FINE_MS;
	uint32_t coarse = h->n_day ? h->day[h->n_day - 1].interval_ms : EB_HISTORY_COARSE_MS;
	int r;

	/* Block characters when the terminal's locale can show them, else ASCII. */
	(void)setlocale(LC_CTYPE, "");
	cs = nl_langinfo(CODESET);
	utf8 = cs && strcmp(cs, "UTF-8") == 0;
	printf("Broker:   %s\n\n", broker);
	printf("Last hour: %" PRIu32 " samples of %" PRIu32
	       " ms, a column per 6, newest on the right:\n",
	       h->n_hour, fine);
	for (int k = 0; k < _SERIES_MAX; k++)
		sparkline(stdout, h->hour, h->n_hour, k, HOUR_COLUMNS,
		          EB_HISTORY_HOUR_MAX / HOUR_COLUMNS, utf8);
	printf("\nLast day: %" PRIu32 " samples of %" PRIu32
	       " ms, a column per 30, newest on the right:\n",
	       h->n_day, coarse);
	for (int k = 0; k < _SERIES_MAX; k++)
		sparkline(stdout, h->day, h->n_day, k, DAY_COLUMNS,
		          EB_HISTORY_DAY_MAX / DAY_COLUMNS, utf8);
	r = totals_table(stdout, "Sources (bits credited)", h->sources, h->n_sources);
	if (r >= 0)
		r = totals_table(stdout, "Sinks (full-entropy bits served)", h->sinks, h->n_sinks);
	return r;
}

static struct json_object *samples_json(const struct eb_history_sample *v, uint32_t n)
{
	struct json_object *a = json_object_new_array();

	for (uint32_t i = 0; i < n; i++) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "seq", json_object_new_uint64(v[i].seq));
		json_object_object_add(o, "end_ms", json_object_new_uint64(v[i].end_ms));
		json_object_object_add(o, "interval_ms", json_object_new_uint64(v[i].interval_ms));
		for (int k = 0; k < _SERIES_MAX; k++)
			json_object_object_add(o, series_info[k].json,
			                       json_object_new_uint64(value(&v[i], k)));
		json_object_object_add(o, "admins", json_object_new_uint64(v[i].admins));
		json_object_array_add(a, o);
	}
	return a;
}

static struct json_object *totals_json(const struct eb_history_total *v, uint32_t n)
{
	struct json_object *a = json_object_new_array();

	for (uint32_t i = 0; i < n; i++) {
		struct json_object *o = json_object_new_object();
		bool others = v[i].flags & EB_HISTORY_OTHERS_ROW;

		json_object_object_add(o, "user",
		                       others ? NULL : json_object_new_string(v[i].user));
		json_object_object_add(o, "kind",
		                       others ? NULL : json_object_new_string(v[i].kind));
		json_object_object_add(o, "others", json_object_new_boolean(others));
		json_object_object_add(o, "hour_bits", json_object_new_uint64(v[i].hour_bits));
		json_object_object_add(o, "day_bits", json_object_new_uint64(v[i].day_bits));
		json_object_object_add(o, "idle_s", json_object_new_uint64(v[i].idle_s));
		json_object_array_add(a, o);
	}
	return a;
}

static void print_json(const char *broker, const struct eb_history *h)
{
	struct json_object *o = json_object_new_object();
	const char *s;

	json_object_object_add(o, "broker", json_object_new_string(broker));
	json_object_object_add(o, "hour", samples_json(h->hour, h->n_hour));
	json_object_object_add(o, "day", samples_json(h->day, h->n_day));
	json_object_object_add(o, "sources", totals_json(h->sources, h->n_sources));
	json_object_object_add(o, "sinks", totals_json(h->sinks, h->n_sinks));
	s = json_object_to_json_string_ext(o,
	                                   JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
	puts(s ? s : "null");
	json_object_put(o);
}

int brokerctl_history(struct eb_client *c, bool json)
{
	_cleanup_free_ struct eb_history *h = calloc(1, sizeof(*h));
	int r;

	if (!h)
		return log_oom();
	r = eb_history_fetch(c, h);
	if (r == -EBADMSG || r == -E2BIG)
		return log_error_errno(r, "Broker %s sent a malformed history",
		                       eb_client_broker(c));
	if (r < 0)
		return log_error_errno(r, "Broker %s did not answer REPORT for its history: %s",
		                       eb_client_broker(c), eb_client_last_error(c));
	if (json) {
		print_json(eb_client_broker(c), h);
		return 0;
	}
	r = print_text(eb_client_broker(c), h);
	if (r < 0)
		return log_oom();
	return 0;
}
