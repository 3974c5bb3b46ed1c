/* SPDX-License-Identifier: MIT */
/* What eb-metrics reads from the broker for one answer: the status, the sessions, users and
 * counters tables, and the pool's history, over the admin protocol. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"
#include "report.h"

struct eb_client;

/* One sample of the broker's history: what happened in one interval. */
struct view_sample {
	uint64_t pool_bits;         /* the level at the interval's end */
	uint64_t bits_in, bits_out; /* credited, and served as full entropy, during it */
	uint32_t sources, sinks;    /* sessions at its end */
	uint32_t alarms;            /* health alarms raised during it */
	uint32_t empty_answers;     /* GETs answered EMPTY during it */
};

/* One window of the history: n samples of interval_ms each (shorter under the broker's
 * test-only interval), oldest first, the last ending age_ms before the view was read. */
struct view_series {
	size_t slots; /* the window's length in samples: what the broker keeps */
	uint32_t interval_ms;
	uint64_t age_ms;
	size_t n;
	struct view_sample *samples;
};

enum view_window {
	VIEW_HOUR,
	VIEW_DAY,
	_VIEW_WINDOW_MAX,
	_VIEW_WINDOW_INVALID = -EINVAL,
};

struct view {
	struct eb_msg_status status;
	struct eb_report_session *sessions;
	size_t n_sessions;
	struct eb_report_user *users;
	size_t n_users;
	/* The counters table, by id; 0 for one the broker did not send. */
	uint64_t counters[_EB_COUNTER_MAX];
	/* Empty (n == 0) from a broker that keeps no history. */
	struct view_series history[_VIEW_WINDOW_MAX];
	/* The drain, the reloads, the upstream; has_state false from a broker that predates STATE.
	 */
	struct eb_msg_state state;
	bool has_state;
	uint64_t broker_id;
	/* Which machine: this one's name when the broker was asked over a local socket, else the
	 * address it was asked at. */
	char host[256];
	char version[32];
	uint64_t read_at_s; /* CLOCK_REALTIME when read, for the times of day on the page */
};

/* Reads what the answer needs: the history only when with_history. Returns 0 or the client's
 * negative errno; -EPROTO for a report that is not what a broker sends. */
int view_load(struct view *v, struct eb_client *c, bool with_history);
void view_done(struct view *v);

const char *view_window_to_string(enum view_window w);
