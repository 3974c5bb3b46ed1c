/* SPDX-License-Identifier: MIT */
/* Which sink is served next, how much it may have, and what it is told to wait. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct broker;
struct session;
struct eb_user;

/* How long a SLEEP tells a source to rest at most; a WAKE ends it sooner. */
#define SCHEDULER_SLEEP_MS 60000
/* Requests up to this size are first-boot seeding and go before larger ones. */
#define SCHEDULER_SMALL_BITS 4096
/* A partial answer is not worth a round trip below this many bytes. */
#define SCHEDULER_MIN_PARTIAL 512

void scheduler_enqueue(struct broker *b, struct session *s);
void scheduler_dequeue(struct broker *b, struct session *s);
/* Answers waiting GETs in order while the pool can; stops at the first it cannot. */
void scheduler_run(struct broker *b);

/* Bytes of a full-entropy GET for want bytes the session may have now: limited by the pool and
 * the user's quota. 0 with *ret_quota_retry_ms > 0 when the quota is the limit. */
size_t scheduler_affordable(struct broker *b, struct session *s, const struct eb_user *u,
                            size_t want, uint32_t *ret_quota_retry_ms);
void scheduler_charge(struct broker *b, struct session *s, const struct eb_user *u, size_t n);
uint32_t scheduler_empty_retry_ms(const struct broker *b);

/* DRBG mode spends a pool block on a reseed at most this often, whoever draws: output is
 * unlimited, the credited entropy it costs is not. */
#define SCHEDULER_DRBG_RESEED_USEC (10 * 1000000ULL)
/* Whether a DRBG-mode GET may let the pool reseed its DRBG now: the interval has passed (or it
 * was never seeded) and the user's quota can pay for a block. When only the quota stands in the
 * way, *ret_quota_retry_ms says when it could (else 0). */
bool scheduler_drbg_may_reseed(struct broker *b, struct session *s, const struct eb_user *u,
                               uint32_t *ret_quota_retry_ms);
/* Records a reseed that took bits of pool level, charged to the user who drew. */
void scheduler_drbg_reseeded(struct broker *b, struct session *s, const struct eb_user *u,
                             uint64_t bits);
