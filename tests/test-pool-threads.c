/* SPDX-License-Identifier: MIT */
/* The pool with one thread adding while another takes, as the broker runs it: every credited bit
 * handed out came in, the level never passes capacity, nothing is lost or served twice. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pool.h"

#define CAPACITY         (1u << 16)
#define ROUNDS           3000
#define BLOCK_BITS       512
#define CREDIT_PER_BLOCK (BLOCK_BITS + EB_POOL_OVERHEAD_BITS)

struct shared {
	struct eb_pool *pool;
	uint64_t credited_in; /* written by the adder, read after join */
	uint64_t full_out;    /* written by the taker, read after join */
	volatile int adder_done;
};

static void *adder(void *userdata)
{
	struct shared *sh = userdata;
	uint8_t buf[70000];
	uint64_t x = 0x9e3779b97f4a7c15u;

	for (unsigned i = 0; i < ROUNDS; i++) {
		/* Sizes from a few bytes to more than one internal round of 64 KiB. */
		size_t len = 1 + (size_t)(x % sizeof(buf));
		uint64_t credited = 0;

		for (size_t j = 0; j < len; j++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			buf[j] = (uint8_t)x;
		}
		assert_int_equal(
		    eb_pool_add(sh->pool, buf, len, (uint64_t)len * (1 + x % 8), &credited), 0);
		sh->credited_in += credited;
	}
	__atomic_store_n(&sh->adder_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *taker(void *userdata)
{
	struct shared *sh = userdata;
	uint8_t out[4096];
	uint64_t x = 12345;

	while (!__atomic_load_n(&sh->adder_done, __ATOMIC_ACQUIRE)) {
		size_t len = 1 + (size_t)(x % sizeof(out));
		uint64_t level = eb_pool_level(sh->pool);

		x = x * 6364136223846793005u + 1442695040888963407u;
		assert_true(level <= eb_pool_capacity(sh->pool));
		if (x % 4 == 0) {
			if (eb_pool_take_drbg(sh->pool, out, len) == 0)
				continue;
		} else if (eb_pool_take_full(sh->pool, out, len) == 0)
			sh->full_out += eb_pool_cost_bits(sh->pool, len);
	}
	return NULL;
}

static void test_add_and_take_concurrently(void **state)
{
	struct shared sh = {0};
	pthread_t a, t;
	uint64_t blocks_in;

	(void)state;
	assert_int_equal(eb_pool_new(CAPACITY, &sh.pool, NULL), 0);
	assert_int_equal(pthread_create(&t, NULL, taker, &sh), 0);
	assert_int_equal(pthread_create(&a, NULL, adder, &sh), 0);
	pthread_join(a, NULL);
	pthread_join(t, NULL);

	/* Every block held or handed out was made from CREDIT_PER_BLOCK credited bits; DRBG
	 * reseeds spent blocks too, so held + full out is at most what came in. */
	blocks_in = sh.credited_in / CREDIT_PER_BLOCK;
	assert_true(sh.full_out > 0);
	assert_true((eb_pool_level(sh.pool) + sh.full_out) / BLOCK_BITS <= blocks_in);
	assert_true(eb_pool_level(sh.pool) <= CAPACITY);
	eb_pool_free(sh.pool);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_add_and_take_concurrently),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
