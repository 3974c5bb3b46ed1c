/* SPDX-License-Identifier: MIT */
/* Tests for daemon/scheduler.c alone: the order of the queue (small first, then first come, first
 * served, an answered sink behind the others), partial answers, quotas with their retry, the
 * EMPTY retry, and DRBG-mode reseed rationing. No broker, no pool, no clock: the view is built
 * here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../daemon/scheduler.h"
#include "macro.h"
#include "pool.h"

#define SEC 1000000ULL
/* Bits of level a pool block holds, as the pool says: what a 1-byte take costs. */
#define BLOCK eb_pool_block_cost(1)

static struct sched_request req(uint32_t bytes, uint64_t since)
{
	return (struct sched_request){.bits = bytes * 8, .since_usec = since};
}

/* A view of a pool holding blocks blocks at time now, with sources connected, and no quota. */
static struct sched_view view(uint64_t blocks, unsigned sources)
{
	return (struct sched_view){
	    .now_usec = 100 * SEC,
	    .level_bits = blocks * BLOCK,
	    .n_sources = sources,
	};
}

static void assert_order(const struct sched_queue *q, struct sched_request *const *want, size_t n)
{
	const struct sched_request *r = sched_queue_first(q);

	for (size_t i = 0; i < n; i++, r = eb_list_next(r, node))
		assert_ptr_equal(r, want[i]);
	assert_null(r);
}

static void test_small_first_then_arrival(void **state)
{
	struct sched_queue q = {};
	struct sched_request large1 = req(65536, 0), small1 = req(32, 1), large2 = req(1024, 2),
			     small2 = req(512, 3); /* 4096 bits: still small */

	(void)state;
	sched_queue_push(&q, &large1);
	sched_queue_push(&q, &small1);
	sched_queue_push(&q, &large2);
	sched_queue_push(&q, &small2);
	assert_order(&q, (struct sched_request *[]){&small1, &small2, &large1, &large2}, 4);

	/* Pushing what is queued changes nothing, removing what is not neither. */
	sched_queue_push(&q, &small1);
	assert_order(&q, (struct sched_request *[]){&small1, &small2, &large1, &large2}, 4);
	sched_queue_remove(&q, &large2);
	sched_queue_remove(&q, &large2);
	assert_false(sched_queue_has(&q, &large2));
	assert_order(&q, (struct sched_request *[]){&small1, &small2, &large1}, 3);
}

static void test_answered_sink_queues_behind(void **state)
{
	struct sched_queue q = {};
	struct sched_request a = req(32, 0), b = req(32, 1), c = req(32, 2);

	(void)state;
	sched_queue_push(&q, &a);
	sched_queue_push(&q, &b);
	sched_queue_push(&q, &c);
	/* a is answered and asks again: it goes behind b and c, which were waiting. */
	sched_queue_remove(&q, &a);
	sched_queue_push(&q, &a);
	assert_order(&q, (struct sched_request *[]){&b, &c, &a}, 3);
}

/* Users take turns: one user's many sessions get that user's share, and another user's one
 * session is served as often as all of them together. */
static void test_users_take_turns(void **state)
{
	struct sched_queue q = {};
	struct sched_request a[100], b = req(32, 0), c = req(32, 0), *r;
	unsigned served_a = 0, served_b = 0, k;

	(void)state;
	for (unsigned i = 0; i < ELEMENTSOF(a); i++) {
		a[i] = req(32, 0);
		sched_queue_push(&q, &a[i]);
	}
	b.user = 1;
	sched_queue_push(&q, &b);
	/* b arrived behind 100 of user 0's requests, and goes second. */
	assert_ptr_equal(eb_list_next(sched_queue_first(&q), node), &b);
	/* Served at the head and asking again at once, as sinks on a short pool do: the two users
	 * alternate, whatever the number of sessions. */
	for (k = 0; k < 40; k++) {
		r = sched_queue_first(&q);
		sched_queue_remove(&q, r);
		served_a += r->user == 0;
		served_b += r->user == 1;
		sched_queue_push(&q, r);
	}
	assert_int_equal(served_a, 20);
	assert_int_equal(served_b, 20);
	/* A third user arriving now is served in the next turn, not behind everyone. */
	c.user = 2;
	sched_queue_push(&q, &c);
	k = 0;
	for (r = sched_queue_first(&q); r != &c; r = eb_list_next(r, node))
		k++;
	assert_true(k <= 2);
	/* Within one user, first come, first served. */
	r = sched_queue_first(&q);
	while (r && r->user != 0)
		r = eb_list_next(r, node);
	assert_ptr_equal(r, &a[20]);
}

static void test_deadline(void **state)
{
	struct sched_queue q = {};
	struct sched_request large = req(65536, 5 * SEC), small = req(32, 7 * SEC);

	(void)state;
	assert_true(sched_queue_deadline(&q) == UINT64_MAX);
	sched_queue_push(&q, &large);
	sched_queue_push(&q, &small);
	/* The small one is ahead in the queue, but the large one's wait ends first. */
	assert_ptr_equal(sched_queue_first(&q), &small);
	assert_true(sched_queue_deadline(&q) == 5 * SEC + SCHEDULER_WAIT_USEC);
	sched_queue_remove(&q, &large);
	assert_true(sched_queue_deadline(&q) == 7 * SEC + SCHEDULER_WAIT_USEC);
}

static void test_full_answer(void **state)
{
	struct sched_view v = view(10, 1);
	struct sched_request r = req(32, 0);
	struct sched_decision d;

	(void)state;
	d = scheduler_decide(&v, &r, false);
	assert_int_equal(d.verdict, SCHED_DATA);
	assert_int_equal(d.bytes, 32);
	/* 640 bytes in 10 blocks: all of them. */
	r = req(640, 0);
	d = scheduler_decide(&v, &r, false);
	assert_int_equal(d.verdict, SCHED_DATA);
	assert_int_equal(d.bytes, 640);
}

static void test_partial_answer(void **state)
{
	struct sched_view v = view(9, 1);
	struct sched_request large = req(65536, 0), small = req(100, 0);
	struct sched_decision d;

	(void)state;
	/* 9 blocks back 576 bytes: at least 512, so the large request gets them. */
	d = scheduler_decide(&v, &large, false);
	assert_int_equal(d.verdict, SCHED_DATA);
	assert_int_equal(d.bytes, 576);
	/* 7 blocks back 448 bytes: below 512, not worth a round trip. */
	v = view(7, 1);
	d = scheduler_decide(&v, &large, false);
	assert_int_equal(d.verdict, SCHED_WAIT);
	/* A request under 512 bytes is answered in full or not at all: 1 block is 64 bytes. */
	v = view(1, 1);
	d = scheduler_decide(&v, &small, false);
	assert_int_equal(d.verdict, SCHED_WAIT);
	v = view(2, 1);
	d = scheduler_decide(&v, &small, false);
	assert_int_equal(d.verdict, SCHED_DATA);
	assert_int_equal(d.bytes, 100);
}

/* The scheduler answers with what the pool can then take: the bytes it grants cost no more than
 * the level by the pool's own rule, and one block more than the level holds is never left
 * unused when it was asked for. */
static void test_grants_what_the_pool_takes(void **state)
{
	(void)state;
	for (uint64_t level = 0; level <= 40 * BLOCK; level += BLOCK / 4) {
		for (uint32_t bytes = 1; bytes <= 4096; bytes = bytes * 3 + 1) {
			struct sched_view v = view(0, 1);
			struct sched_request r = req(bytes, 0);
			struct sched_decision d;

			v.level_bits = level;
			d = scheduler_decide(&v, &r, true);
			if (d.verdict != SCHED_DATA) {
				assert_int_equal(d.verdict, SCHED_EMPTY);
				continue;
			}
			assert_true(d.bytes <= bytes);
			assert_true(eb_pool_block_cost(d.bytes) <= level);
			if (d.bytes < bytes)
				assert_true(eb_pool_block_cost(d.bytes + 1) > level);
		}
	}
}

static void test_empty_retry(void **state)
{
	struct sched_view v = view(0, 1);
	struct sched_request r = req(32, 0), drbg = req(32, 0);
	struct sched_decision d;

	(void)state;
	drbg.drbg = true;
	d = scheduler_decide(&v, &r, false);
	assert_int_equal(d.verdict, SCHED_WAIT);
	/* Its wait over, the sink is told when to come back: soon while a source may refill. */
	d = scheduler_decide(&v, &r, true);
	assert_int_equal(d.verdict, SCHED_EMPTY);
	assert_int_equal(d.retry_ms, 250);
	d = scheduler_decide(&v, &drbg, true);
	assert_int_equal(d.verdict, SCHED_EMPTY);
	assert_int_equal(d.retry_ms, 250);
	/* Later when no source is connected. */
	v = view(0, 0);
	d = scheduler_decide(&v, &r, true);
	assert_int_equal(d.verdict, SCHED_EMPTY);
	assert_int_equal(d.retry_ms, 5000);
	/* A pool that can serve serves, wait over or not. */
	v = view(1, 0);
	d = scheduler_decide(&v, &r, true);
	assert_int_equal(d.verdict, SCHED_DATA);
}

static void test_quota(void **state)
{
	struct sched_quota q = {};
	struct sched_view v = view(1000, 1);
	struct sched_request small = req(32, 0), large = req(4096, 0), tiny = req(1, 0);
	struct sched_decision d;

	(void)state;
	v.quota = &q;
	v.quota_bits_per_hour = 3600; /* one bit a second */

	/* A bucket never used is full: 3600 bits, 7 whole blocks of 64 bytes. */
	assert_true(sched_quota_tokens(&q, 3600, v.now_usec) == 3600);
	d = scheduler_decide(&v, &small, false);
	assert_int_equal(d.verdict, SCHED_DATA);
	assert_int_equal(d.bytes, 32);
	/* A full bucket never holds the 8 blocks of a 512-byte partial answer: the floor is what
	 * it can pay, 7 blocks. */
	d = scheduler_decide(&v, &large, false);
	assert_int_equal(d.verdict, SCHED_DATA);
	assert_int_equal(d.bytes, eb_pool_block_backed(3600));
	/* The quota decides before the pool does. */
	sched_quota_charge(&q, 3600, v.now_usec, BLOCK);
	v.level_bits = 0;
	d = scheduler_decide(&v, &large, false);
	assert_int_equal(d.verdict, SCHED_QUOTA);
	/* 7 blocks (3584 bits), less the 3088 left, at one bit a second. */
	assert_int_equal(d.retry_ms,
	                 (eb_pool_block_cost(eb_pool_block_backed(3600)) - (3600 - BLOCK)) * 1000);
	v.level_bits = 1000 * BLOCK;

	/* Charged 3000 bits, the bucket holds 600: one block, 64 bytes, not the 100 asked. */
	q = (struct sched_quota){};
	sched_quota_charge(&q, 3600, v.now_usec, 3000);
	assert_true(sched_quota_tokens(&q, 3600, v.now_usec) == 600);
	small = req(100, 0);
	d = scheduler_decide(&v, &small, false);
	assert_int_equal(d.verdict, SCHED_QUOTA);
	/* 2 blocks (1024 bits), less the 600 held, at one bit a second. */
	assert_int_equal(d.retry_ms, (eb_pool_block_cost(100) - 600) * 1000);
	/* It refills at its rate, up to an hour's worth. */
	assert_true(sched_quota_tokens(&q, 3600, v.now_usec + 200 * SEC) == 800);
	assert_true(sched_quota_tokens(&q, 3600, v.now_usec + 24 * 3600 * SEC) == 3600);
	/* Refilled by 1.5 times its size, the bucket still holds its size, not more. */
	assert_true(sched_quota_tokens(&q, 3600, v.now_usec + 5400 * SEC) == 3600);
	v.now_usec += (eb_pool_block_cost(100) - 600) * SEC;
	d = scheduler_decide(&v, &small, false);
	assert_int_equal(d.verdict, SCHED_DATA);
	assert_int_equal(d.bytes, 100);

	/* A 1-byte GET costs what the pool spends on it, a whole block: a block's bits in the
	 * bucket serve it, one fewer do not. */
	q = (struct sched_quota){.tokens = (double)BLOCK - 1, .refilled_usec = v.now_usec};
	d = scheduler_decide(&v, &tiny, false);
	assert_int_equal(d.verdict, SCHED_QUOTA);
	assert_int_equal(d.retry_ms, 1000);
	q.tokens = (double)BLOCK;
	d = scheduler_decide(&v, &tiny, false);
	assert_int_equal(d.verdict, SCHED_DATA);
	assert_int_equal(d.bytes, 1);

	/* The quota limits a large request to the whole blocks it holds, when that is at least
	 * 512 bytes. */
	q = (struct sched_quota){};
	v.quota_bits_per_hour = 8000;
	large = req(4096, 0);
	d = scheduler_decide(&v, &large, false);
	assert_int_equal(d.verdict, SCHED_DATA);
	assert_int_equal(d.bytes, eb_pool_block_backed(8000));
	/* A charge never leaves the bucket below empty; the retry is at least 1 ms and at most an
	 * hour. */
	sched_quota_charge(&q, 8000, v.now_usec, 1000000);
	assert_true(sched_quota_tokens(&q, 8000, v.now_usec) == 0);
	v.quota_bits_per_hour = 600;
	q = (struct sched_quota){.tokens = 0, .refilled_usec = v.now_usec};
	d = scheduler_decide(&v, &large, false);
	assert_int_equal(d.verdict, SCHED_QUOTA);
	assert_int_equal(d.retry_ms, BLOCK * 3600000 / 600); /* a block at 600 bits an hour */
	/* A quota under a block can never pay for one, even full: QUOTA, an hour. */
	v.quota_bits_per_hour = BLOCK - 1;
	q = (struct sched_quota){};
	d = scheduler_decide(&v, &tiny, false);
	assert_int_equal(d.verdict, SCHED_QUOTA);
	assert_int_equal(d.retry_ms, 3600000);
	/* No quota: nothing is charged. */
	q = (struct sched_quota){.tokens = 5};
	sched_quota_charge(&q, 0, v.now_usec, 100);
	assert_true(q.tokens == 5);
}

static void test_drbg_reseed_rationing(void **state)
{
	struct sched_view v = view(0, 1);
	struct sched_request r = req(65536, 0);
	struct sched_decision d;

	(void)state;
	r.drbg = true;
	/* Never seeded and no block in the pool: nothing to serve from. */
	d = scheduler_decide(&v, &r, false);
	assert_int_equal(d.verdict, SCHED_WAIT);
	/* A block seeds it: all that was asked, whatever the pool's size. */
	v.level_bits = BLOCK;
	d = scheduler_decide(&v, &r, false);
	assert_int_equal(d.verdict, SCHED_DATA);
	assert_int_equal(d.bytes, 65536);
	assert_true(d.may_reseed);

	/* Seeded 5 s ago: it serves without a reseed, even from an empty pool. */
	v.drbg_seeded = true;
	v.drbg_reseed_usec = v.now_usec - 5 * SEC;
	v.level_bits = 0;
	d = scheduler_decide(&v, &r, false);
	assert_int_equal(d.verdict, SCHED_DATA);
	assert_false(d.may_reseed);
	/* After the interval, a reseed may spend a block again. */
	v.drbg_reseed_usec = v.now_usec - SCHEDULER_DRBG_RESEED_USEC;
	d = scheduler_decide(&v, &r, false);
	assert_int_equal(d.verdict, SCHED_DATA);
	assert_true(d.may_reseed);
}

static void test_drbg_reseed_quota(void **state)
{
	struct sched_quota q = {.tokens = 100, .refilled_usec = 100 * SEC};
	struct sched_view v = view(10, 1);
	struct sched_request r = req(32, 0);
	struct sched_decision d;

	(void)state;
	r.drbg = true;
	v.quota = &q;
	v.quota_bits_per_hour = 3600;
	/* Unseeded, and the quota cannot pay for the block a seed costs: QUOTA, retry when it can
	 * (412 bits at one a second). */
	d = scheduler_decide(&v, &r, false);
	assert_int_equal(d.verdict, SCHED_QUOTA);
	assert_int_equal(d.retry_ms, 412000);
	/* Seeded, the same sink is served without a reseed, and told nothing of the quota. */
	v.drbg_seeded = true;
	d = scheduler_decide(&v, &r, false);
	assert_int_equal(d.verdict, SCHED_DATA);
	assert_false(d.may_reseed);
	assert_int_equal(d.reseed_quota_retry_ms, 412000);
	/* A quota smaller than a block never pays for one, even full: no seed, no reseed. */
	v.drbg_seeded = false;
	v.quota_bits_per_hour = BLOCK - 1;
	q = (struct sched_quota){};
	d = scheduler_decide(&v, &r, false);
	assert_int_equal(d.verdict, SCHED_QUOTA);
	assert_int_equal(d.retry_ms, 3600000);
	v.drbg_seeded = true;
	d = scheduler_decide(&v, &r, false);
	assert_int_equal(d.verdict, SCHED_DATA);
	assert_false(d.may_reseed);
	v.drbg_seeded = false;
	q = (struct sched_quota){.tokens = 100, .refilled_usec = 100 * SEC};
	/* With enough in the bucket, the reseed is allowed. */
	q.tokens = 512;
	v.quota_bits_per_hour = 3600;
	d = scheduler_decide(&v, &r, false);
	assert_int_equal(d.verdict, SCHED_DATA);
	assert_true(d.may_reseed);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_small_first_then_arrival),
	    cmocka_unit_test(test_answered_sink_queues_behind),
	    cmocka_unit_test(test_users_take_turns),
	    cmocka_unit_test(test_deadline),
	    cmocka_unit_test(test_full_answer),
	    cmocka_unit_test(test_partial_answer),
	    cmocka_unit_test(test_grants_what_the_pool_takes),
	    cmocka_unit_test(test_empty_retry),
	    cmocka_unit_test(test_quota),
	    cmocka_unit_test(test_drbg_reseed_rationing),
	    cmocka_unit_test(test_drbg_reseed_quota),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
