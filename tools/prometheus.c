/* SPDX-License-Identifier: MIT */
/* The broker's figures in OpenMetrics 1.0.0 or the Prometheus text format 0.0.4, which are the
 * same but for counters' family names and # EOF. */
#include "prometheus.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "broker-view.h"

/* A label value: backslash, double quote and newline escaped, as the format asks. */
static void put_label(FILE *f, const char *s)
{
	for (; *s; s++)
		if (*s == '\\' || *s == '"')
			fprintf(f, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
}

/* Whether the client asked for OpenMetrics (Prometheus does, before the text format). */
static bool openmetrics;

static void family(FILE *f, const char *name, const char *type, const char *help_text)
{
	/* OpenMetrics names a counter's family without the _total its samples carry. */
	int n = (int)strlen(name);

	if (openmetrics && strcmp(type, "counter") == 0 && n > 6 &&
	    strcmp(name + n - 6, "_total") == 0)
		n -= 6;
	fprintf(f, "# HELP %.*s %s\n# TYPE %.*s %s\n", n, name, help_text, n, name, type);
}

static void sample(FILE *f, const char *name, uint64_t v)
{
	fprintf(f, "%s %" PRIu64 "\n", name, v);
}

static void sample_label(FILE *f, const char *name, const char *label, const char *value,
                         uint64_t v)
{
	fprintf(f, "%s{%s=\"", name, label);
	put_label(f, value);
	fprintf(f, "\"} %" PRIu64 "\n", v);
}

static void write_broker(FILE *f, const struct eb_msg_status *st)
{
	family(f, "eb_pool_bits", "gauge", "Credited entropy in the pool, in bits.");
	sample(f, "eb_pool_bits", st->pool_bits);
	family(f, "eb_pool_capacity_bits", "gauge", "The pool's capacity, in bits.");
	sample(f, "eb_pool_capacity_bits", st->capacity_bits);
	family(f, "eb_bits_in_total", "counter",
	       "Bits credited to the pool since the broker started.");
	sample(f, "eb_bits_in_total", st->bits_in);
	family(f, "eb_bits_out_total", "counter",
	       "Bits served as full entropy since the broker started.");
	sample(f, "eb_bits_out_total", st->bits_out);
	family(f, "eb_drbg_bytes_total", "counter",
	       "Bytes served from the DRBG since the broker started.");
	sample(f, "eb_drbg_bytes_total", st->bytes_drbg);
	family(f, "eb_sources", "gauge", "Sessions connected as sources.");
	sample(f, "eb_sources", st->sources);
	family(f, "eb_sinks", "gauge", "Sessions connected as sinks.");
	sample(f, "eb_sinks", st->sinks);
	family(f, "eb_uptime_seconds", "gauge", "Seconds since the broker started.");
	sample(f, "eb_uptime_seconds", st->uptime_s);
}

/* Sources by the broker's word on their health, and the sessions asleep or waiting: counts, not
 * one series per session, so that a broker with thousands of sessions stays a small scrape. */
static void write_sessions(FILE *f, const struct eb_report_session *v, size_t n)
{
	uint64_t health[_EB_SOURCE_HEALTH_MAX] = {}, asleep = 0, waiting = 0;
	const struct eb_report_session *up = NULL;

	for (size_t i = 0; i < n; i++) {
		if (v[i].flags & EB_REPORT_UPSTREAM)
			up = &v[i];
		health[v[i].health]++;
		asleep += !!(v[i].flags & EB_REPORT_ASLEEP);
		/* A sink answered EMPTY and waiting to retry waits all the same: counted from
		 * its first unanswered GET until a DATA, not only while the broker holds it. */
		waiting += v[i].starving_ms > 0;
	}
	family(f, "eb_sources_by_health", "gauge",
	       "Source sessions by what the broker sees of their data (eb-brokerctl(1)).");
	for (int h = EB_SOURCE_NEW; h < _EB_SOURCE_HEALTH_MAX; h++)
		sample_label(f, "eb_sources_by_health", "health", eb_source_health_to_string(h),
		             health[h]);
	family(f, "eb_sources_asleep", "gauge", "Sources told to rest while the pool is full.");
	sample(f, "eb_sources_asleep", asleep);
	family(
	    f, "eb_sinks_waiting", "gauge",
	    "Sinks waiting for entropy: a GET held, or answered EMPTY and not yet served since.");
	sample(f, "eb_sinks_waiting", waiting);
	if (!up)
		return;
	/* Only a broker with an [upstream] has these. */
	family(f, "eb_upstream_bits_in_total", "counter",
	       "Bits credited from the upstream broker since start.");
	sample(f, "eb_upstream_bits_in_total", up->bits_in);
	family(f, "eb_upstream_failing", "gauge",
	       "Whether the latest attempt to reach the upstream broker failed.");
	sample(f, "eb_upstream_failing", up->health == EB_SOURCE_SILENT);
}

enum user_field {
	USER_SESSIONS,
	USER_BYTES_IN,
	USER_BITS_IN,
	USER_BITS_OUT,
	USER_DRBG,
	USER_QUOTA_LEFT,
	USER_QUOTA,
	USER_EMPTY,
	_USER_FIELD_MAX,
};

static const struct {
	const char *name, *type, *help;
} user_fields[_USER_FIELD_MAX] = {
    [USER_SESSIONS] = {"eb_user_sessions", "gauge", "Established sessions of the user."},
    [USER_BYTES_IN] = {"eb_user_bytes_in_total", "counter",
                       "Bytes the user's sources donated since the broker started."},
    [USER_BITS_IN] = {"eb_user_bits_in_total", "counter",
                      "Bits credited to the user's sources since the broker started."},
    [USER_BITS_OUT] = {"eb_user_bits_out_total", "counter",
                       "Full-entropy bits served to the user since the broker started."},
    [USER_DRBG] = {"eb_user_drbg_bytes_total", "counter",
                   "DRBG bytes served to the user since the broker started."},
    [USER_QUOTA_LEFT] = {"eb_user_quota_left_bits", "gauge",
                         "Pool bits the user's quota can still spend now."},
    [USER_QUOTA] = {"eb_user_quota_bits_per_hour", "gauge", "The user's quota-bits-per-hour."},
    [USER_EMPTY] = {"eb_user_empty_answers_total", "counter",
                    "GETs of the user's sinks answered EMPTY (the pool too low) since start."},
};

/* A user's figure; false for a quota figure of a user without a quota. */
static bool user_value(const struct eb_report_user *u, enum user_field k, uint64_t *ret)
{
	bool quota = u->flags & EB_REPORT_USER_QUOTA;

	switch (k) {
	case USER_SESSIONS:
		*ret = u->sessions;
		return true;
	case USER_BYTES_IN:
		*ret = u->bytes_in;
		return true;
	case USER_BITS_IN:
		*ret = u->bits_in;
		return true;
	case USER_BITS_OUT:
		*ret = u->bits_out;
		return true;
	case USER_DRBG:
		*ret = u->bytes_drbg;
		return true;
	case USER_QUOTA_LEFT:
		*ret = u->quota_left_bits;
		return quota;
	case USER_QUOTA:
		*ret = u->quota_bits_per_hour;
		return quota;
	case USER_EMPTY:
		*ret = u->empty_answers;
		return true;
	case _USER_FIELD_MAX:
		break;
	}
	return false;
}

/* One series per configured user: users are few and named by the administrator. */
static void write_users(FILE *f, const struct eb_report_user *v, size_t n)
{
	uint64_t empty = 0;

	for (size_t i = 0; i < n; i++)
		empty += v[i].empty_answers;
	family(f, "eb_empty_answers_total", "counter",
	       "GETs answered EMPTY (the pool too low) since start, all users.");
	sample(f, "eb_empty_answers_total", empty);
	for (int k = 0; k < _USER_FIELD_MAX; k++) {
		family(f, user_fields[k].name, user_fields[k].type, user_fields[k].help);
		for (size_t i = 0; i < n; i++) {
			uint64_t x;

			if (user_value(&v[i], k, &x))
				sample_label(f, user_fields[k].name, "user", v[i].name, x);
		}
	}
}

void prometheus_write(FILE *f, const struct view *v, bool up, bool om)
{
	openmetrics = om;
	/* The figures, or eb_broker_up 0 alone when the broker cannot be asked: the scrape still
	 * succeeds, so that an alert can say the broker is down rather than the exporter. */
	family(f, "eb_broker_up", "gauge", "Whether the broker answered (1) or not (0).");
	sample(f, "eb_broker_up", up);
	if (up) {
		write_broker(f, &v->status);
		write_sessions(f, v->sessions, v->n_sessions);
		write_users(f, v->users, v->n_users);
	}
	if (openmetrics)
		fputs("# EOF\n", f);
}
