/* SPDX-License-Identifier: MIT */
/* The entropy pool: SHA-512 conditioning into full-entropy blocks, RBG3(XOR) and DRBG output.
 * docs/pool.md explains the construction and cites the NIST sections it follows. */
#include "pool.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "macro.h"

/* One conditioned block is one SHA-512 output. SP 800-90B 3.1.5.1.2 lets a vetted conditioning
 * function claim full entropy for its n_out bits only when its input carried n_out + 64 bits, so
 * a block is emitted once the accumulator holds BLOCK_CREDIT credited bits, never earlier. */
#define BLOCK_BYTES  EB_POOL_BLOCK_BYTES
#define BLOCK_BITS   EB_POOL_BLOCK_BITS
#define BLOCK_CREDIT (BLOCK_BITS + EB_POOL_OVERHEAD_BITS)

/* OpenSSL's CTR-DRBG refuses requests above max_request (64 KiB, SP 800-90A 10.2.1 table 3
 * allows up to 2^19 bits); take_full is bounded by it so one request is one generate call. */
#define DRBG_CHUNK    (64 * 1024)
#define TAKE_FULL_MAX DRBG_CHUNK
#define DRBG_STRENGTH 256
#define CAPACITY_MIN  4096
#define CAPACITY_MAX  (UINT64_C(1) << 31)

struct eb_pool {
	EVP_MD *sha512;
	EVP_MD_CTX *fresh; /* initialised and never fed: copied to start each block */
	EVP_MD_CTX *acc;   /* conditioning accumulator: credited input only */
	EVP_MD_CTX *spill; /* uncredited input, digested into mix for the DRBGs */
	EVP_RAND_CTX *xor_drbg;
	EVP_RAND_CTX *drbg;
	size_t map_size;

	uint32_t nblocks; /* ring size */
	uint32_t head;    /* oldest block held */
	uint32_t held;    /* blocks held; the level is held * BLOCK_BITS */
	uint32_t acc_credit;
	uint64_t dropped; /* credit beyond BLOCK_CREDIT at the cuts, since creation */

	bool spill_dirty;
	bool mix_xor, mix_drbg; /* mix not yet given to that DRBG */
	bool drbg_seeded;
	uint64_t drbg_bytes; /* DRBG-mode output since the last reseed from the pool */

	uint8_t mix[BLOCK_BYTES];
	uint8_t ring[] __attribute__((aligned(BLOCK_BYTES)));
};

static uint8_t *block_at(struct eb_pool *pool, uint32_t i)
{
	return pool->ring + (size_t)((pool->head + i) % pool->nblocks) * BLOCK_BYTES;
}

/* Wipes n blocks from the head and drops them, so that spent entropy lives nowhere in memory. */
static void consume(struct eb_pool *pool, uint32_t n)
{
	uint32_t first = MIN(n, pool->nblocks - pool->head);

	assert(n <= pool->held);
	explicit_bzero(pool->ring + (size_t)pool->head * BLOCK_BYTES, (size_t)first * BLOCK_BYTES);
	explicit_bzero(pool->ring, (size_t)(n - first) * BLOCK_BYTES);
	pool->head = (pool->head + n) % pool->nblocks;
	pool->held -= n;
}

static int drbg_new(EVP_RAND *ctr, const char *personalization, EVP_RAND_CTX **ret)
{
	EVP_RAND_CTX *ctx;
	int use_df = 1;
	OSSL_PARAM params[] = {
	    OSSL_PARAM_construct_utf8_string(OSSL_DRBG_PARAM_CIPHER, (char *)"AES-256-CTR", 0),
	    OSSL_PARAM_construct_int(OSSL_DRBG_PARAM_USE_DF, &use_df),
	    OSSL_PARAM_construct_end(),
	};

	/* No parent: the instance seeds from OpenSSL's own seed source (getrandom()), which is
	 * what makes its output a defence in depth independent of the pool. The personalization
	 * string keeps the two instances apart even if that source repeated itself. */
	ctx = EVP_RAND_CTX_new(ctr, NULL);
	if (!ctx)
		return -ENOMEM;
	if (EVP_RAND_instantiate(ctx, DRBG_STRENGTH, 0, (const unsigned char *)personalization,
	                         strlen(personalization), params) != 1) {
		EVP_RAND_CTX_free(ctx);
		return -EIO;
	}
	*ret = ctx;
	return 0;
}

int eb_pool_new(uint64_t capacity_bits, struct eb_pool **ret, bool *ret_locked)
{
	struct eb_pool *pool;
	EVP_RAND *ctr = NULL;
	size_t page = (size_t)sysconf(_SC_PAGESIZE), size;
	bool locked;
	int r;

	assert(ret);
	if (capacity_bits < CAPACITY_MIN || capacity_bits > CAPACITY_MAX ||
	    capacity_bits % BLOCK_BITS != 0)
		return -EINVAL;

	size = sizeof(struct eb_pool) + (size_t)(capacity_bits / 8);
	size = (size + page - 1) / page * page;

	/* A mapping of its own rather than malloc(): it can be locked and kept out of core dumps
	 * without touching neighbouring heap objects. */
	pool = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (pool == MAP_FAILED)
		return -ENOMEM;
	(void)madvise(pool, size, MADV_DONTDUMP);
	/* RLIMIT_MEMLOCK is 8 MiB by default and a large pool may not fit: run unlocked then and
	 * let the caller say so, rather than refuse to start. */
	locked = mlock(pool, size) == 0;

	pool->map_size = size;
	pool->nblocks = (uint32_t)(capacity_bits / BLOCK_BITS);

	r = -ENOMEM;
	pool->sha512 = EVP_MD_fetch(NULL, "SHA512", NULL);
	pool->fresh = EVP_MD_CTX_new();
	pool->acc = EVP_MD_CTX_new();
	pool->spill = EVP_MD_CTX_new();
	if (!pool->sha512 || !pool->fresh || !pool->acc || !pool->spill)
		goto fail;
	/* The digest is fetched once: an implicit fetch per EVP_DigestInit would cost more than
	 * hashing a conditioning block. */
	r = -EIO;
	if (EVP_DigestInit_ex2(pool->fresh, pool->sha512, NULL) != 1 ||
	    EVP_MD_CTX_copy_ex(pool->acc, pool->fresh) != 1 ||
	    EVP_DigestInit_ex2(pool->spill, pool->sha512, NULL) != 1)
		goto fail;

	ctr = EVP_RAND_fetch(NULL, "CTR-DRBG", NULL);
	if (!ctr)
		goto fail;
	r = drbg_new(ctr, "entropy-broker pool: RBG3(XOR) DRBG", &pool->xor_drbg);
	if (r < 0)
		goto fail;
	r = drbg_new(ctr, "entropy-broker pool: DRBG mode", &pool->drbg);
	if (r < 0)
		goto fail;
	EVP_RAND_free(ctr);

	*ret = pool;
	if (ret_locked)
		*ret_locked = locked;
	return 0;

fail:
	EVP_RAND_free(ctr);
	eb_pool_free(pool);
	return r;
}

struct eb_pool *eb_pool_free(struct eb_pool *pool)
{
	size_t size;

	if (!pool)
		return NULL;

	/* Consumed blocks were wiped when they were spent; only those still held remain. The
	 * OpenSSL contexts wipe their own state when freed. */
	consume(pool, pool->held);
	EVP_MD_CTX_free(pool->fresh);
	EVP_MD_CTX_free(pool->acc);
	EVP_MD_CTX_free(pool->spill);
	EVP_MD_free(pool->sha512);
	EVP_RAND_CTX_free(pool->xor_drbg);
	EVP_RAND_CTX_free(pool->drbg);
	size = pool->map_size;
	explicit_bzero(pool, sizeof(*pool));
	(void)munmap(pool, size);
	return NULL;
}

/* F(x) = floor(x * credit / len): the credit carried by the first x bytes of an input, assuming
 * its credit is spread evenly. Segment credits F(b) - F(a) telescope, so splitting an input never
 * creates credit, and rounding down never gives a segment more than its share. */
static uint64_t credit_prefix(size_t x, uint64_t credit, size_t len)
{
#ifdef __SIZEOF_INT128__
	/* Inputs are at most a frame, and their credit 8 bits a byte: the product fits 64 bits,
	 * and a 64-bit division is several times cheaper than __udivti3, twice per block. */
	if (x <= UINT32_MAX && credit <= UINT32_MAX)
		return (uint64_t)x * credit / len;
	return (uint64_t)((unsigned __int128)x * credit / len);
#else
	/* Here size_t has 32 bits and credit < 2^33 (bounded by the room), so this fits. */
	return (uint64_t)x * credit / len;
#endif
}

/* The least x with F(x) >= target (target <= credit, so x <= len). */
static size_t credit_bytes(uint64_t target, uint64_t credit, size_t len)
{
#ifdef __SIZEOF_INT128__
	if (target <= UINT32_MAX && len <= UINT32_MAX && credit <= UINT32_MAX)
		return (size_t)(((uint64_t)target * len + credit - 1) / credit);
	return (size_t)(((unsigned __int128)target * len + credit - 1) / credit);
#else
	return (size_t)(((uint64_t)target * len + credit - 1) / credit);
#endif
}

static int emit_block(struct eb_pool *pool)
{
	uint8_t *slot;
	unsigned n = 0;

	assert(pool->held < pool->nblocks);
	slot = block_at(pool, pool->held);
	/* The next block starts from a copy of an initialised context. OpenSSL 3.0's
	 * EVP_DigestInit_ex2() would free and reallocate the provider's context too, and also
	 * consult the ENGINE table under a lock: at one block per 72 bytes of input the copy
	 * runs 2 % fewer instructions per block (callgrind, tests/bench/pool's loop). */
	if (EVP_DigestFinal_ex(pool->acc, slot, &n) != 1 || n != BLOCK_BYTES ||
	    EVP_MD_CTX_copy_ex(pool->acc, pool->fresh) != 1) {
		explicit_bzero(slot, BLOCK_BYTES);
		return -EIO;
	}
	pool->held++;
	/* Whatever credit the last segment carried beyond BLOCK_CREDIT is dropped: its bytes are
	 * inside this block now, and credit must never outlive the data that earned it. */
	pool->acc_credit = 0;
	return 0;
}

/* Feeds credited input into the accumulator, cutting it where the running credit reaches
 * BLOCK_CREDIT so that every block is the hash of input that carried at least that much. */
static int condition(struct eb_pool *pool, const uint8_t *data, size_t len, uint64_t credit)
{
	size_t pos = 0;
	uint64_t base = 0; /* F(pos) */
	int r;

	while (pos < len) {
		uint64_t target = base + (BLOCK_CREDIT - pool->acc_credit);
		size_t end;

		if (target > credit) {
			/* Not enough for a block: the rest waits in the accumulator with its
			 * credit, to be completed by later input. */
			if (EVP_DigestUpdate(pool->acc, data + pos, len - pos) != 1)
				return -EIO;
			pool->acc_credit += (uint32_t)(credit - base);
			return 0;
		}
		end = credit_bytes(target, credit, len);
		assert(end > pos && end <= len);
		if (EVP_DigestUpdate(pool->acc, data + pos, end - pos) != 1)
			return -EIO;
		r = emit_block(pool);
		if (r < 0)
			return r;
		base = credit_prefix(end, credit, len);
		/* The cut falls on a byte: what that byte's share of credit brings beyond the
		 * block's target is inside the block now, and counts for nothing (emit_block()). */
		pool->dropped += base - target;
		pos = end;
	}
	return 0;
}

int eb_pool_add(struct eb_pool *pool, const void *data, size_t len, uint64_t credit_bits,
                uint64_t *ret_credited)
{
	uint64_t room, credit = credit_bits;
	int r;

	assert(pool);
	assert(data || len == 0);

	if (len <= UINT64_MAX / 8)
		credit = MIN(credit, (uint64_t)len * 8);
	/* Room counted in input credit: every free slot takes BLOCK_CREDIT, less what the
	 * accumulator already holds. acc_credit never exceeds that (it is 0 when the ring is
	 * full), because each add is bounded by the room. */
	room = (uint64_t)(pool->nblocks - pool->held) * BLOCK_CREDIT;
	room = room > pool->acc_credit ? room - pool->acc_credit : 0;
	credit = MIN(credit, room);

	if (len == 0) {
		credit = 0;
	} else if (credit == 0) {
		/* Uncredited input never enters the accumulator: the blocks' accounting stays
		 * simple, and the data still counts for something as DRBG additional input. */
		if (EVP_DigestUpdate(pool->spill, data, len) != 1)
			return -EIO;
		pool->spill_dirty = true;
	} else {
		r = condition(pool, data, len, credit);
		if (r < 0)
			return r;
	}

	if (ret_credited)
		*ret_credited = credit;
	return 0;
}

/* Turns the uncredited input received since the last call into the additional input both DRBGs
 * get at their next request. The digest is chained, so no spilled byte is ever dropped even when
 * one DRBG is not asked for output for a long time. */
static int spill_flush(struct eb_pool *pool)
{
	unsigned n = 0;

	if (!pool->spill_dirty)
		return 0;
	if (EVP_DigestFinal_ex(pool->spill, pool->mix, &n) != 1 ||
	    EVP_DigestInit_ex2(pool->spill, NULL, NULL) != 1 ||
	    EVP_DigestUpdate(pool->spill, pool->mix, sizeof(pool->mix)) != 1)
		return -EIO;
	pool->spill_dirty = false;
	pool->mix_xor = pool->mix_drbg = true;
	return 0;
}

static void xor_into(uint8_t *dst, const uint8_t *src, size_t n)
{
	size_t i = 0;

	/* Word at a time through memcpy: no alignment assumption on the caller's buffer, and the
	 * compiler turns it into vector loads. */
	for (; i + 8 <= n; i += 8) {
		uint64_t a, b;

		memcpy(&a, dst + i, 8);
		memcpy(&b, src + i, 8);
		a ^= b;
		memcpy(dst + i, &a, 8);
	}
	for (; i < n; i++)
		dst[i] ^= src[i];
}

static uint32_t blocks_for(size_t len)
{
	return (uint32_t)(eb_pool_block_cost(len) / BLOCK_BITS);
}

uint64_t eb_pool_cost_bits(const struct eb_pool *pool, size_t len)
{
	assert(pool);
	/* Each block stands for BLOCK_CREDIT bits of input, so the credit behind a request is at
	 * least 8 * len + 64 (SP 800-90C RBG3 with a vetted conditioning function). */
	return eb_pool_block_cost(len);
}

int eb_pool_take_full(struct eb_pool *pool, void *buf, size_t len)
{
	uint32_t n = blocks_for(len), first;
	uint8_t *out = buf;
	size_t a;
	int r;

	assert(pool);
	assert(buf || len == 0);

	if (len > TAKE_FULL_MAX)
		return -EMSGSIZE;
	if (len == 0)
		return 0;
	if (n > pool->held)
		return -EAGAIN;

	r = spill_flush(pool);
	if (r < 0)
		return r;
	/* RBG3(XOR), SP 800-90C 6.4: DRBG output XOR conditioned full-entropy bits. The DRBG runs
	 * first so that a failure leaves the pool untouched. */
	if (EVP_RAND_generate(pool->xor_drbg, out, len, DRBG_STRENGTH, 0,
	                      pool->mix_xor ? pool->mix : NULL,
	                      pool->mix_xor ? sizeof(pool->mix) : 0) != 1) {
		explicit_bzero(out, len);
		return -EIO;
	}
	pool->mix_xor = false;

	first = MIN(n, pool->nblocks - pool->head);
	a = MIN(len, (size_t)first * BLOCK_BYTES);
	xor_into(out, block_at(pool, 0), a);
	xor_into(out + a, pool->ring, len - a);
	consume(pool, n);
	return 0;
}

/* Reseeds the DRBG-mode instance with one pool block as its entropy input. In the default
 * provider of OpenSSL 3.0 EVP_RAND_reseed() hands the given entropy to the CTR_DRBG reseed
 * function as entropy_input (SP 800-90A 10.2.1.4), then reseeds again from its own seed source;
 * only the FIPS provider demotes given entropy to additional input (drbg.c,
 * ossl_prov_drbg_reseed). */
static int drbg_reseed(struct eb_pool *pool)
{
	int ok;

	assert(pool->held > 0);
	ok = EVP_RAND_reseed(pool->drbg, 0, block_at(pool, 0), BLOCK_BYTES,
	                     pool->mix_drbg ? pool->mix : NULL,
	                     pool->mix_drbg ? sizeof(pool->mix) : 0);
	/* Spent either way: a block that may have reached a DRBG state is never credited again. */
	consume(pool, 1);
	if (ok != 1)
		return -EIO;
	pool->mix_drbg = false;
	pool->drbg_seeded = true;
	pool->drbg_bytes = 0;
	return 0;
}

int eb_pool_take_drbg(struct eb_pool *pool, void *buf, size_t len, bool may_reseed)
{
	uint8_t *out = buf;
	size_t off, n;
	int r;

	assert(pool);
	assert(buf || len == 0);

	if (len == 0)
		return 0;
	if (!pool->drbg_seeded && (pool->held == 0 || !may_reseed))
		return -EAGAIN;

	r = spill_flush(pool);
	if (r < 0)
		return r;
	for (off = 0; off < len; off += n) {
		/* When the schedule is due but the pool is empty, keep serving: a CTR_DRBG may go
		 * 2^48 requests between reseeds (SP 800-90A 10.2.1 table 3), and sinks in DRBG
		 * mode asked for availability, not fresh entropy. The reseed happens at the first
		 * request that finds a block. */
		if (!pool->drbg_seeded ||
		    (may_reseed && pool->drbg_bytes >= EB_POOL_DRBG_RESEED_BYTES &&
		     pool->held > 0)) {
			r = drbg_reseed(pool);
			if (r < 0)
				goto fail;
		}
		n = MIN(len - off, (size_t)DRBG_CHUNK);
		if (EVP_RAND_generate(pool->drbg, out + off, n, DRBG_STRENGTH, 0,
		                      pool->mix_drbg ? pool->mix : NULL,
		                      pool->mix_drbg ? sizeof(pool->mix) : 0) != 1) {
			r = -EIO;
			goto fail;
		}
		pool->mix_drbg = false;
		pool->drbg_bytes += n;
	}
	return 0;

fail:
	explicit_bzero(out, len);
	return r;
}

uint64_t eb_pool_carried(const struct eb_pool *pool)
{
	assert(pool);
	return pool->acc_credit;
}

uint64_t eb_pool_dropped(const struct eb_pool *pool)
{
	assert(pool);
	return pool->dropped;
}

uint64_t eb_pool_level(const struct eb_pool *pool)
{
	assert(pool);
	return (uint64_t)pool->held * BLOCK_BITS;
}

uint64_t eb_pool_capacity(const struct eb_pool *pool)
{
	assert(pool);
	return (uint64_t)pool->nblocks * BLOCK_BITS;
}

size_t eb_pool_export(struct eb_pool *pool, void *buf, size_t max_len, uint64_t *ret_bits)
{
	uint32_t n, i;
	uint8_t *out = buf;

	assert(pool);
	assert(buf || max_len == 0);

	/* Raw blocks, not RBG3 output: eb_pool_restore() puts them back into the ring as they are
	 * (they are full entropy already), so a stop and a start keep the level, and a copy cannot
	 * fail half-way. A block reaches a client only through take_full's XOR, like any other. */
	n = (uint32_t)MIN(max_len / BLOCK_BYTES, (size_t)pool->held);
	for (i = 0; i < n; i++)
		memcpy(out + (size_t)i * BLOCK_BYTES, block_at(pool, i), BLOCK_BYTES);
	consume(pool, n);
	if (ret_bits)
		*ret_bits = (uint64_t)n * BLOCK_BITS;
	return (size_t)n * BLOCK_BYTES;
}

size_t eb_pool_restore(struct eb_pool *pool, const void *buf, size_t len, uint64_t *ret_bits)
{
	const uint8_t *in = buf;
	uint32_t free_blocks, n, i;

	assert(pool);
	assert(buf || len == 0);

	/* Credit waiting in the accumulator has a claim on free slots: leave it the slots it needs,
	 * so that the room eb_pool_add() computes never goes negative. */
	free_blocks = pool->nblocks - pool->held;
	free_blocks -= MIN(free_blocks, (pool->acc_credit + BLOCK_CREDIT - 1) / BLOCK_CREDIT);
	n = (uint32_t)MIN(len / BLOCK_BYTES, (size_t)free_blocks);
	for (i = 0; i < n; i++)
		memcpy(block_at(pool, pool->held + i), in + (size_t)i * BLOCK_BYTES, BLOCK_BYTES);
	pool->held += n;
	if (ret_bits)
		*ret_bits = (uint64_t)n * BLOCK_BITS;
	return (size_t)n * BLOCK_BYTES;
}
