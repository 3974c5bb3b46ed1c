/* SPDX-License-Identifier: MIT */
#include "scheduler.h"

#include <math.h>
#include <stdbool.h>

#include "macro.h"
#include "pool.h"

static bool is_small(const struct sched_request *r)
{
	return r->bits <= SCHEDULER_SMALL_BITS;
}

static bool goes_before(const struct sched_request *a, const struct sched_request *b)
{
	if (is_small(a) != is_small(b))
		return is_small(a);
	if (a->turn != b->turn)
		return a->turn < b->turn;
	return a->seq < b->seq;
}

void sched_queue_push(struct sched_queue *q, struct sched_request *r)
{
	struct sched_request *at;
	uint64_t turn = q->turn;

	if (sched_queue_has(q, r))
		return;
	/* Users take turns, not sessions (fair queuing by user, each request one unit): a request
	 * comes one turn after its user's last one waiting in its class, and never before the
	 * turn being served. A user's many sessions thus take turns among themselves, and
	 * another user's one session is served as often as all of them. */
	eb_list_foreach(at, &q->list, node) {
		if (at->user == r->user && is_small(at) == is_small(r))
			turn = MAX(turn, at->turn);
	}
	r->turn = turn + 1;
	r->seq = ++q->seq;
	eb_list_foreach(at, &q->list, node) {
		if (goes_before(r, at))
			break;
	}
	eb_list_insert_before(&q->list, at ? &at->node : NULL, &r->node);
}

void sched_queue_remove(struct sched_queue *q, struct sched_request *r)
{
	/* The head leaving is the turn being served moving on. */
	if (sched_queue_first(q) == r)
		q->turn = MAX(q->turn, r->turn);
	eb_list_remove(&q->list, &r->node);
}

bool sched_queue_has(const struct sched_queue *q, const struct sched_request *r)
{
	return eb_list_contains(&q->list, &r->node);
}

struct sched_request *sched_queue_first(const struct sched_queue *q)
{
	return eb_list_first(&q->list, struct sched_request, node);
}

uint64_t sched_queue_deadline(const struct sched_queue *q)
{
	const struct sched_request *r;
	uint64_t first = UINT64_MAX;

	/* Requests arrive in time order, but small ones are sorted ahead: the earliest arrival
	 * may be anywhere, and the queue is as long as the sinks connected. */
	eb_list_foreach(r, &q->list, node)
		first = MIN(first, r->since_usec);
	return first == UINT64_MAX ? UINT64_MAX : first + SCHEDULER_WAIT_USEC;
}

double sched_quota_tokens(const struct sched_quota *q, uint64_t bits_per_hour, uint64_t now)
{
	double cap = (double)bits_per_hour, tokens = q->tokens;

	if (q->refilled_usec == 0)
		return cap;
	if (now > q->refilled_usec) {
		tokens += cap * (double)(now - q->refilled_usec) / 3.6e9;
		if (tokens > cap)
			tokens = cap;
	}
	return tokens;
}

void sched_quota_charge(struct sched_quota *q, uint64_t bits_per_hour, uint64_t now, uint64_t bits)
{
	if (bits_per_hour == 0)
		return;
	q->tokens = sched_quota_tokens(q, bits_per_hour, now) - (double)bits;
	if (q->tokens < 0)
		q->tokens = 0;
	q->refilled_usec = now;
}

/* Milliseconds until the bucket holds bits again at its hourly rate; at least 1, at most an
 * hour. */
static uint32_t quota_retry_ms(uint64_t bits_per_hour, double tokens, double bits)
{
	double ms = ceil((bits - tokens) * 3.6e6 / (double)bits_per_hour);

	if (ms > SCHEDULER_QUOTA_RETRY_MAX_MS)
		return SCHEDULER_QUOTA_RETRY_MAX_MS;
	return ms < 1 ? 1 : (uint32_t)ms;
}

struct sched_decision scheduler_pool_short(const struct sched_view *v, bool final)
{
	if (!final)
		return (struct sched_decision){.verdict = SCHED_WAIT};
	/* With no source connected there is nothing to wait for soon. */
	return (struct sched_decision){
	    .verdict = SCHED_EMPTY,
	    .retry_ms = v->n_sources > 0 ? SCHEDULER_EMPTY_RETRY_MS : SCHEDULER_EMPTY_RETRY_IDLE_MS,
	};
}

static struct sched_decision decide_full(const struct sched_view *v, const struct sched_request *r,
                                         bool final)
{
	size_t want = r->bits / 8, hi = want, n, floor_n = MIN(want, (size_t)SCHEDULER_MIN_PARTIAL);
	/* Whole blocks back a take (eb_pool_block_cost()): the level backs this many bytes. */
	size_t backed = eb_pool_block_backed(v->level_bits);

	if (v->quota_bits_per_hour > 0) {
		double tokens = sched_quota_tokens(v->quota, v->quota_bits_per_hour, v->now_usec);
		/* The quota pays what the pool spends, whole blocks, so a 1-byte GET costs a block
		 * like a 64-byte one: it grants the bytes of the blocks it can pay for. A full
		 * bucket pays for this many, and a partial answer's floor is never more than that,
		 * else a quota under 4096 bits an hour could never be drawn. */
		size_t allowed = eb_pool_block_backed((uint64_t)tokens);
		size_t most = eb_pool_block_backed(v->quota_bits_per_hour);

		floor_n = MIN(floor_n, most);
		/* The quota decides before the pool: a sink over it is told when to come back,
		 * whatever the level, instead of waiting for a pool it may not draw from. A quota
		 * under a block never pays for one: its retry is the longest, an hour. */
		if (most == 0)
			return (struct sched_decision){.verdict = SCHED_QUOTA,
			                               .retry_ms = SCHEDULER_QUOTA_RETRY_MAX_MS};
		if (allowed < floor_n) {
			double cost = (double)eb_pool_block_cost(floor_n);

			return (struct sched_decision){
			    .verdict = SCHED_QUOTA,
			    .retry_ms = quota_retry_ms(v->quota_bits_per_hour, tokens, cost),
			};
		}
		hi = MIN(hi, allowed);
	}
	n = MIN(hi, backed);
	if (n == 0 || n < floor_n)
		return scheduler_pool_short(v, final);
	return (struct sched_decision){.verdict = SCHED_DATA, .bytes = n};
}

static struct sched_decision decide_drbg(const struct sched_view *v, const struct sched_request *r,
                                         bool final)
{
	struct sched_decision d = {.verdict = SCHED_DATA, .bytes = r->bits / 8};
	bool due =
	    !v->drbg_seeded || v->now_usec >= v->drbg_reseed_usec + SCHEDULER_DRBG_RESEED_USEC;

	d.may_reseed = due;
	if (due && v->quota_bits_per_hour > 0) {
		double tokens = sched_quota_tokens(v->quota, v->quota_bits_per_hour, v->now_usec);
		/* A reseed costs a whole block, which a quota smaller than a block never holds:
		 * such a user never makes the pool reseed (nor seed) the DRBG. */
		double price = (double)eb_pool_block_cost(1);

		if (tokens < price) {
			d.may_reseed = false;
			d.reseed_quota_retry_ms =
			    (double)v->quota_bits_per_hour < price
				? SCHEDULER_QUOTA_RETRY_MAX_MS
				: quota_retry_ms(v->quota_bits_per_hour, tokens, price);
		}
	}
	if (v->drbg_seeded)
		return d; /* a seeded DRBG serves with or without its reseed */
	/* Unseeded, the DRBG needs a block from the pool, and the right to spend it. */
	if (d.reseed_quota_retry_ms > 0)
		return (struct sched_decision){.verdict = SCHED_QUOTA,
		                               .retry_ms = d.reseed_quota_retry_ms};
	if (!d.may_reseed || v->level_bits < eb_pool_block_cost(1))
		return scheduler_pool_short(v, final);
	return d;
}

struct sched_decision scheduler_decide(const struct sched_view *v, const struct sched_request *r,
                                       bool final)
{
	return r->drbg ? decide_drbg(v, r, final) : decide_full(v, r, final);
}
