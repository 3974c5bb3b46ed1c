/* SPDX-License-Identifier: MIT */
/* The gate between a source's raw samples and what it sends: each block is health-tested, then
 * debiased or packed into bytes, and earns the credit its tested samples allow. Pure: no I/O,
 * no clock, no allocation. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "health.h"
#include "vonneumann.h"

/* Raw samples per block, the unit of health testing. An alarm discards the credit of the samples
 * its block tested before it. A block is never larger than a PUT; the source runtime sends the
 * blocks of a fast source several to a PUT. */
#define EB_GATE_BLOCK_DEFAULT 4096u
#define EB_GATE_BLOCK_MAX     (64u * 1024u)

/* Credit is reckoned in millibits (1/1000 bit), as HELLO states a source's claim. */
#define EB_GATE_MBITS_PER_BIT 1000u

struct eb_gate_params {
	unsigned bits;               /* bits per raw sample, 1..8 */
	uint32_t h_mbits;            /* claimed min-entropy per raw sample; 0: claim nothing */
	uint32_t cap_mbits_per_byte; /* most credit per byte sent, 0..8000 */
	bool vonneumann;             /* Von Neumann debias; 1-bit samples only */
};

/* What one block became. */
struct eb_gate_block {
	size_t len;        /* bytes to send (in the caller's out buffer) */
	uint32_t credit;   /* bits of entropy they may be credited with */
	size_t ok;         /* samples the health tests admitted for credit */
	bool send;         /* false: the block earned nothing and is not worth sending */
	bool alarm;        /* a new failure episode began in this block */
	bool readmitted;   /* the source passed re-admission after a failure in this block */
	bool startup_done; /* the start-up test passed in this block */
};

/* All fields are read-only outside gate.c. */
struct eb_gate {
	struct eb_gate_params p;
	bool tested; /* health tests run: only when something is claimed */
	struct eb_health health;
	struct eb_vonneumann vn;
	uint64_t mbits_carry; /* credit below one bit, carried to the next block */
};

/* -EINVAL for parameters out of range (Von Neumann on samples wider than a bit, H above the
 * sample width, a cap above 8 bits per byte); the health tests' -ERANGE for an H so small that
 * their cutoffs do not exist. */
int eb_gate_init(struct eb_gate *g, const struct eb_gate_params *p);

/* The bytes a block of n samples can become; size the out buffer of eb_gate_feed() with it. */
size_t eb_gate_out_max(const struct eb_gate *g, size_t n);

/* Passes n raw samples (one per byte, n <= EB_GATE_BLOCK_MAX) through the gate into out, which
 * may be samples itself for 8-bit samples without Von Neumann debiasing (they are sent as they
 * are); otherwise the two must not overlap.
 * Credit is the least of: the admitted samples times H (fractions of a bit carry over to the
 * next block that earns credit), 8 bits per byte sent, and the cap per byte sent. -EDOM when a
 * sample is wider than the sample width, -ENOBUFS when out_size is below eb_gate_out_max(),
 * -E2BIG for a block over EB_GATE_BLOCK_MAX; g is unchanged then. */
int eb_gate_feed(struct eb_gate *g, const uint8_t *samples, size_t n, uint8_t *out, size_t out_size,
                 struct eb_gate_block *ret);

/* The device reports that its own health tests failed: a health alarm (eb_health_device_alarm())
 * when the gate tests at all, and the credit below one bit carried so far is dropped. True when
 * that opened a new failure episode, as eb_gate_block.alarm says for a block. */
bool eb_gate_device_alarm(struct eb_gate *g);

/* The credit rule alone, for a block whose admitted samples have been counted:
 * min(floor((ok x h_mbits + *carry) / 1000), 8 x len, floor(len x cap / 1000)), with *carry
 * updated to the remainder below one bit; the remainder is dropped when a cap binds. */
uint32_t eb_gate_credit(uint64_t ok, uint32_t h_mbits, size_t len, uint32_t cap_mbits_per_byte,
                        uint64_t *carry);
