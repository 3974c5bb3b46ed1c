/* SPDX-License-Identifier: MIT */
#include "scheduler.h"

#include <math.h>
#include <stdbool.h>

#include "broker.h"
#include "macro.h"
#include "pool.h"
#include "session.h"

/* Small requests first (a VM waiting to boot needs 256 bits, not a megabyte), then first come,
 * first served: a sink that was answered queues again behind the others. */
static bool goes_before(const struct session *a, const struct session *b)
{
	bool a_small = a->get.bits <= SCHEDULER_SMALL_BITS,
	     b_small = b->get.bits <= SCHEDULER_SMALL_BITS;

	if (a_small != b_small)
		return a_small;
	return a->get_seq < b->get_seq;
}

void scheduler_enqueue(struct broker *b, struct session *s)
{
	struct session **p;

	if (s->queued)
		return;
	s->get_seq = ++b->waitq_seq;
	for (p = &b->waitq; *p && !goes_before(s, *p); p = &(*p)->wnext)
		;
	s->wnext = *p;
	*p = s;
	s->queued = true;
	/* The session's timer answers EMPTY if the pool stays short. */
	(void)sd_event_source_set_time(s->timer, s->get_since_usec + SESSION_GET_WAIT_USEC);
	(void)sd_event_source_set_enabled(s->timer, SD_EVENT_ONESHOT);
}

void scheduler_dequeue(struct broker *b, struct session *s)
{
	if (!s->queued)
		return;
	for (struct session **p = &b->waitq; *p; p = &(*p)->wnext)
		if (*p == s) {
			*p = s->wnext;
			break;
		}
	s->wnext = NULL;
	s->queued = false;
	(void)sd_event_source_set_enabled(s->timer, SD_EVENT_OFF);
}

void scheduler_run(struct broker *b)
{
	/* Serving a GET changes the pool, which calls us again: the outer loop goes on. */
	if (b->scheduling)
		return;
	b->scheduling = true;
	while (b->waitq) {
		struct session *s = b->waitq;

		scheduler_dequeue(b, s);
		if (!session_serve_get(s, false)) {
			/* Back to the head, where it was: it keeps its turn. */
			s->wnext = b->waitq;
			b->waitq = s;
			s->queued = true;
			(void)sd_event_source_set_enabled(s->timer, SD_EVENT_ONESHOT);
			break;
		}
		/* Flush and read on from the event loop, not from here: we may be inside
		 * another session's handler. */
		(void)sd_event_source_set_enabled(s->defer, SD_EVENT_ONESHOT);
	}
	b->scheduling = false;
}

static void refill(struct broker *b, const struct eb_user *u, struct user_state *st)
{
	uint64_t now = broker_now(b);
	double cap = (double)u->quota_bits_per_hour;

	if (st->quota_refilled_usec == 0) {
		st->quota_tokens = cap;
	} else if (now > st->quota_refilled_usec) {
		st->quota_tokens += cap * (double)(now - st->quota_refilled_usec) / 3.6e9;
		if (st->quota_tokens > cap)
			st->quota_tokens = cap;
	}
	st->quota_refilled_usec = now;
}

/* Milliseconds until the user's quota holds bits again, at its hourly rate; at most an hour. */
static uint32_t quota_retry_ms(const struct eb_user *u, const struct user_state *st, double bits)
{
	double ms = ceil((bits - st->quota_tokens) * 3.6e6 / (double)u->quota_bits_per_hour);

	return (uint32_t)(ms < 1 ? 1 : ms > 3.6e6 ? 3.6e6 : ms);
}

size_t scheduler_affordable(struct broker *b, struct session *s, const struct eb_user *u,
                            size_t want, uint32_t *ret_quota_retry_ms)
{
	uint64_t level = eb_pool_level(b->pool);
	size_t lo = 0, hi = want,
	       floor_n = want < SCHEDULER_MIN_PARTIAL ? want : SCHEDULER_MIN_PARTIAL;

	*ret_quota_retry_ms = 0;
	if (u->quota_bits_per_hour > 0) {
		struct user_state *st = &b->users[s->user];
		size_t allowed;

		refill(b, u, st);
		allowed = (size_t)(st->quota_tokens / 8);
		if (allowed < floor_n) {
			*ret_quota_retry_ms = quota_retry_ms(u, st, (double)floor_n * 8);
			return 0;
		}
		hi = MIN(hi, allowed);
	}
	if (eb_pool_cost_bits(b->pool, hi) <= level)
		return hi;
	/* The largest n the level backs: cost grows with n, so bisect. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo + 1) / 2;

		if (eb_pool_cost_bits(b->pool, mid) <= level)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo >= floor_n ? lo : 0;
}

void scheduler_charge(struct broker *b, struct session *s, const struct eb_user *u, size_t n)
{
	if (u->quota_bits_per_hour > 0) {
		struct user_state *st = &b->users[s->user];

		st->quota_tokens -= (double)n * 8;
		if (st->quota_tokens < 0)
			st->quota_tokens = 0;
	}
}

uint32_t scheduler_empty_retry_ms(const struct broker *b)
{
	/* With no source connected there is nothing to wait for soon. */
	return b->n_sources > 0 ? 250 : 5000;
}

bool scheduler_drbg_may_reseed(struct broker *b, struct session *s, const struct eb_user *u,
                               uint32_t *ret_quota_retry_ms)
{
	uint64_t block = eb_pool_cost_bits(b->pool, 1);

	*ret_quota_retry_ms = 0;
	if (b->drbg_reseeded && broker_now(b) < b->drbg_reseed_usec + SCHEDULER_DRBG_RESEED_USEC)
		return false;
	if (u->quota_bits_per_hour > 0) {
		struct user_state *st = &b->users[s->user];
		/* A quota smaller than a block can never hold one: it pays what it can hold, a
		 * whole hour's worth, and the reseed takes it all (scheduler_charge() stops at 0).
		 */
		double price = MIN((double)block, (double)u->quota_bits_per_hour);

		refill(b, u, st);
		if (st->quota_tokens < price) {
			*ret_quota_retry_ms = quota_retry_ms(u, st, price);
			return false;
		}
	}
	return true;
}

void scheduler_drbg_reseeded(struct broker *b, struct session *s, const struct eb_user *u,
                             uint64_t bits)
{
	b->drbg_reseeded = true;
	b->drbg_reseed_usec = broker_now(b);
	scheduler_charge(b, s, u, (size_t)(bits / 8));
}
