/* SPDX-License-Identifier: MIT */
/* The broker's history in the loop: its timer, and the gauges and totals each sample reads. */
#include "admin-history.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "broker.h"
#include "cli.h"
#include "history.h"
#include "list.h"
#include "log.h"
#include "pool.h"
#include "report.h"

/* A test compresses the hour with this (docs/testing.md); nothing else should set it. */
#define INTERVAL_ENV "EB_HISTORY_INTERVAL_MS"
/* sd-event's default slack is 250 ms, more than a test's whole interval. */
#define TIMER_ACCURACY_USEC 1000

static uint64_t realtime_ms(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_REALTIME, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void read_gauges(struct broker *b, struct history_gauges *ret)
{
	struct eb_msg_status st;
	const struct registry_entry *e;

	broker_fill_status(b, 0, &st);
	*ret = (struct history_gauges){
	    .end_ms = realtime_ms(),
	    .pool_bits = st.pool_bits,
	    .bits_in = st.bits_in,
	    .bits_out = st.bits_out,
	};
	/* Established sessions by role, as the users' page counts them: once a sample, not per
	 * frame, so a walk is cheap enough. */
	registry_foreach_ready(e, &b->registry) {
		ret->sources += !!(e->roles & EB_ROLE_SOURCE);
		ret->sinks += !!(e->roles & EB_ROLE_SINK);
		ret->admins += !!(e->roles & EB_ROLE_ADMIN);
	}
}

static int on_history_timer(sd_event_source *src, uint64_t usec, void *userdata)
{
	struct broker *b = userdata;
	struct history_gauges g;

	read_gauges(b, &g);
	history_tick(b->history, &g);
	(void)sd_event_source_set_time(src,
	                               usec + (uint64_t)history_interval_ms(b->history) * 1000);
	return 0;
}

static int interval_from_env(uint32_t *ret)
{
	const char *e = getenv(INTERVAL_ENV);
	unsigned long long v;
	int r;

	*ret = EB_HISTORY_FINE_MS;
	if (!e)
		return 0;
	r = eb_cli_parse_u64(e, 1, EB_HISTORY_FINE_MS, &v);
	if (r < 0)
		return log_error_errno(
		    r, "Invalid $%s \"%s\": expected 1-%u milliseconds (tests only)", INTERVAL_ENV,
		    e, EB_HISTORY_FINE_MS);
	*ret = (uint32_t)v;
	log_notice("History sampled every %u ms, from $%s (tests only)", *ret, INTERVAL_ENV);
	return 0;
}

int admin_history_start(struct broker *b)
{
	uint32_t interval_ms;
	int r;

	r = interval_from_env(&interval_ms);
	if (r < 0)
		return r;
	r = history_new(interval_ms, &b->history);
	if (r < 0)
		return log_error_errno(r, "Failed to allocate the history: %m");
	log_debug("History: %zu bytes, a sample every %u ms", history_size(), interval_ms);
	r = sd_event_add_time_relative(b->event, &b->history_timer, CLOCK_MONOTONIC,
	                               (uint64_t)interval_ms * 1000, TIMER_ACCURACY_USEC,
	                               on_history_timer, b);
	/* On, not one-shot: the handler sets the next time. */
	if (r >= 0)
		r = sd_event_source_set_enabled(b->history_timer, SD_EVENT_ON);
	if (r < 0)
		return log_error_errno(r, "Failed to set up the history's timer: %m");
	return 0;
}

void admin_history_stop(struct broker *b)
{
	b->history_timer = sd_event_source_disable_unref(b->history_timer);
	b->history = history_free(b->history);
}
