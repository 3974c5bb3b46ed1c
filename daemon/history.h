/* SPDX-License-Identifier: MIT */
/* The broker's history: a fixed ring of samples of the last hour and day, and per-source and
 * per-sink totals over the same windows (docs/protocol.md, the history table). Pure: the caller
 * brings the clock and the counters, so a test drives it tick by tick. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

struct history;

/* What the broker reads at the end of each interval: gauges and its totals since start. */
struct history_gauges {
	uint64_t end_ms; /* CLOCK_REALTIME, ms since the epoch */
	uint64_t pool_bits;
	uint64_t bits_in,
	    bits_out; /* since start, as in STATUS: the history keeps the differences */
	uint32_t sources, sinks, admins;
};

enum history_dir {
	HISTORY_SOURCE,
	HISTORY_SINK,
	_HISTORY_DIR_MAX,
	_HISTORY_DIR_INVALID = -EINVAL,
};

/* interval_ms is what a hour sample spans (EB_HISTORY_FINE_MS but under a test's interval);
 * a day sample spans six of them. */
int history_new(uint32_t interval_ms, struct history **ret);
struct history *history_free(struct history *h);
static inline void history_freep(struct history **h)
{
	if (*h)
		history_free(*h);
}
/* The bytes a history takes, all of it allocated by history_new(). */
size_t history_size(void);
uint32_t history_interval_ms(const struct history *h);

/* What happened during the current interval. now_usec is CLOCK_MONOTONIC, for idle_s. */
void history_count(struct history *h, enum history_dir dir, const char *user, const char *kind,
                   uint64_t bits, uint64_t now_usec);
void history_count_alarm(struct history *h);
void history_count_empty(struct history *h);

/* Ends the current interval: a sample of the hour, every sixth a sample of the day. */
void history_tick(struct history *h, const struct history_gauges *g);

/* The page of the history table after after: up to EB_REPORT_ROWS_MAX rows into buf. */
int history_page(const struct history *h, uint64_t after, uint64_t now_usec, uint8_t *buf,
                 size_t size, struct eb_msg_report *ret);
