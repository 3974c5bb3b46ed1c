/* SPDX-License-Identifier: MIT */
/* The broker's GET path: PUTs into the pool, GETs into the queue, and the run source that answers
 * the queue and tells sources to SLEEP or WAKE. It knows a waiting sink only by the struct
 * serve_request it queued. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "scheduler.h"

struct broker;

/* A sink's GET, and how to answer it. Whoever waits holds it; the request is queued from
 * serve_get() until answer() is called (once, from the run source, never from serve_get()'s own
 * stack) or serve_cancel() takes it back. */
struct serve_request {
	struct sched_request request;
	/* d is DATA (data holds d->bytes), QUOTA or EMPTY; NULL when the pool failed. */
	void (*answer)(struct serve_request *q, const struct sched_decision *d,
	               const uint8_t *data);
};

/* Conditions len bytes claiming claim_bits into the pool; returns the bits credited, or a
 * negative errno when the pool failed. */
int serve_put(struct broker *b, const uint8_t *data, size_t len, uint64_t claim_bits,
              uint64_t *ret_credited);
/* Queues a GET; it is answered from the run source (DATA, QUOTA or EMPTY) within
 * SCHEDULER_WAIT_USEC. */
void serve_get(struct broker *b, struct serve_request *q);
/* Takes a GET out of the queue unanswered (its session is closing); nothing happens for one
 * that is not queued. */
void serve_cancel(struct broker *b, struct serve_request *q);
/* Whether q waits: the one truth of it is the queue. */
bool serve_waiting(const struct broker *b, const struct serve_request *q);

/* The level moved, or its thresholds did: the zone now, flow control and the queue from the run
 * source. */
void serve_pool_changed(struct broker *b);
int serve_on_run(sd_event_source *src, void *userdata);
int serve_on_queue_timer(sd_event_source *src, uint64_t usec, void *userdata);
