/* SPDX-License-Identifier: MIT */
/* SplitMix64 (Steele, Lea, Flood 2014): a small, fast, deterministic generator that passes
 * BigCrush, so a fixed seed stands in for a good noise source in tests and benchmarks. Never
 * used for anything secret. */
#pragma once

#include <stddef.h>
#include <stdint.h>

static inline uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* Fills buf with n uniform samples of bits (1..8) bits each, one per byte. */
static inline void splitmix64_samples(uint64_t *state, uint8_t *buf, size_t n, unsigned bits)
{
	uint64_t word = 0;
	unsigned left = 0;

	for (size_t i = 0; i < n; i++) {
		if (left < bits) {
			word = splitmix64(state);
			left = 64;
		}
		buf[i] = (uint8_t)(word & ((1u << bits) - 1));
		word >>= bits;
		left -= bits;
	}
}
