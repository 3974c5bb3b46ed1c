/* SPDX-License-Identifier: MIT */
/* Tests for shared/pool.c: known answers that pin the construction, and the accounting invariant
 * (never more credited bits out than in) over long random sequences. Link seams:
 * EVP_RAND_generate (a deterministic DRBG on demand), EVP_RAND_reseed (to see what seeds the
 * DRBG-mode instance) and mlock (to fail it). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <cmocka.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "macro.h"
#include "pool.h"

/* What the fake DRBG does: FAKE_OFF calls the real one. */
enum {
	FAKE_OFF,
	FAKE_ZERO,
	FAKE_PATTERN,
};

static int fake_mode = FAKE_OFF;
static bool fail_mlock;
static unsigned n_generate, n_reseed;
static size_t last_adinlen;
static uint8_t last_reseed_ent[64];
static size_t last_reseed_entlen;

int __real_EVP_RAND_generate(EVP_RAND_CTX *ctx, unsigned char *out, size_t outlen,
                             unsigned int strength, int prediction_resistance,
                             const unsigned char *addin, size_t addin_len);
int __wrap_EVP_RAND_generate(EVP_RAND_CTX *ctx, unsigned char *out, size_t outlen,
                             unsigned int strength, int prediction_resistance,
                             const unsigned char *addin, size_t addin_len);
int __real_EVP_RAND_reseed(EVP_RAND_CTX *ctx, int prediction_resistance, const unsigned char *ent,
                           size_t ent_len, const unsigned char *addin, size_t addin_len);
int __wrap_EVP_RAND_reseed(EVP_RAND_CTX *ctx, int prediction_resistance, const unsigned char *ent,
                           size_t ent_len, const unsigned char *addin, size_t addin_len);
int __real_mlock(const void *addr, size_t len);
int __wrap_mlock(const void *addr, size_t len);

/* Every DRBG the pool uses must be SP 800-90A CTR_DRBG with AES-256 at strength 256. */
static void check_drbg(EVP_RAND_CTX *ctx)
{
	char cipher[64] = "";
	OSSL_PARAM params[] = {
	    OSSL_PARAM_construct_utf8_string(OSSL_DRBG_PARAM_CIPHER, cipher, sizeof(cipher)),
	    OSSL_PARAM_construct_end(),
	};

	assert_string_equal(EVP_RAND_get0_name(EVP_RAND_CTX_get0_rand(ctx)), "CTR-DRBG");
	assert_int_equal(EVP_RAND_get_strength(ctx), 256);
	assert_int_equal(EVP_RAND_CTX_get_params(ctx, params), 1);
	assert_string_equal(cipher, "AES-256-CTR");
}

int __wrap_EVP_RAND_generate(EVP_RAND_CTX *ctx, unsigned char *out, size_t outlen,
                             unsigned int strength, int prediction_resistance,
                             const unsigned char *addin, size_t addin_len)
{
	check_drbg(ctx);
	assert_int_equal(strength, 256);
	assert_true(outlen <= 64 * 1024);
	n_generate++;
	last_adinlen = addin ? addin_len : 0;
	switch (fake_mode) {
	case FAKE_ZERO:
		memset(out, 0, outlen);
		return 1;
	case FAKE_PATTERN:
		for (size_t i = 0; i < outlen; i++)
			out[i] = (uint8_t)(i * 7 + 3);
		return 1;
	}
	return __real_EVP_RAND_generate(ctx, out, outlen, strength, prediction_resistance, addin,
	                                addin_len);
}

int __wrap_EVP_RAND_reseed(EVP_RAND_CTX *ctx, int prediction_resistance, const unsigned char *ent,
                           size_t ent_len, const unsigned char *addin, size_t addin_len)
{
	check_drbg(ctx);
	n_reseed++;
	last_reseed_entlen = ent_len;
	if (ent && ent_len <= sizeof(last_reseed_ent))
		memcpy(last_reseed_ent, ent, ent_len);
	return __real_EVP_RAND_reseed(ctx, prediction_resistance, ent, ent_len, addin, addin_len);
}

int __wrap_mlock(const void *addr, size_t len)
{
	if (fail_mlock) {
		errno = ENOMEM;
		return -1;
	}
	return __real_mlock(addr, len);
}

static int reset(void **state)
{
	(void)state;
	fake_mode = FAKE_OFF;
	fail_mlock = false;
	n_generate = n_reseed = 0;
	last_adinlen = last_reseed_entlen = 0;
	return 0;
}

static void pool_freep(struct eb_pool **p)
{
	*p = eb_pool_free(*p);
}

static void sha512(const void *data, size_t len, uint8_t out[64])
{
	unsigned n = 0;

	assert_int_equal(EVP_Digest(data, len, out, &n, EVP_sha512(), NULL), 1);
	assert_int_equal(n, 64);
}

static void unhex(const char *hex, uint8_t *out, size_t len)
{
	assert_int_equal(strlen(hex), 2 * len);
	for (size_t i = 0; i < len; i++) {
		unsigned v;

		assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
		out[i] = (uint8_t)v;
	}
}

/* xorshift64*: reproducible test sequences without rand(). */
static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint64_t rnd(uint64_t bound)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return bound ? (rng_state * 0x2545f4914f6cdd1dull) % bound : 0;
}

static void test_capacity(void **state)
{
	_cleanup_(pool_freep) struct eb_pool *p = NULL;
	struct eb_pool *q = (struct eb_pool *)&q;
	bool locked = true;

	(void)state;
	assert_int_equal(eb_pool_new(0, &q, NULL), -EINVAL);
	assert_int_equal(eb_pool_new(4095, &q, NULL), -EINVAL);
	assert_int_equal(eb_pool_new(3584, &q, NULL), -EINVAL);
	assert_int_equal(eb_pool_new(4096 + 256, &q, NULL), -EINVAL);
	assert_int_equal(eb_pool_new((UINT64_C(1) << 31) + 512, &q, NULL), -EINVAL);
	assert_int_equal(eb_pool_new(UINT64_MAX, &q, NULL), -EINVAL);
	/* Failure leaves the output alone. */
	assert_ptr_equal(q, (struct eb_pool *)&q);

	fail_mlock = true;
	assert_int_equal(eb_pool_new(UINT64_C(1) << 31, &p, &locked), 0);
	assert_false(locked);
	assert_int_equal(eb_pool_capacity(p), UINT64_C(1) << 31);
	assert_int_equal(eb_pool_level(p), 0);
	p = eb_pool_free(p);
	assert_null(eb_pool_free(NULL));

	fail_mlock = false;
	assert_int_equal(eb_pool_new(4608, &p, NULL), 0);
	assert_int_equal(eb_pool_capacity(p), 4608);
}

static void test_locked(void **state)
{
	_cleanup_(pool_freep) struct eb_pool *p = NULL;
	bool locked = false;

	struct rlimit rl;

	(void)state;
	assert_int_equal(eb_pool_new(4096, &p, &locked), 0);
	/* A few pages fit the default RLIMIT_MEMLOCK (8 MiB); a sandbox may allow none. */
	assert_int_equal(getrlimit(RLIMIT_MEMLOCK, &rl), 0);
	if (rl.rlim_cur >= 65536)
		assert_true(locked);
}

/* One block is SHA-512 of input that carried 512 + 64 credited bits: 72 fully credited bytes.
 * With a DRBG that outputs zeros, RBG3(XOR) hands out the block itself. */
static void test_kat_block(void **state)
{
	_cleanup_(pool_freep) struct eb_pool *p = NULL;
	uint8_t in[72], out[64], expect[64];
	uint64_t credited = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (uint8_t)i;
	unhex("4ebdfa0e60e1a3e7fefb8db424a5c3a52365f325ec7f51389a4955ee3453bbfc"
	      "94692deac3ff6a4e94105c27d632df26250ff37314c882fdeb65d53534f8a961",
	      expect, sizeof(expect));

	assert_int_equal(eb_pool_new(4096, &p, NULL), 0);
	/* 71 bytes carry 568 bits: no block yet, the credit waits in the accumulator. */
	assert_int_equal(eb_pool_add(p, in, 71, 8 * 71, &credited), 0);
	assert_int_equal(credited, 568);
	assert_int_equal(eb_pool_level(p), 0);
	assert_int_equal(eb_pool_add(p, in + 71, 1, 8, &credited), 0);
	assert_int_equal(credited, 8);
	assert_int_equal(eb_pool_level(p), 512);

	fake_mode = FAKE_ZERO;
	assert_int_equal(eb_pool_take_full(p, out, sizeof(out)), 0);
	assert_memory_equal(out, expect, sizeof(out));
	assert_int_equal(eb_pool_level(p), 0);
}

/* An input is cut where its running credit completes a block, and what it carries beyond goes to
 * the next block: 100 bytes with 800 bits make block 1 from bytes 0-71 and leave 224 bits in
 * bytes 72-99; 44 more bytes with 352 bits complete block 2. The output is (block 1 || block 2)
 * XOR the DRBG's, here a fixed pattern. */
static void test_kat_split_xor(void **state)
{
	_cleanup_(pool_freep) struct eb_pool *p = NULL;
	uint8_t stream[144], out[128], expect[128];
	uint64_t credited = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(stream); i++)
		stream[i] = (uint8_t)(i * 37 + 11);
	unhex("98ca3fc198c8474a9df74eb38581b01e9d3dda9b5ea399cd4708ea68ea409afc"
	      "508a94eb75e093474bc50b8204e7fd673b8eb90191c569d9e2c7472f4721c59e"
	      "5114785e0b5f21d75f45eafcb5c1b00ca226b6b976f5704c14bf21e90dd7c82b"
	      "a50d10bbe58c1524456eea46a5629d03024f75f564b1be89830b864fd6eb7607",
	      expect, sizeof(expect));

	assert_int_equal(eb_pool_new(4096, &p, NULL), 0);
	assert_int_equal(eb_pool_add(p, stream, 100, 800, &credited), 0);
	assert_int_equal(credited, 800);
	assert_int_equal(eb_pool_level(p), 512);
	assert_int_equal(eb_pool_add(p, stream + 100, 44, 352, &credited), 0);
	assert_int_equal(eb_pool_level(p), 1024);

	fake_mode = FAKE_PATTERN;
	assert_int_equal(eb_pool_cost_bits(p, sizeof(out)), 1024);
	assert_int_equal(eb_pool_take_full(p, out, sizeof(out)), 0);
	assert_memory_equal(out, expect, sizeof(out));
	assert_int_equal(eb_pool_level(p), 0);
}

static void test_cost(void **state)
{
	_cleanup_(pool_freep) struct eb_pool *p = NULL;

	(void)state;
	assert_int_equal(eb_pool_new(4096, &p, NULL), 0);
	assert_int_equal(eb_pool_cost_bits(p, 0), 0);
	assert_int_equal(eb_pool_cost_bits(p, 1), 512);
	assert_int_equal(eb_pool_cost_bits(p, 32), 512);
	assert_int_equal(eb_pool_cost_bits(p, 64), 512);
	assert_int_equal(eb_pool_cost_bits(p, 65), 1024);
	assert_int_equal(eb_pool_cost_bits(p, 65536), 524288);
	/* Never cheaper than n + 64 bits of input credit: each 512-bit block stood for 576. */
	for (size_t n = 1; n <= 4096; n++)
		assert_true(eb_pool_cost_bits(p, n) / 512 * 576 >= 8 * n + EB_POOL_OVERHEAD_BITS);
}

static void test_clamp_and_full(void **state)
{
	_cleanup_(pool_freep) struct eb_pool *p = NULL;
	uint8_t data[4096] = {1, 2, 3};
	uint64_t credited = 1;

	(void)state;
	assert_int_equal(eb_pool_new(4096, &p, NULL), 0);
	/* More credit than 8 bits a byte is never believed. */
	assert_int_equal(eb_pool_add(p, data, 10, 1000, &credited), 0);
	assert_int_equal(credited, 80);
	assert_int_equal(eb_pool_add(p, data, 0, 1000, &credited), 0);
	assert_int_equal(credited, 0);
	assert_int_equal(eb_pool_add(p, NULL, 0, 0, NULL), 0);

	/* Room is 8 blocks of 576 less the 80 already held. */
	assert_int_equal(eb_pool_add(p, data, sizeof(data), 8 * sizeof(data), &credited), 0);
	assert_int_equal(credited, 8 * 576 - 80);
	assert_int_equal(eb_pool_level(p), 4096);
	assert_int_equal(eb_pool_add(p, data, sizeof(data), 8 * sizeof(data), &credited), 0);
	assert_int_equal(credited, 0);
	assert_int_equal(eb_pool_level(p), eb_pool_capacity(p));
}

static void test_take_full_all_or_nothing(void **state)
{
	_cleanup_(pool_freep) struct eb_pool *p = NULL;
	uint8_t data[72] = {0}, out[65536 + 1];

	(void)state;
	assert_int_equal(eb_pool_new(4096, &p, NULL), 0);
	assert_int_equal(eb_pool_take_full(p, out, 1), -EAGAIN);
	assert_int_equal(eb_pool_add(p, data, sizeof(data), 576, NULL), 0);

	memset(out, 0xaa, sizeof(out));
	assert_int_equal(eb_pool_take_full(p, out, 65), -EAGAIN);
	assert_int_equal(eb_pool_level(p), 512);
	/* Nothing was written either. */
	for (size_t i = 0; i < 65; i++)
		assert_int_equal(out[i], 0xaa);
	assert_int_equal(eb_pool_take_full(p, out, sizeof(out)), -EMSGSIZE);
	assert_int_equal(eb_pool_level(p), 512);
	assert_int_equal(eb_pool_take_full(p, out, 0), 0);
	assert_int_equal(eb_pool_level(p), 512);

	/* A 1-byte request spends the whole block. */
	assert_int_equal(eb_pool_take_full(p, out, 1), 0);
	assert_int_equal(eb_pool_level(p), 0);
	assert_int_equal(eb_pool_take_full(p, out, 1), -EAGAIN);
}

static void test_take_full_max(void **state)
{
	_cleanup_(pool_freep) struct eb_pool *p = NULL;
	_cleanup_free_ uint8_t *data = malloc(1024 * 72), *out = malloc(65536);
	uint64_t credited;

	(void)state;
	assert_non_null(data);
	assert_non_null(out);
	for (size_t i = 0; i < 1024 * 72; i++)
		data[i] = (uint8_t)rnd(256);
	assert_int_equal(eb_pool_new(1024 * 512, &p, NULL), 0);
	assert_int_equal(eb_pool_add(p, data, 1024 * 72, 1024 * 576, &credited), 0);
	assert_int_equal(credited, 1024 * 576);
	assert_int_equal(eb_pool_level(p), 1024 * 512);

	fake_mode = FAKE_ZERO;
	assert_int_equal(eb_pool_take_full(p, out, 65536), 0);
	assert_int_equal(eb_pool_level(p), 0);
	/* The last block is SHA-512 of the last 72 bytes. */
	{
		uint8_t h[64];

		sha512(data + 1023 * 72, 72, h);
		assert_memory_equal(out + 65536 - 64, h, 64);
	}
}

/* Reference model: the same accounting, byte by byte, written the slow and obvious way. */
struct model {
	uint64_t capacity_blocks;
	uint64_t acc_credit;
	uint64_t dropped; /* credit beyond 576 at the byte that completed a block */
	EVP_MD_CTX *acc;
	uint8_t (*blocks)[64]; /* FIFO of expected blocks */
	size_t head, n, size;
};

static void model_emit(struct model *m)
{
	unsigned len = 0;

	assert_true(m->n < m->capacity_blocks);
	assert_int_equal(EVP_DigestFinal_ex(m->acc, m->blocks[(m->head + m->n) % m->size], &len),
	                 1);
	assert_int_equal(EVP_DigestInit_ex(m->acc, EVP_sha512(), NULL), 1);
	m->n++;
	m->acc_credit = 0;
}

static uint64_t model_add(struct model *m, const uint8_t *data, size_t len, uint64_t credit)
{
	uint64_t room = (m->capacity_blocks - m->n) * 576 - m->acc_credit;
	uint64_t prev = 0;

	credit = MIN(credit, 8 * (uint64_t)len);
	credit = MIN(credit, room);
	if (credit == 0)
		return 0;
	for (size_t i = 0; i < len; i++) {
		uint64_t f = (uint64_t)(i + 1) * credit / len;

		assert_int_equal(EVP_DigestUpdate(m->acc, data + i, 1), 1);
		m->acc_credit += f - prev;
		prev = f;
		if (m->acc_credit >= 576) {
			m->dropped += m->acc_credit - 576;
			model_emit(m);
		}
	}
	return credit;
}

static void model_take(struct model *m, uint8_t *out, size_t blocks)
{
	for (size_t i = 0; i < blocks; i++) {
		memcpy(out + 64 * i, m->blocks[m->head], 64);
		m->head = (m->head + 1) % m->size;
		m->n--;
	}
}

/* A long random run of adds (odd sizes, any credit), takes in both modes and exports, checked
 * against the model and against the rule that every bit handed out with credit is backed by
 * that bit plus the 64-bit overhead of its block in credit that came in. */
static void run_random(uint64_t capacity, unsigned steps)
{
	_cleanup_(pool_freep) struct eb_pool *p = NULL;
	_cleanup_free_ uint8_t *data = malloc(20000), *out = malloc(65536), *ref = malloc(65536);
	struct model m = {.capacity_blocks = capacity / 512};
	uint64_t in = 0, out_backing = 0, out_bits = 0;

	assert_non_null(data);
	assert_non_null(out);
	assert_non_null(ref);
	m.size = m.capacity_blocks;
	m.blocks = calloc(m.size, 64);
	m.acc = EVP_MD_CTX_new();
	assert_non_null(m.blocks);
	assert_int_equal(EVP_DigestInit_ex(m.acc, EVP_sha512(), NULL), 1);

	fake_mode = FAKE_ZERO;
	assert_int_equal(eb_pool_new(capacity, &p, NULL), 0);
	for (unsigned step = 0; step < steps; step++) {
		uint64_t level = eb_pool_level(p), credited = UINT64_MAX, bits = 0;
		unsigned reseeds = n_reseed;
		size_t len, got;
		int r;

		switch (rnd(8)) {
		case 0:
		case 1:
		case 2:
		case 3:
			len = rnd(4) == 0 ? rnd(20000) : rnd(300);
			for (size_t i = 0; i < len; i++)
				data[i] = (uint8_t)rnd(256);
			bits = rnd(3) == 0 ? rnd(9 * len + 2) : rnd(len + 1);
			assert_int_equal(eb_pool_add(p, data, len, bits, &credited), 0);
			assert_int_equal(credited, model_add(&m, data, len, bits));
			in += credited;
			break;
		case 4:
		case 5:
			len = rnd(4) == 0 ? rnd(65537) : rnd(700);
			r = eb_pool_take_full(p, out, len);
			if (len > 0 && eb_pool_cost_bits(p, len) > level) {
				assert_int_equal(r, -EAGAIN);
				assert_int_equal(eb_pool_level(p), level);
				break;
			}
			assert_int_equal(r, 0);
			assert_int_equal(level - eb_pool_level(p), eb_pool_cost_bits(p, len));
			model_take(&m, ref, (len + 63) / 64);
			assert_memory_equal(out, ref, len);
			if (len > 0) {
				out_bits += 8 * len;
				out_backing += 8 * len + EB_POOL_OVERHEAD_BITS;
			}
			break;
		case 6:
			len = rnd(3000);
			r = eb_pool_take_drbg(p, out, len, true);
			if (r == -EAGAIN) {
				assert_int_equal(level, 0);
				assert_int_equal(n_reseed, reseeds);
				break;
			}
			assert_int_equal(r, 0);
			if (n_reseed != reseeds) {
				/* Seeding takes one block: 256 + 64 bits of credit and more. */
				assert_int_equal(n_reseed, reseeds + 1);
				assert_int_equal(level - eb_pool_level(p), 512);
				assert_int_equal(last_reseed_entlen, 64);
				model_take(&m, ref, 1);
				assert_memory_equal(last_reseed_ent, ref, 64);
				out_backing += EB_POOL_DRBG_SEED_BITS + EB_POOL_OVERHEAD_BITS;
			} else {
				assert_int_equal(eb_pool_level(p), level);
			}
			break;
		case 7:
			len = rnd(2000);
			got = eb_pool_export(p, out, len, &bits);
			assert_int_equal(got % 64, 0);
			assert_true(got <= len);
			assert_int_equal(bits, 8 * got);
			assert_int_equal(level - eb_pool_level(p), bits);
			model_take(&m, ref, got / 64);
			assert_memory_equal(out, ref, got);
			out_bits += bits;
			out_backing += bits + got / 64 * EB_POOL_OVERHEAD_BITS;
			if (rnd(2) == 0) {
				/* As after a restart: the blocks come back with their credit. */
				size_t back = eb_pool_restore(p, out, got, &bits);
				uint64_t room = m.capacity_blocks - m.n - (m.acc_credit > 0);

				assert_int_equal(back, MIN(got, 64 * room));
				assert_int_equal(bits, 8 * back);
				for (size_t i = 0; i < back / 64; i++)
					memcpy(m.blocks[(m.head + m.n++) % m.size], out + 64 * i,
					       64);
				in += back / 64 * 576;
			}
			break;
		}
		assert_int_equal(eb_pool_level(p), m.n * 512);
		assert_int_equal(eb_pool_carried(p), m.acc_credit);
		assert_int_equal(eb_pool_dropped(p), m.dropped);
		assert_true(eb_pool_level(p) <= eb_pool_capacity(p));
		assert_true(out_bits <= in);
		/* What is out, and what is held (each block standing for 576), came in. */
		assert_true(out_backing + m.n * 576 <= in);
	}
	/* The run must have exercised every path, not just the empty one. */
	assert_true(out_bits > 0);
	assert_true(n_reseed > 0);

	EVP_MD_CTX_free(m.acc);
	free(m.blocks);
}

/* docs/pool.md: every bit of credit an add accepted is 576 per block made, carried in the
 * accumulator, or dropped at a cut, to the bit, also when credit is not whole bits a byte. Known
 * answers first, then a sequence of odd rates checked at every step. */
static void test_carried_dropped(void **state)
{
	_cleanup_(pool_freep) struct eb_pool *p = NULL;
	uint8_t data[1000];
	uint64_t credited, in = 0, blocks = 0;

	(void)state;
	memset(data, 0x6b, sizeof(data));
	fake_mode = FAKE_ZERO;
	assert_int_equal(eb_pool_new(1 << 20, &p, NULL), 0);
	assert_int_equal(eb_pool_carried(p), 0);
	assert_int_equal(eb_pool_dropped(p), 0);
	/* 80 bytes at 7.5 bits a byte: the block is cut after byte 77, whose prefix carries
	 * floor(77 * 7.5) = 577 bits: 1 dropped, and 600 - 577 = 23 carried. */
	assert_int_equal(eb_pool_add(p, data, 80, 600, &credited), 0);
	assert_int_equal(credited, 600);
	assert_int_equal(eb_pool_level(p), 512);
	assert_int_equal(eb_pool_dropped(p), 1);
	assert_int_equal(eb_pool_carried(p), 23);
	/* 100 bytes at 7 bits: 553 more complete the block at byte ceil(553 / 7) = 79, whose
	 * prefix is 553: nothing dropped; then 147 carried, short of the next block. */
	assert_int_equal(eb_pool_add(p, data, 100, 700, &credited), 0);
	assert_int_equal(eb_pool_level(p), 1024);
	assert_int_equal(eb_pool_dropped(p), 1);
	assert_int_equal(eb_pool_carried(p), 147);
	/* 1 byte at 8 bits does not complete one: all of it is carried. */
	assert_int_equal(eb_pool_add(p, data, 1, 8, &credited), 0);
	assert_int_equal(eb_pool_carried(p), 155);
	in = 600 + 700 + 8;
	blocks = 2;
	assert_int_equal(in, 576 * blocks + eb_pool_carried(p) + eb_pool_dropped(p));

	/* Rates that are not whole bits a byte, of odd lengths: the identity holds at every step.
	 */
	for (unsigned i = 0; i < 2000; i++) {
		size_t len = 1 + (i * 37) % 997;
		uint64_t bits = (len * (5 + i % 4) * 1000 + i * 7919 % 1000) / 1000;

		assert_int_equal(eb_pool_add(p, data, len, bits, &credited), 0);
		in += credited;
		blocks = eb_pool_level(p) / 512;
		assert_true(eb_pool_carried(p) < 576);
		assert_int_equal(in, 576 * blocks + eb_pool_carried(p) + eb_pool_dropped(p));
	}
	assert_true(eb_pool_dropped(p) > 1);
}

static void test_random_small(void **state)
{
	(void)state;
	/* 8 blocks: the ring wraps all the time and the pool is often full. */
	run_random(4096, 20000);
}

static void test_random_large(void **state)
{
	(void)state;
	run_random(1024 * 512, 5000);
}

static void test_drbg_mode(void **state)
{
	_cleanup_(pool_freep) struct eb_pool *p = NULL;
	_cleanup_free_ uint8_t *out = malloc(3 * EB_POOL_DRBG_RESEED_BYTES + 1);
	uint8_t data[3 * 72], h[64], a[32], b[32];

	(void)state;
	assert_non_null(out);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i ^ 0x5a);
	assert_int_equal(eb_pool_new(4096, &p, NULL), 0);
	assert_int_equal(eb_pool_take_drbg(p, out, 32, true), -EAGAIN);
	assert_int_equal(n_reseed, 0);
	assert_int_equal(eb_pool_take_drbg(p, out, 0, true), 0);

	assert_int_equal(eb_pool_add(p, data, 72, 576, NULL), 0);
	assert_int_equal(eb_pool_take_drbg(p, a, sizeof(a), true), 0);
	assert_int_equal(eb_pool_level(p), 0);
	/* Seeded with the block itself as entropy input. */
	assert_int_equal(n_reseed, 1);
	assert_int_equal(last_reseed_entlen, 64);
	sha512(data, 72, h);
	assert_memory_equal(last_reseed_ent, h, 64);

	/* Once seeded it serves on an empty pool. */
	assert_int_equal(eb_pool_take_drbg(p, b, sizeof(b), true), 0);
	assert_memory_not_equal(a, b, sizeof(a));
	assert_int_equal(n_reseed, 1);

	/* Reseeded on schedule while the pool has blocks, in chunks the DRBG accepts (the seam
	 * checks each generate is at most 64 KiB). */
	assert_int_equal(eb_pool_add(p, data + 72, 144, 2 * 576, NULL), 0);
	assert_int_equal(eb_pool_level(p), 1024);
	n_generate = 0;
	assert_int_equal(eb_pool_take_drbg(p, out, 3 * EB_POOL_DRBG_RESEED_BYTES + 1, true), 0);
	assert_true(n_generate >= (3 * EB_POOL_DRBG_RESEED_BYTES + 1) / 65536);
	assert_int_equal(n_reseed, 3);
	assert_int_equal(eb_pool_level(p), 0);
	sha512(data + 144, 72, h);
	assert_memory_equal(last_reseed_ent, h, 64);
}

/* With may_reseed false DRBG mode never spends the pool: the broker rations reseeds by time and
 * by the drawing user's quota, and a sink drawing gigabytes must not drain credited entropy. */
static void test_drbg_no_reseed(void **state)
{
	_cleanup_(pool_freep) struct eb_pool *p = NULL;
	_cleanup_free_ uint8_t *out = malloc(2 * EB_POOL_DRBG_RESEED_BYTES);
	uint8_t data[2 * 72];

	(void)state;
	assert_non_null(out);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + 1);
	assert_int_equal(eb_pool_new(4096, &p, NULL), 0);
	assert_int_equal(eb_pool_add(p, data, sizeof(data), 2 * 576, NULL), 0);
	assert_int_equal(eb_pool_level(p), 1024);

	/* Never seeded: it cannot serve without a block, and takes none. */
	assert_int_equal(eb_pool_take_drbg(p, out, 32, false), -EAGAIN);
	assert_int_equal(eb_pool_level(p), 1024);
	assert_int_equal(n_reseed, 0);

	/* Seeded once, then served past the schedule without another block. */
	assert_int_equal(eb_pool_take_drbg(p, out, 32, true), 0);
	assert_int_equal(n_reseed, 1);
	assert_int_equal(eb_pool_level(p), 512);
	assert_int_equal(eb_pool_take_drbg(p, out, 2 * EB_POOL_DRBG_RESEED_BYTES, false), 0);
	assert_int_equal(n_reseed, 1);
	assert_int_equal(eb_pool_level(p), 512);

	/* The schedule is kept for the next request that may reseed. */
	assert_int_equal(eb_pool_take_drbg(p, out, 32, true), 0);
	assert_int_equal(n_reseed, 2);
	assert_int_equal(eb_pool_level(p), 0);
}

/* Uncredited input, and input beyond capacity, reaches the DRBGs as additional input. */
static void test_uncredited_mix(void **state)
{
	_cleanup_(pool_freep) struct eb_pool *p = NULL;
	uint8_t data[72] = {7}, out[64];
	uint64_t credited = 1;

	(void)state;
	assert_int_equal(eb_pool_new(4096, &p, NULL), 0);
	assert_int_equal(eb_pool_add(p, data, sizeof(data), 576, NULL), 0);
	assert_int_equal(eb_pool_add(p, data, sizeof(data), 0, &credited), 0);
	assert_int_equal(credited, 0);
	assert_int_equal(eb_pool_level(p), 512);

	assert_int_equal(eb_pool_take_drbg(p, out, sizeof(out), true), 0);
	assert_int_equal(last_adinlen, 0); /* the reseed took it */
	assert_int_equal(eb_pool_add(p, data, sizeof(data), 576, NULL), 0);
	assert_int_equal(eb_pool_add(p, data, 5, 0, NULL), 0);
	assert_int_equal(eb_pool_take_full(p, out, sizeof(out)), 0);
	assert_int_equal(last_adinlen, 64);
	assert_int_equal(eb_pool_take_drbg(p, out, sizeof(out), true), 0);
	assert_int_equal(last_adinlen, 64);
	/* Given once, not again. */
	assert_int_equal(eb_pool_take_drbg(p, out, sizeof(out), true), 0);
	assert_int_equal(last_adinlen, 0);
}

static void test_export(void **state)
{
	_cleanup_(pool_freep) struct eb_pool *p = NULL;
	uint8_t data[4 * 72], out[300], h[64];
	uint64_t bits = 1;

	(void)state;
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 3);
	assert_int_equal(eb_pool_new(4096, &p, NULL), 0);
	assert_int_equal(eb_pool_export(p, out, sizeof(out), &bits), 0);
	assert_int_equal(bits, 0);
	assert_int_equal(eb_pool_add(p, data, sizeof(data), 8 * sizeof(data), NULL), 0);
	assert_int_equal(eb_pool_level(p), 2048);

	/* Whole blocks only. */
	assert_int_equal(eb_pool_export(p, out, 63, &bits), 0);
	assert_int_equal(bits, 0);
	assert_int_equal(eb_pool_export(p, out, 130, &bits), 128);
	assert_int_equal(bits, 1024);
	assert_int_equal(eb_pool_level(p), 1024);
	sha512(data, 72, h);
	assert_memory_equal(out, h, 64);
	sha512(data + 72, 72, h);
	assert_memory_equal(out + 64, h, 64);
	assert_int_equal(eb_pool_export(p, out, sizeof(out), NULL), 128);
	assert_int_equal(eb_pool_level(p), 0);
}

static void test_restore(void **state)
{
	_cleanup_(pool_freep) struct eb_pool *p = NULL;
	uint8_t data[3 * 72], saved[192], out[192], h[64];
	uint64_t bits = 1, credited = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 5 + 1);
	assert_int_equal(eb_pool_new(4096, &p, NULL), 0);
	assert_int_equal(eb_pool_add(p, data, sizeof(data), 3 * 576, NULL), 0);
	assert_int_equal(eb_pool_export(p, saved, sizeof(saved), &bits), 192);
	assert_int_equal(eb_pool_level(p), 0);

	/* Whole blocks only, each back as it was. */
	assert_int_equal(eb_pool_restore(p, saved, 63, &bits), 0);
	assert_int_equal(bits, 0);
	assert_int_equal(eb_pool_restore(p, saved, sizeof(saved), &bits), 192);
	assert_int_equal(bits, 1536);
	assert_int_equal(eb_pool_level(p), 1536);
	fake_mode = FAKE_ZERO;
	assert_int_equal(eb_pool_take_full(p, out, sizeof(out)), 0);
	for (size_t i = 0; i < 3; i++) {
		sha512(data + 72 * i, 72, h);
		assert_memory_equal(out + 64 * i, h, 64);
	}

	/* Room: credit waiting in the accumulator keeps its slot. 5 * 576 + 100 bits make five
	 * blocks and leave 100 waiting, so of 8 slots only 2 are free for restored blocks. */
	assert_int_equal(eb_pool_add(p, data, sizeof(data), 3 * 576, NULL), 0);
	assert_int_equal(eb_pool_add(p, data, 144, 2 * 576, NULL), 0);
	assert_int_equal(eb_pool_add(p, data, 13, 100, NULL), 0);
	assert_int_equal(eb_pool_level(p), 5 * 512);
	assert_int_equal(eb_pool_restore(p, saved, sizeof(saved), NULL), 128);
	assert_int_equal(eb_pool_level(p), 7 * 512);
	assert_int_equal(eb_pool_add(p, data, sizeof(data), 8 * sizeof(data), &credited), 0);
	assert_int_equal(credited, 576 - 100);
	assert_int_equal(eb_pool_level(p), eb_pool_capacity(p));
	assert_int_equal(eb_pool_restore(p, saved, sizeof(saved), &bits), 0);
	assert_int_equal(bits, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_capacity, reset),
	    cmocka_unit_test_setup(test_locked, reset),
	    cmocka_unit_test_setup(test_kat_block, reset),
	    cmocka_unit_test_setup(test_kat_split_xor, reset),
	    cmocka_unit_test_setup(test_cost, reset),
	    cmocka_unit_test_setup(test_clamp_and_full, reset),
	    cmocka_unit_test_setup(test_take_full_all_or_nothing, reset),
	    cmocka_unit_test_setup(test_take_full_max, reset),
	    cmocka_unit_test_setup(test_carried_dropped, reset),
	    cmocka_unit_test_setup(test_random_small, reset),
	    cmocka_unit_test_setup(test_random_large, reset),
	    cmocka_unit_test_setup(test_drbg_mode, reset),
	    cmocka_unit_test_setup(test_drbg_no_reseed, reset),
	    cmocka_unit_test_setup(test_uncredited_mix, reset),
	    cmocka_unit_test_setup(test_export, reset),
	    cmocka_unit_test_setup(test_restore, reset),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
