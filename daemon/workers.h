/* SPDX-License-Identifier: MIT */
/* Threads that run work off the event loop (a TLS handshake's expensive step) and hand it back:
 * a job's run() runs on a worker, its done() then on the loop, from an eventfd. Between the two
 * the job belongs to the workers; before and after, to the loop alone. Nothing the loop owns is
 * touched by a worker except through the job, so the pool, the queue and the accounting stay
 * single-threaded. */
#pragma once

#include <stdbool.h>

#include <systemd/sd-event.h>

#include "list.h"

struct workers;

struct work {
	struct eb_list_node node; /* in the workers' queue, or their done list */
	bool queued;              /* in the queue, no thread has taken it (the workers' lock) */
	/* On a worker thread. */
	void (*run)(struct work *w);
	/* On the event loop, once run() has returned, or without it (cancelled) when the workers
	 * stop first. It may free the job. */
	void (*done)(struct work *w, bool cancelled);
};

/* n threads (at least 1), their completions dispatched from e. Threads inherit the caller's
 * signal mask: create them after blocking the signals the loop handles. */
int workers_new(sd_event *e, unsigned n, struct workers **ret);
/* Hands w to a worker; w must not be with the workers already. */
void workers_submit(struct workers *ws, struct work *w);
/* Takes w back if no thread has taken it yet: true then, and neither run() nor done() will be
 * called for it. False when it is running or done (done() comes as usual). */
bool workers_cancel(struct workers *ws, struct work *w);
/* Stops the threads after the jobs they are running; jobs not yet started are cancelled. Every
 * job's done() runs before this returns; a job a done() hands back meanwhile is cancelled in
 * its turn. */
struct workers *workers_free(struct workers *ws);
unsigned workers_count(const struct workers *ws);
