/* SPDX-License-Identifier: MIT */
/* Which waiting sink is served next, how much it may have, and what it is told to wait: the queue
 * of GETs and pure decisions over it. No I/O, no clock, no pool: the broker hands in what it sees
 * (struct sched_view) and acts on what comes back (struct sched_decision). */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "list.h"

/* How long a SLEEP tells a source to rest at most; a WAKE ends it sooner. */
#define SCHEDULER_SLEEP_MS 60000
/* Requests up to this size are first-boot seeding and go before larger ones. */
#define SCHEDULER_SMALL_BITS 4096
/* A partial answer is not worth a round trip below this many bytes. */
#define SCHEDULER_MIN_PARTIAL 512
/* A GET the pool cannot back waits this long in the queue before EMPTY. */
#define SCHEDULER_WAIT_USEC (250 * 1000ULL)
/* EMPTY's retry hint: soon while a source may refill the pool, later when none is connected. */
#define SCHEDULER_EMPTY_RETRY_MS      250
#define SCHEDULER_EMPTY_RETRY_IDLE_MS 5000
/* QUOTA's longest retry hint: a full bucket holds an hour's worth. */
#define SCHEDULER_QUOTA_RETRY_MAX_MS 3600000u
/* DRBG mode spends a pool block on a reseed at most this often, whoever draws: output is
 * unlimited, the credited entropy it costs is not. */
#define SCHEDULER_DRBG_RESEED_USEC (10 * 1000000ULL)

/* One sink's GET. The waiting sink's session holds it; only the sched_queue_*() functions write
 * its queue fields (node, turn, seq). */
struct sched_request {
	uint32_t bits;       /* wanted */
	bool drbg;           /* DRBG output, else full entropy */
	int user;            /* index of the sink's user, whose quota pays */
	uint64_t since_usec; /* when the GET arrived: its wait ends SCHEDULER_WAIT_USEC later */

	struct eb_list_node node; /* in the queue, when it is */
	uint64_t turn;            /* its user's turn: the order among users */
	uint64_t seq;             /* arrival order in the queue */
};

/* Waiting GETs in the order they will be served. */
struct sched_queue {
	struct eb_list list; /* of sched_request.node; zeroed: empty */
	uint64_t seq;
	uint64_t turn; /* the turn served last: a request leaving from the head ends its turn */
};

/* Small requests first (a VM waiting to boot needs 256 bits, not a megabyte), then users in turn,
 * then first come, first served. A request's turn is one after the last of its user's requests
 * waiting in its class, or after the turn being served if none waits: each user with requests
 * waiting has one in the next turn, so a user's many sessions get that user's share, not one
 * each, and a sink that was answered and asks again queues behind the others of its turn. */
void sched_queue_push(struct sched_queue *q, struct sched_request *r);
/* Takes r out of the queue; nothing happens when it is not in it. */
void sched_queue_remove(struct sched_queue *q, struct sched_request *r);
/* Whether r waits in q. */
bool sched_queue_has(const struct sched_queue *q, const struct sched_request *r);
/* The request served next; NULL when nobody waits. */
struct sched_request *sched_queue_first(const struct sched_queue *q);
/* When the first wait in the queue ends; UINT64_MAX when nobody waits. */
uint64_t sched_queue_deadline(const struct sched_queue *q);

/* A user's quota: a bucket of pool bits (what the pool spends for the user, whole blocks),
 * refilled at its hourly rate up to one hour's worth. A bucket never used is full. */
struct sched_quota {
	double tokens;
	uint64_t refilled_usec; /* 0: never used */
};

/* Bits the bucket holds at now, for a rate of bits_per_hour (0: no quota). */
double sched_quota_tokens(const struct sched_quota *q, uint64_t bits_per_hour, uint64_t now);
/* Refills the bucket to now, then takes bits from it (never below empty). */
void sched_quota_charge(struct sched_quota *q, uint64_t bits_per_hour, uint64_t now, uint64_t bits);

/* What the broker sees when it asks for a decision. */
struct sched_view {
	uint64_t now_usec;
	uint64_t level_bits;          /* the pool's level */
	unsigned n_sources;           /* sources connected */
	bool drbg_seeded;             /* a DRBG-mode request has reseeded the pool's DRBG ... */
	uint64_t drbg_reseed_usec;    /* ... last at this time */
	uint64_t quota_bits_per_hour; /* the requesting user's; 0: none */
	const struct sched_quota *quota;
};

enum sched_verdict {
	SCHED_DATA,  /* serve bytes now */
	SCHED_QUOTA, /* the user's quota is the limit: QUOTA, retry after retry_ms */
	SCHED_WAIT,  /* the pool is short: keep waiting */
	SCHED_EMPTY, /* the wait is over and the pool still short: EMPTY, retry after retry_ms */
	_SCHED_VERDICT_MAX,
	_SCHED_VERDICT_INVALID = -EINVAL,
};

struct sched_decision {
	enum sched_verdict verdict;
	size_t bytes;      /* DATA: how many */
	uint32_t retry_ms; /* QUOTA, EMPTY */
	bool may_reseed;   /* DATA in DRBG mode: the pool may spend a block on a reseed now */
	uint32_t reseed_quota_retry_ms; /* DRBG mode: when the quota could pay for a reseed, if it
	                                 * is what stands in the way (else 0) */
};

/* What request r gets now. final: its wait is over, so the answer is never WAIT. A full-entropy
 * GET may be answered in part, never below SCHEDULER_MIN_PARTIAL bytes (or all that was asked);
 * a DRBG GET is answered in full from the DRBG once it is seeded, and may let the pool reseed it
 * at most once per SCHEDULER_DRBG_RESEED_USEC, when the quota can pay for a block. */
struct sched_decision scheduler_decide(const struct sched_view *v, const struct sched_request *r,
                                       bool final);
/* What a request the pool cannot back gets: WAIT, or EMPTY once its wait is over. */
struct sched_decision scheduler_pool_short(const struct sched_view *v, bool final);
