/* SPDX-License-Identifier: MIT */
/* What the broker tells an admin about its sessions and users: the counters sessions keep for it,
 * and the pages of REPORT rows built from them. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

struct broker;
struct session;

/* A user's counters since start, its closed sessions included; the broker keeps one per user,
 * parallel to conf->users, and a reload carries them over by name. */
struct user_totals {
	uint64_t bytes_in, bits_in, bits_out, bytes_drbg;
	uint64_t empty_answers; /* GETs answered EMPTY */
};

/* A PUT of bytes whose claim (after the user's cap, before the broker's own test) was claim,
 * stuck when that test withheld its credit, credited what the pool took. */
void admin_count_put(struct session *s, size_t bytes, uint64_t claim, bool stuck,
                     uint64_t credited);
/* An EMPTY answered the session's GET: it starves from that GET's arrival until a DATA. */
void admin_count_empty(struct session *s);
/* A DATA of bytes carrying bits (0 for DRBG output) answered the session's GET. */
void admin_count_data(struct session *s, size_t bytes, uint32_t bits);
/* A HELLO, PUT or GET: when the session was last heard from. */
void admin_seen(struct session *s);

/* Builds the page of q's table that follows q->after into *ret, its rows in buf
 * (EB_REPORT_ROWS_SIZE bytes). -ENOMEM, or -EINVAL for a row the codec refuses (our bug). */
int admin_report(struct broker *b, const struct eb_msg_report_req *q, uint8_t *buf, size_t size,
                 struct eb_msg *ret);

/* The history (history.h): made, and sampled from its timer, every 10 s or every
 * $EB_HISTORY_INTERVAL_MS (docs/testing.md: tests only, 1..10000). Logs its errors. */
int admin_history_start(struct broker *b);
void admin_history_stop(struct broker *b);
