/* SPDX-License-Identifier: MIT */
/* Von Neumann debiasing of independent, identically biased bits. */
#include "vonneumann.h"

#include <assert.h>
#include <errno.h>

#include "macro.h"

void eb_vonneumann_init(struct eb_vonneumann *vn)
{
	assert(vn);
	*vn = (struct eb_vonneumann){};
}

size_t eb_vonneumann_out_max(const struct eb_vonneumann *vn, size_t n_bits)
{
	size_t pairs;

	assert(vn);

	/* At most one output bit per pair: n_bits / 2 + 1 cannot overflow, unlike n_bits + 1. */
	pairs = n_bits / 2 + (vn->has_pending && n_bits % 2);
	if (pairs > SIZE_MAX - vn->n_acc)
		return SIZE_MAX;
	return (pairs + vn->n_acc) / 8;
}

/* Takes one pair; a completed output byte goes to out[(*len)++]. */
static void pair(struct eb_vonneumann *vn, unsigned first, unsigned second, uint8_t *out,
                 size_t *len)
{
	/* 01 -> 0 and 10 -> 1: the first bit of an unequal pair. P(01) = P(10) = p(1 - p) for
	 * independent bits, whatever p is. */
	if (first == second)
		return;
	vn->acc = (uint8_t)(vn->acc << 1 | first);
	if (++vn->n_acc < 8)
		return;
	out[(*len)++] = vn->acc;
	vn->acc = 0;
	vn->n_acc = 0;
}

static void push_bit(struct eb_vonneumann *vn, unsigned bit, uint8_t *out, size_t *len)
{
	if (!vn->has_pending) {
		vn->pending = (uint8_t)bit;
		vn->has_pending = true;
		return;
	}
	vn->has_pending = false;
	pair(vn, vn->pending, bit, out, len);
}

int eb_vonneumann_feed_bits(struct eb_vonneumann *vn, const uint8_t *bits, size_t n, uint8_t *out,
                            size_t out_size, size_t *ret_len)
{
	uint8_t all = 0;
	size_t len = 0;

	assert(vn);
	assert(bits || n == 0);
	assert(out || out_size == 0);

	for (size_t i = 0; i < n; i++)
		all |= bits[i];
	if (all > 1)
		return -EDOM;
	if (out_size < eb_vonneumann_out_max(vn, n))
		return -ENOBUFS;

	for (size_t i = 0; i < n; i++)
		push_bit(vn, bits[i], out, &len);

	if (ret_len)
		*ret_len = len;
	return 0;
}

int eb_vonneumann_feed_bytes(struct eb_vonneumann *vn, const uint8_t *data, size_t len,
                             uint8_t *out, size_t out_size, size_t *ret_len)
{
	size_t n = 0;

	assert(vn);
	assert(data || len == 0);
	assert(out || out_size == 0);

	if (len > SIZE_MAX / 8)
		return -ENOBUFS;
	if (out_size < eb_vonneumann_out_max(vn, len * 8))
		return -ENOBUFS;

	for (size_t i = 0; i < len; i++) {
		unsigned byte = data[i];

		if (vn->has_pending) {
			/* An odd bit from feed_bits() shifts the pairing by one. */
			for (int b = 7; b >= 0; b--)
				push_bit(vn, byte >> b & 1, out, &n);
			continue;
		}
		for (int b = 6; b >= 0; b -= 2)
			pair(vn, byte >> (b + 1) & 1, byte >> b & 1, out, &n);
	}

	if (ret_len)
		*ret_len = n;
	return 0;
}
