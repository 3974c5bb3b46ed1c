/* SPDX-License-Identifier: MIT */
/* What shared/health.c's SP 800-90B health tests would have done with a capture, sample by
 * sample, summarised into a fixed number of spans for plotting. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "health.h"

/* One span of consecutive samples. */
struct assess_health_span {
	unsigned rct_max; /* longest run the RCT counted in the span */
	unsigned apt_max; /* highest APT count reached in the span */
	uint64_t alarms;  /* alarms raised in the span */
};

struct assess_health {
	double h;                /* the claim the tests ran with */
	bool h_raised;           /* h is above the estimate: the estimate has no cutoffs */
	struct eb_health health; /* the tests' state after the whole capture */
	/* The alarm that opened the first failure episode (health keeps only the last one's);
	 * valid when health.episodes > 0. */
	struct eb_health_failure first;
	size_t n_spans;
	size_t span_samples; /* samples per span; the last span may hold fewer */
	struct assess_health_span *spans;
};

/* Runs the tests over n samples of bits (1..8) bits with the claim h_claim (bits per sample),
 * summarised into at most n_spans spans. When h_claim is too small for the tests to have cutoffs
 * (eb_health_init() says -ERANGE), they run at the smallest claim that has them and h_raised
 * says so. -EINVAL for a claim out of (0, bits], -ENOMEM. */
int assess_health_run(const uint8_t *s, size_t n, unsigned bits, double h_claim, size_t n_spans,
                      struct assess_health *ret);
void assess_health_done(struct assess_health *a);
