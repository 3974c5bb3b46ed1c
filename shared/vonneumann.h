/* SPDX-License-Identifier: MIT */
/* Von Neumann debiasing of a bit source: each pair of bits 01 gives 0, 10 gives 1, 00 and 11 give
 * nothing. Independent bits with any fixed bias come out unbiased; correlated bits do not, which
 * is why the health tests run on the raw samples first. Pure and stateful across calls: an odd
 * input bit and an unfinished output byte wait for the next call. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct eb_vonneumann {
	uint8_t pending; /* first bit of an unfinished pair, when has_pending */
	bool has_pending;
	uint8_t acc;    /* output bits gathered so far, the first in the highest place */
	unsigned n_acc; /* how many, 0..7 */
};

void eb_vonneumann_init(struct eb_vonneumann *vn);

/* The most whole bytes a feed of n_bits more input bits can emit from vn's current state; size
 * out with it. SIZE_MAX if it cannot be represented. */
size_t eb_vonneumann_out_max(const struct eb_vonneumann *vn, size_t n_bits);

/* Debiases n one-bit samples, one per byte (0 or 1), the form eb_health_feed() takes for bit
 * sources. Whole output bytes go to out, packed first bit in the most significant place; their
 * count goes to *ret_len. -EDOM if a sample is not 0 or 1, -ENOBUFS if out_size is below
 * eb_vonneumann_out_max(); vn is unchanged then. */
int eb_vonneumann_feed_bits(struct eb_vonneumann *vn, const uint8_t *bits, size_t n, uint8_t *out,
                            size_t out_size, size_t *ret_len);

/* The same for len bytes of packed bits, most significant bit first. */
int eb_vonneumann_feed_bytes(struct eb_vonneumann *vn, const uint8_t *data, size_t len,
                             uint8_t *out, size_t out_size, size_t *ret_len);
