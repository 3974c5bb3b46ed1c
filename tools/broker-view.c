/* SPDX-License-Identifier: MIT */
/* The broker's state for one answer of eb-metrics, read over the admin protocol. */
#include "broker-view.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* The history, until the broker serves it: none. */
static int fetch_history(struct eb_client *c, struct view *v)
{
	(void)c;
	(void)v;
	return 0;
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
		r = eb_client_status(c, &v->status);
	if (r >= 0)
		r = fetch(c, EB_REPORT_SESSIONS, (void **)&v->sessions, &v->n_sessions);
	if (r >= 0)
		r = fetch(c, EB_REPORT_USERS, (void **)&v->users, &v->n_users);
	if (r >= 0 && with_history)
		r = fetch_history(c, v);
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
