/* SPDX-License-Identifier: MIT */
/* The entropy pool: conditioned input with credit, full-entropy (SP 800-90C RBG3(XOR)) and DRBG
 * output. Pure: no I/O, no clock; memory is allocated once at creation, locked and wiped. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct eb_pool;

/* Bits of pool credit spent beyond the n bits handed out, per SP 800-90C RBG3: the conditioning
 * function must see at least n + 64 bits of entropy to emit n bits of full entropy. */
#define EB_POOL_OVERHEAD_BITS 64

/* The pool's unit: one conditioned block, one SHA-512 output, credited and spent whole. */
#define EB_POOL_BLOCK_BYTES 64
#define EB_POOL_BLOCK_BITS  (8 * EB_POOL_BLOCK_BYTES)

/* The block-cost rule, the one place it is written: a full-entropy take of len bytes lowers the
 * level by 8 * len rounded up to whole blocks, since a block serves one request only and the
 * tail of the last one is wiped. A DRBG seed or reseed spends one block. Needs no pool, so that
 * a decision made before taking (the broker's scheduler) uses the same rule. */
static inline uint64_t eb_pool_block_cost(size_t len)
{
	return (uint64_t)((len + EB_POOL_BLOCK_BYTES - 1) / EB_POOL_BLOCK_BYTES) *
	       EB_POOL_BLOCK_BITS;
}

/* The most bytes a full-entropy take may ask for with level_bits of level: the largest len whose
 * eb_pool_block_cost() is at most level_bits. */
static inline size_t eb_pool_block_backed(uint64_t level_bits)
{
	return (size_t)(level_bits / EB_POOL_BLOCK_BITS) * EB_POOL_BLOCK_BYTES;
}

/* Bits a DRBG-mode instance is seeded with from the pool before it serves anything. */
#define EB_POOL_DRBG_SEED_BITS 256

/* Creates a pool of capacity_bits (a multiple of 512, at least 4096, at most 2^31). The buffer is
 * mlock()ed (failure to lock is not fatal: *ret_locked says whether it worked, may be NULL). */
int eb_pool_new(uint64_t capacity_bits, struct eb_pool **ret, bool *ret_locked);
/* Wipes and frees; accepts NULL, returns NULL. */
struct eb_pool *eb_pool_free(struct eb_pool *pool);

/* Conditions len bytes claimed to carry credit_bits of entropy into the pool. credit_bits is
 * clamped to 8 * len. What is credited is at most the room left below capacity; data beyond
 * that is still mixed (into the DRBGs) but not credited. Returns 0 and the bits of input credit
 * accepted in *ret_credited (may be NULL). Level and credit differ: every 512 + 64 credited bits
 * become one 512-bit full-entropy block, and the level rises by 512 when that block is made
 * (credit short of a block waits in the pool's accumulator, outside the level). */
int eb_pool_add(struct eb_pool *pool, const void *data, size_t len, uint64_t credit_bits,
                uint64_t *ret_credited);

/* Fills buf with len bytes of full-entropy output, backed by at least 8 * len + 64 bits of pool
 * credit, and lowers the level by what was used. -EAGAIN when the pool cannot back the whole
 * request, -EIO when the DRBG fails (nothing is taken then, buf is wiped); -EMSGSIZE for len over
 * 64 KiB. */
int eb_pool_take_full(struct eb_pool *pool, void *buf, size_t len);

/* Fills buf with len bytes of DRBG output. The DRBG is seeded from 256 + 64 bits of pool credit
 * (one 512-bit block of level) on first use and reseeded from the pool every
 * EB_POOL_DRBG_RESEED_BYTES when the pool has a block; -EAGAIN when it has never been seeded and
 * the pool cannot seed it. With may_reseed false the pool's level is left alone: a seeded DRBG
 * serves without its scheduled reseed (the caller rations how often DRBG mode may spend a block),
 * an unseeded one gives -EAGAIN. */
#define EB_POOL_DRBG_RESEED_BYTES (1u << 20)
int eb_pool_take_drbg(struct eb_pool *pool, void *buf, size_t len, bool may_reseed);

/* Level bits a full-entropy request of len bytes costs, exactly what take_full lowers the level
 * by: eb_pool_block_cost(len). The EB_POOL_OVERHEAD_BITS were paid when each
 * block was conditioned, so in input credit the request costs at least 8 * len + 64. The broker
 * uses it to answer EMPTY before trying. */
uint64_t eb_pool_cost_bits(const struct eb_pool *pool, size_t len);

uint64_t eb_pool_level(const struct eb_pool *pool); /* credited bits held */
/* Input credit waiting in the accumulator for the rest of a block: 0 .. 575, outside the level. */
uint64_t eb_pool_carried(const struct eb_pool *pool);
/* Input credit dropped since creation: at each block's cut, what the cutting byte's share of
 * credit brought beyond the block's 576 bits. So every credit eb_pool_add() accepted is, to the
 * bit, 576 per block conditioned, carried, or dropped (docs/pool.md). */
uint64_t eb_pool_dropped(const struct eb_pool *pool);
uint64_t eb_pool_capacity(const struct eb_pool *pool); /* bits */

/* Moves up to max_len bytes of pool content out for a seed file: full-entropy bytes that keep
 * their credit (8 bits each), taken from the level. Returns the byte count written to buf. */
size_t eb_pool_export(struct eb_pool *pool, void *buf, size_t max_len, uint64_t *ret_bits);
/* The inverse of eb_pool_export(), for a seed file saved by it: puts whole 64-byte full-entropy
 * blocks from buf back as they are, each raising the level by 512, as far as there is room. They
 * are not conditioned again (they already are full entropy), so a stop and a start keep the level.
 * Returns the byte count taken (a multiple of 64); the caller mixes the rest in uncredited. */
size_t eb_pool_restore(struct eb_pool *pool, const void *buf, size_t len, uint64_t *ret_bits);
