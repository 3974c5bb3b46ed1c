/* SPDX-License-Identifier: MIT */
/* The health tests replayed over a capture. */
#include "assess-health.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "macro.h"

/* The smallest claim in (lo, hi] for which the tests have cutoffs, to within a part in 10^6 of
 * a bit: the cutoffs only grow as the claim falls, so bisection finds the edge. */
static int lowest_claim(double lo, double hi, unsigned bits, double *ret)
{
	struct eb_health h;
	int r;

	r = eb_health_init(&h, hi, bits);
	if (r < 0)
		return r;
	while (hi - lo > 1e-6) {
		double mid = (lo + hi) / 2;

		if (eb_health_init(&h, mid, bits) >= 0)
			hi = mid;
		else
			lo = mid;
	}
	*ret = hi;
	return 0;
}

int assess_health_run(const uint8_t *s, size_t n, unsigned bits, double h_claim, size_t n_spans,
                      struct assess_health *ret)
{
	struct assess_health a = {.h = h_claim};
	int r;

	assert(s || n == 0);
	assert(n_spans > 0);
	assert(ret);

	if (!(h_claim > 0) || h_claim > bits)
		return -EINVAL;
	r = eb_health_init(&a.health, h_claim, bits);
	if (r == -ERANGE) {
		r = lowest_claim(h_claim, bits, bits, &a.h);
		if (r >= 0)
			r = eb_health_init(&a.health, a.h, bits);
		a.h_raised = true;
	}
	if (r < 0)
		return r;

	a.span_samples = MAX((n + n_spans - 1) / n_spans, (size_t)1);
	a.n_spans = (n + a.span_samples - 1) / a.span_samples;
	a.spans = calloc(MAX(a.n_spans, (size_t)1), sizeof(*a.spans));
	if (!a.spans)
		return -ENOMEM;

	/* One sample at a time, to see the counters between samples: an alarm restarts them, so
	 * their peaks are only visible on the way up. The counts a sample brings the tests to are
	 * worked out first, the way health.c's step() counts, because after an alarm the state
	 * holds the restart's zeros instead. */
	for (size_t i = 0; i < n; i++) {
		struct assess_health_span *sp = &a.spans[i / a.span_samples];
		const struct eb_health *h = &a.health;
		uint64_t episodes = h->episodes, alarms = h->failure.alarms;
		unsigned rct = s[i] == h->rct_value ? h->rct_count + 1 : 1;
		unsigned apt = h->apt_pos == 0 ? 1 : h->apt_count + (s[i] == h->apt_value);

		r = eb_health_feed(&a.health, s + i, 1, NULL);
		if (r < 0) {
			free(a.spans);
			return r;
		}
		if (episodes == 0 && h->episodes == 1)
			a.first = h->failure;
		sp->rct_max = MAX(sp->rct_max, rct);
		sp->apt_max = MAX(sp->apt_max, apt);
		/* One sample raises at most one alarm: a new episode, or a repeat within one. */
		sp->alarms += h->episodes != episodes || h->failure.alarms != alarms;
	}

	*ret = a;
	return 0;
}

void assess_health_done(struct assess_health *a)
{
	if (!a)
		return;
	free(a->spans);
	a->spans = NULL;
}
