/* SPDX-License-Identifier: MIT */
/* A source's raw samples to the bytes it sends and the credit they earn. */
#include "gate.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

#include "macro.h"

int eb_gate_init(struct eb_gate *g, const struct eb_gate_params *p)
{
	struct eb_gate n = {.p = *p};
	int r;

	assert(g);
	assert(p);

	if (p->bits < 1 || p->bits > EB_HEALTH_BITS_MAX)
		return -EINVAL;
	if (p->h_mbits > p->bits * EB_GATE_MBITS_PER_BIT)
		return -EINVAL;
	if (p->cap_mbits_per_byte > 8 * EB_GATE_MBITS_PER_BIT)
		return -EINVAL;
	if (p->vonneumann && p->bits != 1)
		return -EINVAL;

	/* A source that claims nothing needs no cutoffs: its data is mixed in, never credited,
	 * and there is no H to derive them from. Everything it samples is sent. */
	if (p->h_mbits > 0) {
		r = eb_health_init(&n.health, (double)p->h_mbits / EB_GATE_MBITS_PER_BIT, p->bits);
		if (r < 0)
			return r;
		n.tested = true;
	}
	eb_vonneumann_init(&n.vn);
	*g = n;
	return 0;
}

size_t eb_gate_out_max(const struct eb_gate *g, size_t n)
{
	assert(g);

	if (g->p.vonneumann)
		return eb_vonneumann_out_max(&g->vn, n);
	if (g->p.bits == 8)
		return n;
	/* Narrow samples are packed; the last byte of a block may be part empty. */
	return (n * g->p.bits + 7) / 8;
}

uint32_t eb_gate_credit(uint64_t ok, uint32_t h_mbits, size_t len, uint32_t cap_mbits_per_byte,
                        uint64_t *carry)
{
	uint64_t mbits, bits, cap;

	assert(carry);

	/* ok <= EB_GATE_BLOCK_MAX in practice; these products stay far below 2^64 for any ok a
	 * size_t can count on a 64-bit host, and the caller bounds it on others. */
	mbits = ok * h_mbits + *carry;
	bits = mbits / EB_GATE_MBITS_PER_BIT;
	cap = MIN((uint64_t)len * 8, (uint64_t)len * cap_mbits_per_byte / EB_GATE_MBITS_PER_BIT);
	if (bits >= cap) {
		/* A cap binds: what the samples earned beyond it is gone, not saved for later. */
		*carry = 0;
		return (uint32_t)MIN(cap, (uint64_t)UINT32_MAX);
	}
	*carry = mbits % EB_GATE_MBITS_PER_BIT;
	return (uint32_t)bits;
}

/* Packs n samples of bits width into bytes, the first sample in the highest place. */
static size_t pack(const uint8_t *s, size_t n, unsigned bits, uint8_t *out)
{
	unsigned acc = 0, fill = 0;
	size_t len = 0;

	for (size_t i = 0; i < n; i++) {
		acc = acc << bits | s[i];
		fill += bits;
		if (fill >= 8) {
			fill -= 8;
			out[len++] = (uint8_t)(acc >> fill);
			acc &= (1u << fill) - 1;
		}
	}
	if (fill > 0)
		out[len++] = (uint8_t)(acc << (8 - fill));
	return len;
}

int eb_gate_feed(struct eb_gate *g, const uint8_t *samples, size_t n, uint8_t *out, size_t out_size,
                 struct eb_gate_block *ret)
{
	struct eb_gate_block b = {};
	enum eb_health_state before;
	uint64_t episodes;
	size_t ok = 0;
	int r;

	assert(g);
	assert(samples || n == 0);
	assert(ret);

	if (n > EB_GATE_BLOCK_MAX)
		return -E2BIG;
	if (out_size < eb_gate_out_max(g, n))
		return -ENOBUFS;
	if (g->p.bits < 8) {
		uint8_t all = 0;

		for (size_t i = 0; i < n; i++)
			all |= samples[i];
		if (all >> g->p.bits)
			return -EDOM;
	}

	if (g->tested) {
		before = eb_health_get_state(&g->health);
		episodes = g->health.episodes;
		r = eb_health_feed(&g->health, samples, n, &ok);
		if (r < 0)
			return r; /* checked above; the health tests leave no trace either way */
		b.alarm = g->health.episodes != episodes;
		/* Re-admitted: failed at the start of the block or during it, passing at its end.
		 */
		b.readmitted = (before == EB_HEALTH_FAILED || b.alarm) &&
		               eb_health_get_state(&g->health) == EB_HEALTH_OK;
		b.startup_done =
		    before == EB_HEALTH_STARTUP && eb_health_get_state(&g->health) == EB_HEALTH_OK;
		if (b.alarm)
			g->mbits_carry = 0;
	}

	if (g->p.vonneumann) {
		r = eb_vonneumann_feed_bits(&g->vn, samples, n, out, out_size, &b.len);
		if (r < 0)
			return r;
	} else if (g->p.bits == 8) {
		if (out != samples) /* tested in place */
			memcpy(out, samples, n);
		b.len = n;
	} else
		b.len = pack(samples, n, g->p.bits, out);

	b.ok = ok;
	b.credit = g->tested ? eb_gate_credit(ok, g->p.h_mbits, b.len, g->p.cap_mbits_per_byte,
	                                      &g->mbits_carry)
	                     : 0;
	/* A tested source sends only blocks its tests vouched for: in start-up or quarantine its
	 * samples prove nothing and are dropped. An untested one (no claim) sends everything. */
	b.send = b.len > 0 && (!g->tested || ok > 0);
	*ret = b;
	return 0;
}

bool eb_gate_device_alarm(struct eb_gate *g)
{
	uint64_t episodes;

	assert(g);
	if (!g->tested)
		return false;
	episodes = g->health.episodes;
	eb_health_device_alarm(&g->health);
	g->mbits_carry = 0;
	return g->health.episodes != episodes;
}
