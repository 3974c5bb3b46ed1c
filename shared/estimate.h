/* SPDX-License-Identifier: MIT */
/* A conservative estimate of a raw capture's min-entropy per sample (one sample per byte, the
 * --dump-raw format), from a subset of the NIST SP 800-90B section 6.3 non-IID estimators that
 * are simple to implement exactly:
 *
 *   6.3.1 most common value (with the 99 % upper bound on its probability),
 *   6.3.2 collision (binary),
 *   6.3.3 Markov (binary),
 *   6.3.8 lag prediction (global with its 99 % upper bound, and local from the longest run).
 *
 * As 90B section 6.3 prescribes for samples wider than one bit, the symbol estimators (MCV, lag)
 * run on the samples and every estimator runs on the samples' bit string (most significant of the
 * sample's bits first); the result is min(H_symbols, bits x H_bitstring). This is a lower-effort
 * cousin of NIST's ea_non_iid, which has more estimators: a source's claim must sit well below
 * what this gives, and anyone can check a claim with the real tool on the same capture.
 *
 * Pure apart from one allocation for the bit string; used by eb-assess and tests/tools/min-entropy.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* 90B asks for 10^6 samples; fewer than this say nothing. */
#define EB_ESTIMATE_SAMPLES_MIN 1000u
/* The capture is held whole, and its bit string takes eight times as much. */
#define EB_ESTIMATE_SAMPLES_MAX (64u << 20)

struct eb_estimate {
	size_t samples;
	unsigned bits; /* bits per sample, 1..8 */
	/* On the samples, bits per sample. */
	double mcv;
	double lag;
	/* On the bit string, bits per bit. */
	double bit_mcv;
	double bit_collision;
	double bit_markov;
	double bit_lag;
	double h_original;  /* min(mcv, lag) */
	double h_bitstring; /* min of the four bit-string estimates, at most 1 */
	double min_entropy; /* min(h_original, bits x h_bitstring), bits per sample */
};

/* How many low bits the samples use: the position of the highest bit set anywhere, at least 1. */
unsigned eb_estimate_sample_bits(const uint8_t *s, size_t n);

/* Estimates n samples of bits (1..8) bits each. -EINVAL for bits out of range, -ERANGE for n
 * outside [EB_ESTIMATE_SAMPLES_MIN, EB_ESTIMATE_SAMPLES_MAX], -EDOM when a sample is wider than
 * bits, -ENOMEM. */
int eb_estimate_min_entropy(const uint8_t *s, size_t n, unsigned bits, struct eb_estimate *ret);
