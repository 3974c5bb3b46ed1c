/* SPDX-License-Identifier: MIT */
/* Tests for shared/bootrand.c: once it is in use, OpenSSL's DRBGs take their seed from it (a
 * seed is counted for the primary DRBG), serve random bytes and TLS contexts, and a second call
 * finds the DRBG made. That getrandom(GRND_INSECURE) does not wait for an uninitialised CRNG is
 * the kernel's promise; tests/vm/scenarios/boot-virtio.sh shows it in a guest whose CRNG is not
 * ready. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>

#include "bootrand.h"

static void test_seeds_openssl(void **state)
{
	uint8_t a[64] = {0}, b[64] = {0}, zero[64] = {0};
	unsigned seeds;
	SSL_CTX *ctx;

	(void)state;
	assert_int_equal(eb_bootrand_seeds(), 0);
	assert_int_equal(eb_bootrand_use(), 0);
	seeds = eb_bootrand_seeds();
	assert_true(seeds >= 1);

	/* The public and private DRBGs are seeded from the primary, and a TLS context (which draws
	 * its ticket keys at once) works on top. */
	assert_int_equal(RAND_bytes(a, sizeof(a)), 1);
	assert_int_equal(RAND_priv_bytes(b, sizeof(b)), 1);
	assert_memory_not_equal(a, zero, sizeof(a));
	assert_memory_not_equal(a, b, sizeof(a));
	ctx = SSL_CTX_new(TLS_client_method());
	assert_non_null(ctx);
	SSL_CTX_free(ctx);

	/* The DRBG exists now: a second call cannot make it ours, and says so. */
	assert_int_equal(eb_bootrand_use(), -EBUSY);
	assert_true(eb_bootrand_seeds() >= seeds);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_seeds_openssl),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
