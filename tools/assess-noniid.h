/* SPDX-License-Identifier: MIT */
/* SP 800-90B's non-IID track (NIST SP 800-90B, January 2018, section 6.3, with 3.1.3's rule for
 * samples wider than a bit): the ten estimators on the samples and on their bit string, and the
 * lowest of them as the assessed min-entropy. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum assess_estimator {
	ASSESS_MCV,
	ASSESS_COLLISION,
	ASSESS_MARKOV,
	ASSESS_COMPRESSION,
	ASSESS_TUPLE,
	ASSESS_LRS,
	ASSESS_MULTI_MCW,
	ASSESS_LAG,
	ASSESS_MULTI_MMC,
	ASSESS_LZ78Y,
	_ASSESS_ESTIMATOR_MAX,
	_ASSESS_ESTIMATOR_INVALID = -EINVAL,
};

struct assess_noniid {
	size_t samples;
	unsigned bits;     /* bits per sample, 1..8 */
	unsigned alphabet; /* distinct values among the samples */
	size_t bitstring;  /* bits the bit-string estimators ran on; 0: they did not run */
	/* Bits per sample (literal) and per bit (bit string); NaN: not run or nothing to say. */
	double literal[_ASSESS_ESTIMATOR_MAX];
	double bitstring_h[_ASSESS_ESTIMATOR_MAX];
	double h_original;  /* the lowest literal estimate, at most bits */
	double h_bitstring; /* the lowest bit-string estimate, at most 1 */
	double min_entropy; /* min(h_original, bits x h_bitstring) */
};

/* SP 800-90B asks for 10^6 samples; fewer than this say nothing. */
#define ASSESS_SAMPLES_MIN 1000u
/* A capture is held whole, and its bit string takes eight times as much. */
#define ASSESS_SAMPLES_MAX (64u << 20)

const char *assess_estimator_to_string(enum assess_estimator e);
/* The name the JSON output and the reference table use. */
const char *assess_estimator_to_key(enum assess_estimator e);

/* How many low bits the samples use: the position of the highest bit set anywhere, at least 1. */
unsigned assess_sample_bits(const uint8_t *s, size_t n);

/* Assesses n samples of bits bits. The samples, mapped onto their own alphabet, are the literal
 * data; when they take more than two values, their binary expansion (bits bits a sample, the
 * most significant first) is assessed too. Samples of two values only are assessed as bits.
 * -EDOM when every sample is the same (no entropy at all: *ret says 0), -ERANGE for n < 2,
 * -ENOMEM. */
int assess_noniid_run(const uint8_t *s, size_t n, unsigned bits, struct assess_noniid *ret);
/* The same on the samples alone, with no bit string: what the restart tests' row and column
 * assessments run (SP 800-90B 3.1.4.3). */
int assess_noniid_literal(const uint8_t *s, size_t n, unsigned bits, struct assess_noniid *ret);
