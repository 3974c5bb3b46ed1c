/* SPDX-License-Identifier: MIT */
/* The broker's state for one answer of eb-metrics, read over the admin protocol. */
#include "broker-view.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "macro.h"

/* As eb-brokerctl: no listing without end from a broken broker. */
#define ROWS_MAX (2 * 65536 + 1024)

/* Every page of a table, the rows into a growing array. */
static int fetch(struct eb_client *c, uint8_t table, void **ret, size_t *ret_n)
{
	size_t row = table == EB_REPORT_USERS ? sizeof(struct eb_report_user)
	                                      : sizeof(struct eb_report_session);
	_cleanup_free_ uint8_t *v = NULL;
	size_t n = 0, allocated = 0;
	uint64_t after = 0;
	int r;

	do {
		struct eb_msg_report page;
		struct eb_report_rows it;

		r = eb_client_report(c, table, after, &page);
		if (r < 0)
			return r;
		if (n + page.count > ROWS_MAX)
			return -EPROTO;
		if (n + page.count > allocated) {
			size_t want = MAX(allocated * 2, n + page.count);
			uint8_t *p = realloc(v, want * row);

			if (!p)
				return -ENOMEM;
			v = p;
			allocated = want;
		}
		eb_report_rows_init(&it, &page);
		for (;;) {
			r = table == EB_REPORT_USERS
			        ? eb_report_next_user(&it, (struct eb_report_user *)(v + n * row))
			        : eb_report_next_session(&it,
			                                 (struct eb_report_session *)(v + n * row));
			if (r < 0)
				return r;
			if (r == 0)
				break;
			n++;
		}
		if (page.next != 0 && page.next <= after)
			return -EPROTO;
		after = page.next;
	} while (after != 0);
	*ret = TAKE_PTR(v);
	*ret_n = n;
	return 0;
}

/* The counters table: one page; ids this program does not know are skipped. */
static int fetch_counters(struct eb_client *c, struct view *v)
{
	struct eb_msg_report page;
	struct eb_report_rows it;
	struct eb_report_counter row;
	int r;

	r = eb_client_report(c, EB_REPORT_COUNTERS, 0, &page);
	if (r < 0)
		return r;
	eb_report_rows_init(&it, &page);
	while ((r = eb_report_next_counter(&it, &row)) > 0)
		if (row.id < _EB_COUNTER_MAX)
			v->counters[row.id] = row.value;
	v->broker_id = v->counters[EB_COUNTER_BROKER_ID];
	return r;
}

/* One window of the broker's history as the page's series. */
static int series_from(struct view_series *out, const struct eb_history_sample *in, size_t n,
                       size_t slots, uint64_t read_at_ms)
{
	*out = (struct view_series){.slots = slots};
	if (n == 0)
		return 0;
	out->samples = calloc(n, sizeof(*out->samples));
	if (!out->samples)
		return -ENOMEM;
	out->n = n;
	/* Every sample of a window spans the same; the newest says how long. */
	out->interval_ms = in[n - 1].interval_ms;
	out->age_ms = read_at_ms > in[n - 1].end_ms ? read_at_ms - in[n - 1].end_ms : 0;
	for (size_t i = 0; i < n; i++)
		out->samples[i] = (struct view_sample){
		    .pool_bits = in[i].pool_bits,
		    .bits_in = in[i].bits_in,
		    .bits_out = in[i].bits_out,
		    .sources = in[i].sources,
		    .sinks = in[i].sinks,
		    .alarms = in[i].alarms,
		    .empty_answers = in[i].empty,
		};
	return 0;
}

/* The broker's last hour and day. A broker that keeps none (an older one) answers the table
 * with an error: the page then says there is no history, rather than failing. */
static int fetch_history(struct eb_client *c, struct view *v)
{
	_cleanup_free_ struct eb_history *h = calloc(1, sizeof(*h));
	uint64_t now_ms = v->read_at_s * 1000;
	int r;

	if (!h)
		return -ENOMEM;
	r = eb_history_fetch(c, h);
	if (r < 0)
		return 0;
	r = series_from(&v->history[VIEW_HOUR], h->hour, h->n_hour, EB_HISTORY_HOUR_MAX, now_ms);
	if (r >= 0)
		r = series_from(&v->history[VIEW_DAY], h->day, h->n_day, EB_HISTORY_DAY_MAX,
		                now_ms);
	return r;
}

/* A broker on a local socket is on this machine; one over the network is named by its address,
 * which its operator chose. */
static void broker_host(struct eb_client *c, char *buf, size_t size)
{
	const char *at = eb_client_broker(c);

	if (strncmp(at, "unix:", 5) == 0 && gethostname(buf, size) == 0) {
		buf[size - 1] = '\0';
		return;
	}
	snprintf(buf, size, "%s", at);
}

int view_load(struct view *v, struct eb_client *c, bool with_history)
{
	struct timespec ts;
	int r;

	*v = (struct view){};
	clock_gettime(CLOCK_REALTIME, &ts);
	v->read_at_s = (uint64_t)ts.tv_sec;
	snprintf(v->version, sizeof(v->version), "%s", EB_VERSION);
	r = eb_client_connect(c);
	if (r >= 0)
		broker_host(c, v->host, sizeof(v->host));
	if (r >= 0)
		r = eb_client_status(c, &v->status);
	if (r >= 0)
		r = fetch(c, EB_REPORT_SESSIONS, (void **)&v->sessions, &v->n_sessions);
	if (r >= 0)
		r = fetch(c, EB_REPORT_USERS, (void **)&v->users, &v->n_users);
	if (r >= 0)
		r = fetch_counters(c, v);
	if (r >= 0 && with_history)
		r = fetch_history(c, v);
	/* Last: a broker that predates STATE closes on it, and what came before is still good. */
	if (r >= 0)
		v->has_state = eb_client_state(c, &v->state) >= 0;
	return r;
}

void view_done(struct view *v)
{
	free(v->sessions);
	free(v->users);
	for (int w = 0; w < _VIEW_WINDOW_MAX; w++)
		free(v->history[w].samples);
	*v = (struct view){};
}

const char *view_window_to_string(enum view_window w)
{
	switch (w) {
	case VIEW_HOUR:
		return "hour";
	case VIEW_DAY:
		return "day";
	case _VIEW_WINDOW_MAX:
	case _VIEW_WINDOW_INVALID:
		break;
	}
	return NULL;
}
