/* SPDX-License-Identifier: MIT */
/* A thread that keeps the EGD sink's locked buffer full from a broker and passes EGD writes on. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client.h"

struct egd_refill;

struct egd_refill_options {
	struct eb_client_options client; /* brokers, user, key file; roles and kind are set here */
	size_t capacity;                 /* bytes buffered (EGD_BUFFER_MIN..EGD_BUFFER_MAX) */
	size_t low_water;                /* refill when fewer bytes than this are left */
	size_t donate_max;               /* bytes of EGD writes queued for the broker at most */
};

struct egd_refill_stats {
	uint64_t fetched;        /* bytes the broker delivered with full credit */
	uint64_t donated;        /* bytes of EGD writes passed on */
	uint64_t donated_claim;  /* bits claimed for them */
	uint64_t donate_dropped; /* bytes of EGD writes read and dropped */
	bool may_donate;         /* the broker accepted the user as a source */
	bool failed;             /* the broker refused the user: nothing will ever arrive */
	char link[400];          /* "Connected to X" or "Not connected: REASON", for STATUS= */
};

/* Creates the broker clients (logging what is wrong with the options) and the locked buffer. */
int egd_refill_new(const struct egd_refill_options *o, struct egd_refill **ret);
int egd_refill_start(struct egd_refill *r);
/* Stops the thread: 0 once it has ended and everything is freed, -ETIMEDOUT when it is stuck in
 * a broker call (the caller should then wipe with egd_refill_wipe() and exit). */
int egd_refill_stop_and_free(struct egd_refill *r, int timeout_ms);
void egd_refill_wipe(struct egd_refill *r);

/* An eventfd that becomes readable when bytes arrived or the thread failed; egd_refill_ack()
 * drains it. */
int egd_refill_fd(const struct egd_refill *r);
void egd_refill_ack(struct egd_refill *r);

/* Moves up to n buffered bytes into dst; wakes the thread when the level falls below the low
 * water mark. Returns how many. */
size_t egd_refill_take(struct egd_refill *r, void *dst, size_t n);
size_t egd_refill_level(struct egd_refill *r);
/* Queues an EGD write for the broker: 0, -EPERM when the user may not donate, -ENOBUFS when the
 * queue is full. Either way the bytes are counted and the caller's copy is its to wipe. */
int egd_refill_donate(struct egd_refill *r, const void *data, size_t n, uint32_t claim_bits);
void egd_refill_stats(struct egd_refill *r, struct egd_refill_stats *ret);
