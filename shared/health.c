/* SPDX-License-Identifier: MIT */
/* SP 800-90B Repetition Count and Adaptive Proportion Tests, the pattern tests beside them,
 * start-up test and quarantine. */
#include "health.h"

#include <assert.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "health-internal.h"
#include "macro.h"

static void restart(struct eb_health *h)
{
	/* A restart runs the start-up test again from scratch: every test forgets what it saw, so
	 * that the clean samples that re-admit the source are judged on their own. */
	h->rct_count = 0;
	h->apt_pos = 0;
	h->apt_count = 0;
	h->pattern = (struct eb_health_pattern){};
	/* The history need not be wiped: seen = 0 makes every lag invalid until refilled. */
	memset(h->period.run, 0, sizeof(h->period.run));
	h->period.seen = 0;
	h->clean = 0;
}

int eb_health_init(struct eb_health *h, double h_per_sample, unsigned bits_per_sample)
{
	unsigned rct, apt, window, period;
	int r;

	assert(h);

	if (bits_per_sample < 1 || bits_per_sample > EB_HEALTH_BITS_MAX)
		return -EINVAL;
	if (!(h_per_sample > 0 && h_per_sample <= bits_per_sample))
		return -EINVAL;

	r = eb_health_rct_cutoff(h_per_sample, EB_HEALTH_ALPHA_LOG2, &rct);
	if (r < 0)
		return r;
	window = eb_health_apt_window(bits_per_sample);
	r = eb_health_apt_cutoff(h_per_sample, window, EB_HEALTH_ALPHA_LOG2, &apt);
	if (r < 0)
		return r;
	/* A source claiming so little that Cp passes a byte has the periodic test off. */
	r = eb_health_period_cutoff(h_per_sample, EB_HEALTH_ALPHA_LOG2, &period);
	if (r == -ERANGE)
		period = 0;
	else if (r < 0)
		return r;

	*h = (struct eb_health){
	    .h = h_per_sample,
	    .bits = bits_per_sample,
	    .rct_cutoff = rct,
	    .apt_window = window,
	    .apt_cutoff = apt,
	    .period_cutoff = period,
	    .state = EB_HEALTH_STARTUP,
	};
	return 0;
}

static void alarm_raise(struct eb_health *h, enum eb_health_test test, unsigned cutoff,
                        unsigned count, uint8_t value)
{
	h->alarms[test]++;
	if (h->state == EB_HEALTH_FAILED) {
		/* Still the same episode: keep the alarm that opened it. */
		h->failure.alarms++;
	} else {
		h->failure = (struct eb_health_failure){
		    .test = test,
		    .cutoff = cutoff,
		    .count = count,
		    .value = value,
		    .sample = h->samples,
		    .alarms = 1,
		};
		h->episodes++;
		h->state = EB_HEALTH_FAILED;
	}
	restart(h);
}

void eb_health_device_alarm(struct eb_health *h)
{
	assert(h);
	alarm_raise(h, EB_HEALTH_TEST_DEVICE, 0, 0, 0);
}

/* An alarm of the pattern tests, as alarm_raise() takes it. */
struct pattern_alarm {
	enum eb_health_test test;
	unsigned cutoff, count;
	uint8_t value;
};

/* Runs the pattern tests on one more sample x, updating p. True when one fires, described in
 * *ret (the difference tests named before PERIOD2, as the RCT is before the APT). The cutoffs
 * are the RCT's and APT's (see health.h for why): C equal differences in a row have probability
 * at most p^(C - 1), as C samples do, since each difference after the first is forced; C - 1
 * samples each equal to the one two before have at most p^(C - 1). */
static bool pattern_step(const struct eb_health *h, struct eb_health_pattern *p, uint8_t x,
                         struct pattern_alarm *ret)
{
	uint8_t mask = (uint8_t)((1u << h->bits) - 1);
	bool lag = false;

	if (p->seen >= 1) {
		uint8_t d = (uint8_t)(x - p->prev[0]) & mask;

		p->drct_count = p->drct_count > 0 && d == p->drct_value ? p->drct_count + 1 : 1;
		p->drct_value = d;
		if (p->dapt_pos == 0) {
			p->dapt_value = d;
			p->dapt_count = 0;
		}
		p->dapt_count += d == p->dapt_value;
		if (++p->dapt_pos == h->apt_window)
			p->dapt_pos = 0;
	}
	if (p->seen >= 2) {
		p->lag_count = x == p->prev[1] ? p->lag_count + 1 : 0;
		lag = true;
	}
	p->prev[1] = p->prev[0];
	p->prev[0] = x;
	p->seen = MIN(p->seen + 1, 2u);

	if (p->seen >= 2 && p->drct_count >= h->rct_cutoff)
		*ret = (struct pattern_alarm){EB_HEALTH_TEST_DIFF_RCT, h->rct_cutoff, p->drct_count,
		                              p->drct_value};
	else if (p->seen >= 2 && p->dapt_count >= h->apt_cutoff)
		*ret = (struct pattern_alarm){EB_HEALTH_TEST_DIFF_APT, h->apt_cutoff, p->dapt_count,
		                              p->dapt_value};
	else if (lag && p->lag_count >= h->rct_cutoff - 1)
		*ret = (struct pattern_alarm){EB_HEALTH_TEST_PERIOD2, h->rct_cutoff - 1,
		                              p->lag_count, x};
	else
		return false;
	return true;
}

enum verdict {
	VERDICT_HOLD,   /* passed, but the start-up test is still running */
	VERDICT_CREDIT, /* passed in state OK */
	VERDICT_ALARM,  /* a test fired */
};

/* Tests one sample, exactly as SP 800-90B states the tests. The fast path below must agree with
 * this sample for sample. */
static enum verdict step(struct eb_health *h, uint8_t x)
{
	struct pattern_alarm pa;
	bool pattern, period;

	if (h->apt_pos == 0) {
		h->apt_value = x;
		h->apt_count = 0;
	}
	h->apt_count += x == h->apt_value;
	if (++h->apt_pos == h->apt_window)
		h->apt_pos = 0;

	h->rct_count = x == h->rct_value ? h->rct_count + 1 : 1;
	h->rct_value = x;
	pattern = pattern_step(h, &h->pattern, x, &pa);
	period = eb_health_period_step(h, &h->period, x);

	/* When both fire on the same sample the RCT is named: a stuck source is the likelier story,
	 * and its count is the more telling one. */
	if (h->rct_count >= h->rct_cutoff) {
		alarm_raise(h, EB_HEALTH_TEST_RCT, h->rct_cutoff, h->rct_count, x);
		h->samples++;
		return VERDICT_ALARM;
	}
	if (h->apt_count >= h->apt_cutoff) {
		alarm_raise(h, EB_HEALTH_TEST_APT, h->apt_cutoff, h->apt_count, h->apt_value);
		h->samples++;
		return VERDICT_ALARM;
	}
	if (pattern) {
		alarm_raise(h, pa.test, pa.cutoff, pa.count, pa.value);
		h->samples++;
		return VERDICT_ALARM;
	}
	if (period) {
		alarm_raise(h, EB_HEALTH_TEST_PERIOD, h->period_cutoff, h->period_cutoff, x);
		h->samples++;
		return VERDICT_ALARM;
	}

	h->samples++;
	switch (h->state) {
	case EB_HEALTH_OK:
		return VERDICT_CREDIT;
	case EB_HEALTH_STARTUP:
	case EB_HEALTH_FAILED:
		/* The sample that completes the start-up test is not credited itself: credit starts
		 * with the first sample tested in state OK. */
		if (++h->clean == EB_HEALTH_STARTUP_SAMPLES)
			h->state = EB_HEALTH_OK;
		return VERDICT_HOLD;
	case _EB_HEALTH_STATE_MAX:
	case _EB_HEALTH_STATE_INVALID:
		break;
	}
	assert(!"bad health state");
	return VERDICT_HOLD;
}

/* Runs both tests over m samples that lie within one APT window and, unless the state is OK,
 * within the running start-up test, without branches that depend on the data: random bits
 * would mispredict half of them. If no alarm would fire, commits and returns true; otherwise
 * leaves h untouched for step() to replay the samples and find the exact one. */
static bool scan(struct eb_health *h, const uint8_t *s, size_t m)
{
	uint8_t last = h->rct_value, a = h->apt_pos == 0 ? s[0] : h->apt_value;
	unsigned run = h->rct_count, b = h->apt_pos == 0 ? 0 : h->apt_count, top = 0;

	for (size_t i = 0; i < m; i++) {
		uint8_t x = s[i];

		run = x == last ? run + 1 : 1;
		last = x;
		top = MAX(top, run);
		b += x == a;
	}

	/* The APT count only grows within a window, so its final value decides. */
	if (top >= h->rct_cutoff || b >= h->apt_cutoff)
		return false;

	h->rct_value = last;
	h->rct_count = run;
	h->apt_value = a;
	h->apt_count = b;
	h->apt_pos = (unsigned)((h->apt_pos + m) % h->apt_window);
	h->samples += m;
	return true;
}

/* How many of s[0..m) equal a. */
static size_t count_equal(const uint8_t *s, size_t m, uint8_t a)
{
	size_t i = 0, n = 0;
	vec_u8 va;

	memset(&va, a, sizeof(va));

	while (i + VEC_LEN <= m) {
		/* Each lane counts one in 16 samples: at most 255 rounds before it wraps. */
		size_t end = i + MIN(m - i, (size_t)255 * VEC_LEN);
		vec_u8 acc = {};

		for (; i + VEC_LEN <= end; i += VEC_LEN)
			acc -= (vec_u8)(vec_load(s + i) == va); /* a lane is 0xff where equal */
		for (size_t k = 0; k < VEC_LEN; k++)
			n += acc[k];
	}
	for (; i < m; i++)
		n += s[i] == a;
	return n;
}

/* Whether s[0..m) has RUN_SCREEN equal samples in a row anywhere. */
#define RUN_SCREEN 4u
static bool has_run4(const uint8_t *s, size_t m)
{
	vec_u8 hit = {};
	size_t i = 0;
	bool tail = false;

	for (; i + VEC_LEN + RUN_SCREEN - 1 <= m; i += VEC_LEN) {
		vec_u8 a = vec_load(s + i), b = vec_load(s + i + 1), c = vec_load(s + i + 2),
		       d = vec_load(s + i + 3);

		hit |= (vec_u8)((a == b) & (b == c) & (c == d));
	}
	for (; i + RUN_SCREEN - 1 < m; i++)
		tail |= (s[i] == s[i + 1]) & (s[i + 1] == s[i + 2]) & (s[i + 2] == s[i + 3]);
	return tail || vec_any(hit);
}

/* The pattern tests over s[0..m) sample by sample, on p. False when one fires. */
static bool pattern_scan_slow(const struct eb_health *h, struct eb_health_pattern *p,
                              const uint8_t *s, size_t m)
{
	struct pattern_alarm a;

	for (size_t i = 0; i < m; i++)
		if (pattern_step(h, p, s[i], &a))
			return false;
	return true;
}

/* Samples a pattern alarm needs at least: 4 equal differences (every RCT cutoff is at least 4)
 * or 3 samples each equal to the one two before (C - 1 >= 3) both span 5 samples. */
#define PATTERN_SPAN 5u

/* Whether any PATTERN_SPAN samples in a row of s[0..m) hold 4 equal differences or 3 samples
 * each equal to the one two before. */
static bool has_pattern5(const uint8_t *s, size_t m, uint8_t mask)
{
	vec_u8 hit = {}, vm;
	size_t i = 0;
	bool tail = false;

	memset(&vm, mask, sizeof(vm));
	for (; i + VEC_LEN + PATTERN_SPAN - 1 <= m; i += VEC_LEN) {
		vec_u8 a = vec_load(s + i), b = vec_load(s + i + 1), c = vec_load(s + i + 2),
		       d = vec_load(s + i + 3), e = vec_load(s + i + 4);
		vec_u8 d1 = (b - a) & vm, d2 = (c - b) & vm, d3 = (d - c) & vm, d4 = (e - d) & vm;

		hit |= (vec_u8)((d1 == d2) & (d2 == d3) & (d3 == d4));
		hit |= (vec_u8)((c == a) & (d == b) & (e == c));
	}
	for (; i + PATTERN_SPAN - 1 < m; i++) {
		uint8_t d1 = (uint8_t)(s[i + 1] - s[i]) & mask,
			d2 = (uint8_t)(s[i + 2] - s[i + 1]) & mask,
			d3 = (uint8_t)(s[i + 3] - s[i + 2]) & mask,
			d4 = (uint8_t)(s[i + 4] - s[i + 3]) & mask;

		tail |= (d1 == d2) & (d2 == d3) & (d3 == d4);
		tail |= (s[i + 2] == s[i]) & (s[i + 3] == s[i + 1]) & (s[i + 4] == s[i + 2]);
	}
	return tail || vec_any(hit);
}

/* How many of the differences s[i] - s[i-1] (masked), for i in [1, m), equal a. */
static size_t count_diff_equal(const uint8_t *s, size_t m, uint8_t a, uint8_t mask)
{
	size_t i = 1, n = 0;
	vec_u8 va, vm;

	memset(&va, a, sizeof(va));
	memset(&vm, mask, sizeof(vm));
	while (i + VEC_LEN <= m) {
		size_t end = i + MIN(m - i, (size_t)255 * VEC_LEN);
		vec_u8 acc = {};

		for (; i + VEC_LEN <= end; i += VEC_LEN)
			acc -= (vec_u8)(((vec_load(s + i) - vec_load(s + i - 1)) & vm) == va);
		for (size_t k = 0; k < VEC_LEN; k++)
			n += acc[k];
	}
	for (; i < m; i++)
		n += ((uint8_t)(s[i] - s[i - 1]) & mask) == a;
	return n;
}

/* The pattern tests over s[0..m) on a copy of their state: true, with the state they end in in
 * *ret, when none fires; step() replays a block that fails. The first PATTERN_SPAN - 1 samples
 * go sample by sample (they continue what came before); any alarm after them needs a pattern of
 * PATTERN_SPAN samples inside the block, which a vector screen looks for. Where it finds none,
 * every run at the block's end is shorter than that, so the state is read off its last
 * samples; the difference APT's count is a vector compare per window. */
static bool pattern_scan(const struct eb_health *h, const uint8_t *s, size_t m,
                         struct eb_health_pattern *ret)
{
	const size_t k = PATTERN_SPAN - 1;
	uint8_t mask = (uint8_t)((1u << h->bits) - 1);
	struct eb_health_pattern p = h->pattern;
	uint8_t last;

	if (h->bits < 4 || h->rct_cutoff < 4 || m < 64) {
		if (!pattern_scan_slow(h, &p, s, m))
			return false;
		*ret = p;
		return true;
	}
	if (!pattern_scan_slow(h, &p, s, k) || has_pattern5(s, m, mask))
		return false;

	/* The difference APT over the differences of samples k..m-1, window by window. */
	for (size_t i = k; i < m;) {
		size_t len = MIN(m - i, (size_t)(h->apt_window - p.dapt_pos));

		if (p.dapt_pos == 0) {
			p.dapt_value = (uint8_t)(s[i] - s[i - 1]) & mask;
			p.dapt_count = 0;
		}
		/* s + i - 1 and len + 1 samples: the len differences ending at s[i..i+len). */
		p.dapt_count += (unsigned)count_diff_equal(s + i - 1, len + 1, p.dapt_value, mask);
		if (p.dapt_count >= h->apt_cutoff)
			return false;
		p.dapt_pos = (unsigned)((p.dapt_pos + len) % h->apt_window);
		i += len;
	}

	/* No run reaches 4 differences or 3 lags, so both end within the last 5 samples. */
	last = (uint8_t)(s[m - 1] - s[m - 2]) & mask;
	p.drct_value = last;
	p.drct_count = 1;
	while (p.drct_count < 4 &&
	       ((uint8_t)(s[m - 1 - p.drct_count] - s[m - 2 - p.drct_count]) & mask) == last)
		p.drct_count++;
	p.lag_count = 0;
	while (p.lag_count < 3 && s[m - 1 - p.lag_count] == s[m - 3 - p.lag_count])
		p.lag_count++;
	p.prev[0] = s[m - 1];
	p.prev[1] = s[m - 2];
	p.seen = 2;
	*ret = p;
	return true;
}

/* scan() without its serial dependency: every RCT cutoff is at least RUN_SCREEN (H <= 8 bits and
 * alpha = 2^-20 give C = 1 + ceil(20 / H) >= 4), so a block without RUN_SCREEN equal samples in a
 * row cannot fire the RCT except through the run it continues, and that run and the one it ends
 * with are a few samples long on data worth testing. The APT count is a vector compare. Where
 * the screen finds a run (a stuck or low-entropy source), scan() decides exactly. Same contract
 * and same committed state as scan(). */
static bool scan_fast(struct eb_health *h, const uint8_t *s, size_t m)
{
	uint8_t a = h->apt_pos == 0 ? s[0] : h->apt_value;
	unsigned b = h->apt_pos == 0 ? 0 : h->apt_count;
	size_t p = 0, t = 1;

	/* Samples under 4 bits wide repeat too often for the screen to pass: straight to scan(). */
	if (h->bits < 4 || h->rct_cutoff < RUN_SCREEN || m == 0)
		return scan(h, s, m);

	/* m is at most an APT window, far below UINT_MAX. */
	b += (unsigned)count_equal(s, m, a);
	if (b >= h->apt_cutoff)
		return false;

	/* The run carried in from the last call goes on for p samples (run counts as scan()'s
	 * does: a restart's 0 becomes 1 on the first sample either way). */
	while (p < m && s[p] == h->rct_value)
		p++;
	if (h->rct_count + p >= h->rct_cutoff)
		return false;
	if (p < m) {
		if (has_run4(s, m))
			return scan(h, s, m);
		/* No run of RUN_SCREEN: the last one, which starts after the carried one, is
		 * shorter. */
		while (t < m && s[m - 1 - t] == s[m - 1])
			t++;
	} else
		t = h->rct_count + m;

	h->rct_value = s[m - 1];
	h->rct_count = (unsigned)t;
	h->apt_value = a;
	h->apt_count = b;
	h->apt_pos = (unsigned)((h->apt_pos + m) % h->apt_window);
	h->samples += m;
	return true;
}

int eb_health_feed(struct eb_health *h, const uint8_t *samples, size_t n, size_t *ret_ok)
{
	size_t ok = 0;

	assert(h);
	assert(samples || n == 0);

	if (h->bits < 1 || h->bits > EB_HEALTH_BITS_MAX)
		return -EINVAL; /* never initialised */

	/* Checked before anything is tested so that a bad buffer leaves no trace. The OR folds
	 * into a vector loop and costs a fraction of the tests themselves. */
	if (h->bits < 8) {
		uint8_t all = 0;

		for (size_t i = 0; i < n; i++)
			all |= samples[i];
		if (all >> h->bits)
			return -EDOM;
	}

	for (size_t i = 0; i < n;) {
		size_t m = MIN(n - i, (size_t)(h->apt_window - h->apt_pos));
		uint8_t run[EB_HEALTH_PERIOD_MAX];
		struct eb_health_pattern p;

		if (h->state != EB_HEALTH_OK)
			m = MIN(m, (size_t)(EB_HEALTH_STARTUP_SAMPLES - h->clean));

		/* scan_fast() commits its state when it passes, so it runs second and the
		 * pattern tests' state is committed after it. */
		if (pattern_scan(h, samples + i, m, &p) &&
		    eb_health_period_scan(h, samples + i, m, run) && scan_fast(h, samples + i, m)) {
			h->pattern = p;
			if (h->period_cutoff > 0)
				eb_health_period_commit(&h->period, samples + i, m, run);
			if (h->state == EB_HEALTH_OK)
				ok += m;
			else if ((h->clean += (unsigned)m) == EB_HEALTH_STARTUP_SAMPLES)
				h->state = EB_HEALTH_OK;
		} else {
			for (size_t j = 0; j < m; j++)
				switch (step(h, samples[i + j])) {
				case VERDICT_HOLD:
					break;
				case VERDICT_CREDIT:
					ok++;
					break;
				case VERDICT_ALARM:
					/* What this call tested before the alarm led up to it. */
					ok = 0;
					break;
				}
		}
		i += m;
	}

	h->credited += ok;
	if (ret_ok)
		*ret_ok = ok;
	return 0;
}

enum eb_health_state eb_health_get_state(const struct eb_health *h)
{
	assert(h);
	return h->state;
}

int eb_health_get_failure(const struct eb_health *h, struct eb_health_failure *ret)
{
	assert(h);
	assert(ret);

	if (h->episodes == 0)
		return -ENODATA;
	*ret = h->failure;
	return 0;
}

static const char *const state_table[_EB_HEALTH_STATE_MAX] = {
    [EB_HEALTH_STARTUP] = "startup",
    [EB_HEALTH_OK] = "ok",
    [EB_HEALTH_FAILED] = "failed",
};

static const char *const test_table[_EB_HEALTH_TEST_MAX] = {
    [EB_HEALTH_TEST_RCT] = "repetition-count",
    [EB_HEALTH_TEST_APT] = "adaptive-proportion",
    [EB_HEALTH_TEST_DIFF_RCT] = "difference-repetition",
    [EB_HEALTH_TEST_DIFF_APT] = "difference-proportion",
    [EB_HEALTH_TEST_PERIOD2] = "period-two",
    [EB_HEALTH_TEST_PERIOD] = "periodic",
    [EB_HEALTH_TEST_DEVICE] = "device",
};

const char *eb_health_state_to_string(enum eb_health_state s)
{
	if (s < 0 || s >= _EB_HEALTH_STATE_MAX)
		return NULL;
	return state_table[s];
}

const char *eb_health_test_to_string(enum eb_health_test t)
{
	if (t < 0 || t >= _EB_HEALTH_TEST_MAX)
		return NULL;
	return test_table[t];
}
