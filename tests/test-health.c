/* SPDX-License-Identifier: MIT */
/* Tests for shared/health.c: the cutoffs (pinned, and recomputed here by another method), alarms
 * on stuck and biased streams exactly where the spec predicts, silence on long runs of good
 * data, the start-up test, quarantine and re-admission, and a sample-by-sample model that the
 * fast path must match however the input is split into calls. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "binom.h"
#include "health.h"
#include "macro.h"
#include "splitmix64.h"

static void test_pinned_cutoffs(void **state)
{
	unsigned c;

	(void)state;

	/* The anchors issue 4 requires, from SP 800-90B's worked example and Table 2. */
	assert_int_equal(eb_health_rct_cutoff(2, 20, &c), 0);
	assert_int_equal(c, 11);
	assert_int_equal(eb_health_apt_cutoff(1, 512, 20, &c), 0);
	assert_int_equal(c, 311);
	assert_int_equal(eb_health_apt_cutoff(0.5, 1024, 20, &c), 0);
	assert_int_equal(c, 793);

	/* Where the exact cutoff is one above the spec's printed formula (docs/sources.md). */
	assert_int_equal(eb_health_apt_cutoff(1, 1024, 20, &c), 0);
	assert_int_equal(c, 590);
	assert_int_equal(binom_apt_cutoff_sp800_90b(1024, 1, 20), 589);
	assert_int_equal(eb_health_apt_cutoff(2, 512, 20, &c), 0);
	assert_int_equal(c, 178);
	assert_int_equal(binom_apt_cutoff_sp800_90b(512, 2, 20), 177);
	assert_int_equal(eb_health_apt_cutoff(8, 512, 20, &c), 0);
	assert_int_equal(c, 14);
	assert_int_equal(binom_apt_cutoff_sp800_90b(512, 8, 20), 13);

	/* alpha = 2^-30, for a stricter source. */
	assert_int_equal(eb_health_rct_cutoff(1, 30, &c), 0);
	assert_int_equal(c, 31);
	assert_int_equal(eb_health_rct_cutoff(8, 30, &c), 0);
	assert_int_equal(c, 5);
	assert_int_equal(eb_health_apt_cutoff(1, 512, 30, &c), 0);
	assert_int_equal(c, 325);
	assert_int_equal(eb_health_apt_cutoff(8, 512, 30, &c), 0);
	assert_int_equal(c, 17);
}

static void check_grid(unsigned window, double h_min, double h_max, double h_step)
{
	static const unsigned alphas[] = {20, 30, 40};

	for (size_t a = 0; a < ELEMENTSOF(alphas); a++)
		for (double h = h_min; h <= h_max + 1e-9; h += h_step) {
			unsigned c, ref, spec;
			int r;

			r = eb_health_apt_cutoff(h, window, alphas[a], &c);
			ref = binom_apt_cutoff_exact(window, h, alphas[a]);
			if (ref > window) {
				/* The test could never fire: init must refuse such an H. */
				assert_int_equal(r, -ERANGE);
				continue;
			}
			assert_int_equal(r, 0);
			if (c != ref)
				fail_msg("W=%u H=%g alpha=2^-%u: %u, reference %u", window, h,
				         alphas[a], c, ref);

			/* The spec's printed formula is never above the exact one, and at most
			 * one below. */
			spec = binom_apt_cutoff_sp800_90b(window, h, alphas[a]);
			assert_true(spec <= c && c <= spec + 1);

			assert_int_equal(eb_health_rct_cutoff(h, alphas[a], &c), 0);
			assert_int_equal(c, binom_rct_cutoff(h, alphas[a]));
		}
}

static void test_cutoffs_match_reference(void **state)
{
	(void)state;

	check_grid(EB_HEALTH_APT_WINDOW_BINARY, 0.05, 1, 0.01);
	check_grid(EB_HEALTH_APT_WINDOW, 0.05, 8, 0.0625 / 4);
}

static void test_init_errors(void **state)
{
	struct eb_health h = {};
	uint8_t x = 0;
	size_t ok = 77;
	unsigned c;

	(void)state;

	assert_int_equal(eb_health_init(&h, 1, 0), -EINVAL);
	assert_int_equal(eb_health_init(&h, 1, 9), -EINVAL);
	assert_int_equal(eb_health_init(&h, 0, 8), -EINVAL);
	assert_int_equal(eb_health_init(&h, -1, 8), -EINVAL);
	assert_int_equal(eb_health_init(&h, NAN, 8), -EINVAL);
	assert_int_equal(eb_health_init(&h, 1.5, 1), -EINVAL);
	assert_int_equal(eb_health_init(&h, 8.01, 8), -EINVAL);
	assert_int_equal(eb_health_init(&h, 1e-6, 8), -ERANGE);
	/* A binary source this poor would need more than a whole window of equal bits to fail the
	 * APT, so the test could never fire. */
	assert_int_equal(eb_health_init(&h, 0.01, 1), -ERANGE);
	assert_int_equal(eb_health_rct_cutoff(1, 0, &c), -EINVAL);
	assert_int_equal(eb_health_apt_cutoff(1, 1, 20, &c), -EINVAL);

	/* An uninitialised (zeroed) state is refused, not run. */
	assert_int_equal(eb_health_feed(&h, &x, 1, &ok), -EINVAL);
	assert_int_equal(ok, 77);

	assert_int_equal(eb_health_init(&h, 8, 8), 0);
	assert_int_equal(h.rct_cutoff, 4);
	assert_int_equal(h.apt_window, 512);
	assert_int_equal(h.apt_cutoff, 14);
	assert_int_equal(eb_health_get_state(&h), EB_HEALTH_STARTUP);
	assert_int_equal(eb_health_init(&h, 1, 1), 0);
	assert_int_equal(h.rct_cutoff, 21);
	assert_int_equal(h.apt_window, 1024);
	assert_int_equal(h.apt_cutoff, 590);

	/* The periodic test: Cp = ceil(28 / H), and off where that passes a byte. */
	assert_int_equal(eb_health_period_cutoff(8, 20, &c), 0);
	assert_int_equal(c, 4);
	assert_int_equal(eb_health_period_cutoff(4, 20, &c), 0);
	assert_int_equal(c, 7);
	assert_int_equal(eb_health_period_cutoff(1, 20, &c), 0);
	assert_int_equal(c, 28);
	assert_int_equal(eb_health_period_cutoff(0.11, 20, &c), 0);
	assert_int_equal(c, 255);
	assert_int_equal(eb_health_period_cutoff(0.1, 20, &c), -ERANGE);
	assert_int_equal(eb_health_period_cutoff(1, 0, &c), -EINVAL);
	assert_int_equal(eb_health_init(&h, 0.1, 8), 0);
	assert_int_equal(h.period_cutoff, 0);
}

static void test_edom_leaves_state(void **state)
{
	struct eb_health h, before;
	struct eb_health_failure f;
	uint8_t buf[100];
	uint64_t seed = 1;
	size_t ok = 77;

	(void)state;

	assert_int_equal(eb_health_init(&h, 0.5, 1), 0);
	splitmix64_samples(&seed, buf, sizeof(buf), 1);
	assert_int_equal(eb_health_feed(&h, buf, sizeof(buf), &ok), 0);
	memcpy(&before, &h, sizeof(h));

	ok = 77;
	buf[57] = 2;
	assert_int_equal(eb_health_feed(&h, buf, sizeof(buf), &ok), -EDOM);
	assert_int_equal(ok, 77);
	assert_memory_equal(&before, &h, sizeof(h));
	assert_int_equal(eb_health_get_failure(&h, &f), -ENODATA);

	/* Empty input is fine, and NULL ret_ok too. */
	assert_int_equal(eb_health_feed(&h, NULL, 0, &ok), 0);
	assert_int_equal(ok, 0);
	assert_int_equal(eb_health_feed(&h, buf, 10, NULL), 0);
}

/* Feeds n good samples in blocks; asserts nothing fires. */
static void feed_good(struct eb_health *h, uint64_t *seed, size_t n, size_t *ret_ok)
{
	uint8_t buf[4096];
	uint64_t episodes = h->episodes, alarms = h->failure.alarms;
	size_t total = 0;

	while (n > 0) {
		size_t m = MIN(n, sizeof(buf)), ok;

		splitmix64_samples(seed, buf, m, h->bits);
		assert_int_equal(eb_health_feed(h, buf, m, &ok), 0);
		total += ok;
		n -= m;
	}
	assert_int_equal(h->episodes, episodes);
	assert_int_equal(h->failure.alarms, alarms);
	*ret_ok = total;
}

static void test_startup_gating(void **state)
{
	struct eb_health h;
	uint8_t buf[2000];
	uint64_t seed = 2;
	size_t ok;

	(void)state;

	assert_int_equal(eb_health_init(&h, 4, 8), 0);
	splitmix64_samples(&seed, buf, sizeof(buf), 8);

	assert_int_equal(eb_health_feed(&h, buf, 1023, &ok), 0);
	assert_int_equal(ok, 0);
	assert_int_equal(eb_health_get_state(&h), EB_HEALTH_STARTUP);
	/* The sample that completes the start-up test is itself not credited. */
	assert_int_equal(eb_health_feed(&h, buf + 1023, 1, &ok), 0);
	assert_int_equal(ok, 0);
	assert_int_equal(eb_health_get_state(&h), EB_HEALTH_OK);
	assert_int_equal(eb_health_feed(&h, buf + 1024, 10, &ok), 0);
	assert_int_equal(ok, 10);

	/* The same stream in one call credits what follows the start-up samples. */
	assert_int_equal(eb_health_init(&h, 4, 8), 0);
	assert_int_equal(eb_health_feed(&h, buf, sizeof(buf), &ok), 0);
	assert_int_equal(ok, sizeof(buf) - EB_HEALTH_STARTUP_SAMPLES);
	assert_int_equal(h.credited, sizeof(buf) - EB_HEALTH_STARTUP_SAMPLES);
	assert_int_equal(h.samples, sizeof(buf));
}

/* A source stuck on one value from its first sample fails the RCT at exactly its cutoff, both
 * when fed in one call and one sample at a time, and never leaves quarantine. */
static void check_stuck_from_start(unsigned bits, double hps, uint8_t value)
{
	struct eb_health h;
	struct eb_health_failure f;
	uint8_t buf[8192];
	size_t ok;

	memset(buf, value, sizeof(buf));

	assert_int_equal(eb_health_init(&h, hps, bits), 0);
	for (unsigned i = 0; i + 1 < h.rct_cutoff; i++) {
		assert_int_equal(eb_health_feed(&h, &value, 1, &ok), 0);
		assert_int_equal(eb_health_get_state(&h), EB_HEALTH_STARTUP);
	}
	assert_int_equal(eb_health_feed(&h, &value, 1, &ok), 0);
	assert_int_equal(eb_health_get_state(&h), EB_HEALTH_FAILED);
	assert_int_equal(eb_health_get_failure(&h, &f), 0);
	assert_int_equal(f.test, EB_HEALTH_TEST_RCT);
	assert_int_equal(f.cutoff, h.rct_cutoff);
	assert_int_equal(f.count, h.rct_cutoff);
	assert_int_equal(f.value, value);
	assert_int_equal(f.sample, h.rct_cutoff - 1);

	assert_int_equal(eb_health_init(&h, hps, bits), 0);
	assert_int_equal(eb_health_feed(&h, buf, sizeof(buf), &ok), 0);
	assert_int_equal(ok, 0);
	assert_int_equal(eb_health_get_failure(&h, &f), 0);
	assert_int_equal(f.test, EB_HEALTH_TEST_RCT);
	assert_int_equal(f.sample, h.rct_cutoff - 1);
	/* Each restart lets the run grow to the cutoff again. */
	assert_int_equal(f.alarms, sizeof(buf) / h.rct_cutoff);
	assert_int_equal(h.episodes, 1);
	assert_int_equal(eb_health_get_state(&h), EB_HEALTH_FAILED);
	assert_int_equal(h.credited, 0);
}

static void test_stuck_from_start(void **state)
{
	(void)state;

	check_stuck_from_start(8, 8, 0x00);
	check_stuck_from_start(8, 6, 0xff);
	check_stuck_from_start(8, 2, 0x5a);
	check_stuck_from_start(8, 0.5, 0x01);
	check_stuck_from_start(4, 3, 0x0f);
	check_stuck_from_start(1, 1, 1);
	check_stuck_from_start(1, 0.5, 0);
	check_stuck_from_start(1, 0.2, 1);
}

/* A good source that gets stuck after start-up: the alarm comes at the cutoff-th stuck sample,
 * counting a last good sample that happens to equal the stuck value. */
static void check_stuck_later(unsigned bits, double hps, size_t good)
{
	struct eb_health h;
	struct eb_health_failure f;
	uint8_t buf[4096], value;
	uint64_t seed = good * 31 + bits;
	size_t ok, run;

	assert_int_equal(eb_health_init(&h, hps, bits), 0);
	splitmix64_samples(&seed, buf, good, bits);
	assert_int_equal(eb_health_feed(&h, buf, good, &ok), 0);
	assert_int_equal(eb_health_get_state(&h), EB_HEALTH_OK);

	/* Stick to the last good value, so its run counts towards the cutoff. */
	value = buf[good - 1];
	for (run = 0; run < good && buf[good - 1 - run] == value; run++)
		;
	memset(buf, value, sizeof(buf));
	assert_int_equal(eb_health_feed(&h, buf, sizeof(buf), &ok), 0);
	assert_int_equal(ok, 0);
	assert_int_equal(eb_health_get_failure(&h, &f), 0);
	assert_int_equal(f.test, EB_HEALTH_TEST_RCT);
	assert_int_equal(f.sample, good + h.rct_cutoff - run - 1);
	assert_int_equal(f.value, value);
	assert_int_equal(h.credited, good - EB_HEALTH_STARTUP_SAMPLES);
}

static void test_stuck_later(void **state)
{
	(void)state;

	for (size_t good = 1100; good < 1400; good += 37) {
		check_stuck_later(8, 6, good);
		check_stuck_later(8, 1, good);
		check_stuck_later(1, 0.5, good);
	}
}

/* Half the samples are 0, the rest random and never 0, so no value ever repeats and only the APT
 * can see the bias: in a window opened by a 0 it must fire at the (cutoff)th zero, the sample
 * at offset 2 (cutoff - 1) into the window. */
static void test_apt_alternating(void **state)
{
	struct eb_health h;
	struct eb_health_failure f;
	uint8_t buf[4096];
	uint64_t seed = 3;
	size_t ok;

	(void)state;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = i % 2 == 0 ? 0 : (uint8_t)(1 + splitmix64(&seed) % 255);

	assert_int_equal(eb_health_init(&h, 4, 8), 0);
	assert_int_equal(h.apt_cutoff, 63);
	assert_int_equal(eb_health_feed(&h, buf, sizeof(buf), &ok), 0);
	assert_int_equal(eb_health_get_failure(&h, &f), 0);
	assert_int_equal(f.test, EB_HEALTH_TEST_APT);
	assert_int_equal(f.sample, 2 * (63 - 1));
	assert_int_equal(f.count, 63);
	assert_int_equal(f.value, 0);

	/* After a clean start-up the same stream, window-aligned, fires in its first window. */
	assert_int_equal(eb_health_init(&h, 4, 8), 0);
	feed_good(&h, &seed, EB_HEALTH_STARTUP_SAMPLES, &ok);
	assert_int_equal(eb_health_get_state(&h), EB_HEALTH_OK);
	assert_int_equal(eb_health_feed(&h, buf, sizeof(buf), &ok), 0);
	assert_int_equal(eb_health_get_failure(&h, &f), 0);
	assert_int_equal(f.test, EB_HEALTH_TEST_APT);
	assert_int_equal(f.sample, EB_HEALTH_STARTUP_SAMPLES + 2 * (63 - 1));
}

/* Binary: runs of 4 to 11 ones, each followed by a zero. Runs of 11 are far below the RCT cutoff;
 * a window opened by a 1 holds about 7.5/8.5 ones, over the 865 of 1024 that H = 0.35 allows.
 * The runs' lengths are random so that the periodic test (Cp = 81) stays quiet: seven ones and a
 * zero over and over would fire it at sample 88. */
static void test_apt_binary_pattern(void **state)
{
	struct eb_health h;
	struct eb_health_failure f;
	uint8_t buf[4096];
	size_t ok, expect = 0;
	unsigned ones = 0;
	uint64_t seed = 8;

	(void)state;

	for (size_t i = 0; i < sizeof(buf);) {
		size_t run = 4 + splitmix64(&seed) % 8;

		for (size_t j = 0; j < run && i < sizeof(buf); j++)
			buf[i++] = 1;
		if (i < sizeof(buf))
			buf[i++] = 0;
	}
	for (expect = 0; ones < 865; expect++)
		ones += buf[expect];
	expect--;

	assert_int_equal(eb_health_init(&h, 0.35, 1), 0);
	assert_int_equal(h.period_cutoff, 81);
	assert_int_equal(eb_health_feed(&h, buf, sizeof(buf), &ok), 0);
	assert_int_equal(eb_health_get_failure(&h, &f), 0);
	assert_int_equal(f.test, EB_HEALTH_TEST_APT);
	assert_int_equal(f.cutoff, 865);
	assert_int_equal(f.sample, expect);
	assert_int_equal(f.value, 1);
}

/* A random source with a favourite value and no repeats (so the RCT stays quiet): 8-bit samples
 * claimed at H = 6 (cutoff 26 in 512) where 0 comes about one time in eight. A window opened by
 * a 0 then holds about 64 zeros, and one opened by anything else about 2 copies of its value:
 * the first alarm is the APT, in the first window that opens with 0 (for this seed, and with
 * overwhelming probability for any). */
static void test_apt_biased_random(void **state)
{
	struct eb_health h;
	struct eb_health_failure f;
	static uint8_t buf[1 << 16];
	uint64_t seed = 4;
	size_t ok, first_zero_window = SIZE_MAX;

	(void)state;

	for (size_t i = 0; i < sizeof(buf); i++) {
		uint8_t x;

		do {
			uint64_t r = splitmix64(&seed);

			x = (r >> 32) % 8 == 0 ? 0 : (uint8_t)(1 + (r & 0xffffffff) % 255);
		} while (i > 0 && x == buf[i - 1]);
		buf[i] = x;
	}
	for (size_t w = 0; w < sizeof(buf); w += 512)
		if (buf[w] == 0) {
			first_zero_window = w;
			break;
		}
	assert_true(first_zero_window < sizeof(buf));

	/* Up to the end of that window only: later episodes would replace the record. */
	assert_int_equal(eb_health_init(&h, 6, 8), 0);
	assert_int_equal(eb_health_feed(&h, buf, first_zero_window + 512, &ok), 0);
	assert_int_equal(h.episodes, 1);
	assert_int_equal(eb_health_get_failure(&h, &f), 0);
	assert_int_equal(f.test, EB_HEALTH_TEST_APT);
	assert_int_equal(f.value, 0);
	assert_true(f.sample >= first_zero_window && f.sample < first_zero_window + 512);
}

/* Binary, about 80% ones but never more than 10 in a row: claimed H = 0.5, the RCT (41) cannot
 * fire and a window opened by a 1 (about 820 ones) passes the APT's 793 within it. (Claimed at
 * H = 1, the periodic test, Cp = 28, would fire first: two such samples agree 3 times in 4, and
 * 28 agreements in a row at one of 256 lags come every few hundred samples.) */
static void test_apt_biased_binary(void **state)
{
	struct eb_health h;
	struct eb_health_failure f;
	static uint8_t buf[1 << 14];
	uint64_t seed = 5;
	size_t ok, run = 0, first_one_window = SIZE_MAX;

	(void)state;

	for (size_t i = 0; i < sizeof(buf); i++) {
		buf[i] = run < 10 && splitmix64(&seed) % 100 < 85;
		run = buf[i] ? run + 1 : 0;
	}
	for (size_t w = 0; w < sizeof(buf); w += 1024)
		if (buf[w] == 1) {
			first_one_window = w;
			break;
		}

	assert_true(first_one_window < sizeof(buf));
	assert_int_equal(eb_health_init(&h, 0.5, 1), 0);
	assert_int_equal(eb_health_feed(&h, buf, first_one_window + 1024, &ok), 0);
	assert_int_equal(h.episodes, 1);
	assert_int_equal(eb_health_get_failure(&h, &f), 0);
	assert_int_equal(f.test, EB_HEALTH_TEST_APT);
	assert_int_equal(f.value, 1);
	assert_true(f.sample >= first_one_window + 792 && f.sample < first_one_window + 1024);
}

/* 10^7 samples of good data per configuration, none of which may raise an alarm of any test.
 * alpha = 2^-20 is a per-sample false-positive rate, so a claim right at the data's true entropy
 * would alarm now and then by design (8-bit uniform data claimed at H = 8: RCT cutoff 4, about 0.6
 * alarms per 10^7 samples). Each claim here is conservative enough that the expected number of
 * alarms, bounded below from the uniform distribution, is under 1/100: the fixed seed makes the
 * test deterministic, and the bound says that it is not luck. */
static void test_good_data_never_fires(void **state)
{
	static const struct {
		unsigned bits;
		double h;
	} configs[] = {
	    {8, 6}, {8, 4}, {8, 2}, {8, 1}, {8, 0.5}, {4, 2}, {2, 1}, {1, 0.5},
	};
	const size_t n = 10 * 1000 * 1000;

	(void)state;

	for (size_t i = 0; i < ELEMENTSOF(configs); i++) {
		struct eb_health h;
		uint64_t seed = 1000 + i;
		unsigned w;
		long double rct_alarms, apt_alarms, *tail;
		size_t ok;

		assert_int_equal(eb_health_init(&h, configs[i].h, configs[i].bits), 0);

		/* A run reaching the cutoff ends at a given sample with probability at most
		 * 2^-(bits (C - 1)); a window alarms when its first value recurs C - 1 times among
		 * the other W - 1 samples. */
		rct_alarms = n * ldexpl(1, -(int)(configs[i].bits * (h.rct_cutoff - 1)));
		w = h.apt_window;
		tail = calloc(w + 1, sizeof(long double));
		assert_non_null(tail);
		binom_tails(w - 1, ldexpl(1, -(int)configs[i].bits), tail);
		apt_alarms = (n / w + 1) * tail[h.apt_cutoff - 1];
		free(tail);
		/* The pattern tests share the RCT's and APT's bounds: the difference RCT and
		 * PERIOD2 the RCT's, the difference APT the APT's. */
		rct_alarms *= 3;
		apt_alarms *= 2;
		/* The periodic test: Cp matches at any of EB_HEALTH_PERIOD_MAX lags. */
		rct_alarms +=
		    n * EB_HEALTH_PERIOD_MAX * ldexpl(1, -(int)(configs[i].bits * h.period_cutoff));
		if (rct_alarms + apt_alarms >= 0.01L)
			fail_msg("bits=%u H=%g: %Lg alarms expected, claim not conservative",
			         configs[i].bits, configs[i].h, rct_alarms + apt_alarms);

		feed_good(&h, &seed, n, &ok);
		assert_int_equal(eb_health_get_state(&h), EB_HEALTH_OK);
		assert_int_equal(ok, n - EB_HEALTH_STARTUP_SAMPLES);
	}
}

/* A counter earns nothing: bytes 0, 1, 2, ... claimed at H = 4 pass the RCT and APT (no value
 * repeats, every value equally often) but their differences are all 1, and the difference RCT
 * fires at the sample that makes C = 6 equal differences. Stepping by 3 at H = 8 the same. */
static void check_counter(double hps, unsigned step, unsigned expect_cutoff)
{
	static uint8_t buf[1 << 20];
	struct eb_health h;
	struct eb_health_failure f;
	size_t ok;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * step);
	assert_int_equal(eb_health_init(&h, hps, 8), 0);
	assert_int_equal(h.rct_cutoff, expect_cutoff);
	assert_int_equal(eb_health_feed(&h, buf, sizeof(buf), &ok), 0);
	assert_int_equal(ok, 0);
	assert_int_equal(h.credited, 0);
	assert_int_equal(eb_health_get_state(&h), EB_HEALTH_FAILED);
	assert_int_equal(eb_health_get_failure(&h, &f), 0);
	assert_int_equal(f.test, EB_HEALTH_TEST_DIFF_RCT);
	assert_int_equal(f.sample, expect_cutoff);
	assert_int_equal(f.count, expect_cutoff);
	assert_int_equal(f.value, step);
	assert_int_equal(h.alarms[EB_HEALTH_TEST_RCT], 0);
	assert_int_equal(h.alarms[EB_HEALTH_TEST_APT], 0);
}

static void test_counter(void **state)
{
	(void)state;
	check_counter(4, 1, 6);
	check_counter(8, 3, 4);
}

/* ABAB... claimed at H = 1: each value is half the samples, exactly what H = 1 allows (APT
 * cutoff 311 of 512), and no value repeats; the differences alternate, so neither difference
 * test fires. Each sample equals the one two before: PERIOD2 fires at its 20th in a row (C - 1
 * for C = 21), which is sample 21. */
static void test_abab(void **state)
{
	static uint8_t buf[1 << 20];
	struct eb_health h;
	struct eb_health_failure f;
	size_t ok;

	(void)state;
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = i % 2 ? 'B' : 'A';
	assert_int_equal(eb_health_init(&h, 1, 8), 0);
	assert_int_equal(h.rct_cutoff, 21);
	assert_int_equal(eb_health_feed(&h, buf, sizeof(buf), &ok), 0);
	assert_int_equal(ok, 0);
	assert_int_equal(h.credited, 0);
	assert_int_equal(eb_health_get_failure(&h, &f), 0);
	assert_int_equal(f.test, EB_HEALTH_TEST_PERIOD2);
	assert_int_equal(f.cutoff, 20);
	assert_int_equal(f.count, 20);
	assert_int_equal(f.sample, 21);
	assert_int_equal(f.value, 'B');
	assert_int_equal(h.alarms[EB_HEALTH_TEST_DIFF_RCT], 0);
	assert_int_equal(h.alarms[EB_HEALTH_TEST_DIFF_APT], 0);

	/* Binary 0101... : the differences (XOR) are all 1, and the difference RCT is named
	 * (PERIOD2 fires on the same sample). */
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = i % 2;
	assert_int_equal(eb_health_init(&h, 1, 1), 0);
	assert_int_equal(eb_health_feed(&h, buf, sizeof(buf), &ok), 0);
	assert_int_equal(ok, 0);
	assert_int_equal(eb_health_get_failure(&h, &f), 0);
	assert_int_equal(f.test, EB_HEALTH_TEST_DIFF_RCT);
	assert_int_equal(f.sample, 21);
}

/* A walk that steps by 1 every other sample and by a random 2..254 between: no value repeats,
 * values spread evenly, no two differences in a row are equal, no sample equals the one two
 * before (1 + r is never 0 mod 256). Only the difference APT sees that half the differences are
 * 1: at H = 4 (cutoff 63) its first window, opened by the difference at sample 1, fires at the
 * 63rd odd sample, 125. */
static void test_diff_apt(void **state)
{
	static uint8_t buf[1 << 16];
	struct eb_health h;
	struct eb_health_failure f;
	uint64_t seed = 21;
	size_t ok;

	(void)state;
	buf[0] = 7;
	for (size_t i = 1; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(buf[i - 1] + (i % 2 ? 1 : 2 + splitmix64(&seed) % 253));
	assert_int_equal(eb_health_init(&h, 4, 8), 0);
	assert_int_equal(eb_health_feed(&h, buf, sizeof(buf), &ok), 0);
	assert_int_equal(ok, 0);
	assert_int_equal(eb_health_get_failure(&h, &f), 0);
	assert_int_equal(f.test, EB_HEALTH_TEST_DIFF_APT);
	assert_int_equal(f.cutoff, 63);
	assert_int_equal(f.count, 63);
	assert_int_equal(f.sample, 125);
	assert_int_equal(f.value, 1);
	assert_int_equal(h.alarms[EB_HEALTH_TEST_RCT], 0);
	assert_int_equal(h.alarms[EB_HEALTH_TEST_DIFF_RCT], 0);
	assert_int_equal(h.alarms[EB_HEALTH_TEST_PERIOD2], 0);
}

/* A period-256 sequence: x -> 5x + 1 mod 256 visits every byte once per 256, so the RCT, the APT
 * (each value twice a window) and the difference and period-two tests all pass it, and an
 * upstream once had 647,168 bits credited for 81,920 such bytes. From sample 256 on each sample
 * equals the one 256 before: at H = 8 the periodic test (Cp = 4) fires at sample 259, and
 * nothing is ever credited. A random block repeated with period EB_HEALTH_PERIOD_MAX is caught
 * the same way; one repeated with period EB_HEALTH_PERIOD_MAX + 1 is past what the test
 * promises and passes it. */
static void test_periodic(void **state)
{
	static uint8_t buf[81920];
	struct eb_health h;
	struct eb_health_failure f;
	uint64_t seed = 31;
	size_t ok;

	(void)state;
	buf[0] = 0;
	for (size_t i = 1; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(5 * buf[i - 1] + 1);
	assert_int_equal(eb_health_init(&h, 8, 8), 0);
	assert_int_equal(h.period_cutoff, 4);
	assert_int_equal(eb_health_feed(&h, buf, sizeof(buf), &ok), 0);
	assert_int_equal(ok, 0);
	assert_int_equal(h.credited, 0);
	assert_int_equal(eb_health_get_failure(&h, &f), 0);
	assert_int_equal(f.test, EB_HEALTH_TEST_PERIOD);
	assert_int_equal(f.cutoff, 4);
	assert_int_equal(f.count, 4);
	assert_int_equal(f.sample, 259);
	assert_int_equal(f.value, buf[259]);
	assert_string_equal(eb_health_test_to_string(f.test), "periodic");
	for (int t = 0; t < EB_HEALTH_TEST_PERIOD; t++)
		assert_int_equal(h.alarms[t], 0);

	/* The same, one byte at a time: the sample-by-sample path agrees. */
	assert_int_equal(eb_health_init(&h, 8, 8), 0);
	for (size_t i = 0; i < 4096; i++)
		assert_int_equal(eb_health_feed(&h, buf + i, 1, &ok), 0);
	assert_int_equal(h.credited, 0);
	assert_int_equal(eb_health_get_failure(&h, &f), 0);
	assert_int_equal(f.sample, 259);

	/* Random samples repeated at the longest period the test promises, after 4096 good
	 * ones so that the fast path is the one that finds it. */
	for (unsigned period = EB_HEALTH_PERIOD_MAX - 1; period <= EB_HEALTH_PERIOD_MAX + 1;
	     period++) {
		splitmix64_samples(&seed, buf, 4096 + period, 8);
		for (size_t i = 4096 + period; i < sizeof(buf); i++)
			buf[i] = buf[i - period];
		assert_int_equal(eb_health_init(&h, 6, 8), 0);
		assert_int_equal(eb_health_feed(&h, buf, sizeof(buf), &ok), 0);
		if (period > EB_HEALTH_PERIOD_MAX) {
			assert_int_equal(h.episodes, 0);
			continue;
		}
		assert_int_equal(eb_health_get_failure(&h, &f), 0);
		assert_int_equal(f.test, EB_HEALTH_TEST_PERIOD);
		assert_int_equal(f.sample, 4096 + period + h.period_cutoff - 1);
		assert_int_equal(h.credited, 0);
	}
}

/* Random data claimed at its full entropy alarms at the rate alpha, and the pattern tests no
 * more often than the RCT, whose bound they share. 2^24 uniform 4-bit samples at H = 4 (RCT
 * cutoff 6): a run of 6 equal samples, of 6 equal differences, or of 5 samples each equal to the
 * one two before ends at a given sample with probability 2^-20 (15/16 of that for a run that
 * was not already alarming), so each test expects about 15 alarms: a Poisson count that lies in
 * [3, 40] with probability above 1 - 10^-6. The difference APT, like the APT, expects under
 * 2^15 x 2^-20 = 0.03. The seed is fixed, so the figures are the same at every run. */
static void test_pattern_false_positives(void **state)
{
	static uint8_t buf[1 << 16];
	struct eb_health h;
	uint64_t seed = 2020;
	size_t ok;

	(void)state;
	assert_int_equal(eb_health_init(&h, 4, 4), 0);
	assert_int_equal(h.rct_cutoff, 6);
	for (unsigned k = 0; k < (1u << 24) / sizeof(buf); k++) {
		splitmix64_samples(&seed, buf, sizeof(buf), 4);
		assert_int_equal(eb_health_feed(&h, buf, sizeof(buf), &ok), 0);
	}
	print_message("# alarms in 2^24 samples at H = 4: rct %" PRIu64 " apt %" PRIu64
	              " diff-rct %" PRIu64 " diff-apt %" PRIu64 " period-two %" PRIu64
	              " periodic %" PRIu64 "\n",
	              h.alarms[EB_HEALTH_TEST_RCT], h.alarms[EB_HEALTH_TEST_APT],
	              h.alarms[EB_HEALTH_TEST_DIFF_RCT], h.alarms[EB_HEALTH_TEST_DIFF_APT],
	              h.alarms[EB_HEALTH_TEST_PERIOD2], h.alarms[EB_HEALTH_TEST_PERIOD]);
	assert_in_range(h.alarms[EB_HEALTH_TEST_RCT], 3, 40);
	assert_in_range(h.alarms[EB_HEALTH_TEST_DIFF_RCT], 3, 40);
	assert_in_range(h.alarms[EB_HEALTH_TEST_PERIOD2], 3, 40);
	assert_in_range(h.alarms[EB_HEALTH_TEST_DIFF_APT], 0, 2);
	assert_in_range(h.alarms[EB_HEALTH_TEST_APT], 0, 2);
	/* The periodic test (Cp = 7) at each of 254 lags (lags 1 and 2 are the RCT's and
	 * PERIOD2's first) has 7 matches ending at a given sample with probability 2^-28, x 15/16
	 * for a run not already alarming: about 15 alarms in 2^24 samples, the same Poisson
	 * range. */
	assert_int_equal(h.period_cutoff, 7);
	assert_in_range(h.alarms[EB_HEALTH_TEST_PERIOD], 3, 40);
	/* The credit lost to them is the re-admission after each: a few percent at most. */
	assert_true(h.credited > (1u << 24) - 100 * (EB_HEALTH_STARTUP_SAMPLES + sizeof(buf)));
}

static void test_quarantine_readmission(void **state)
{
	struct eb_health h;
	struct eb_health_failure f;
	uint8_t stuck[64], buf[2048];
	uint64_t seed = 6;
	size_t ok;

	(void)state;

	assert_int_equal(eb_health_init(&h, 6, 8), 0);
	feed_good(&h, &seed, 5000, &ok);
	assert_int_equal(ok, 5000 - EB_HEALTH_STARTUP_SAMPLES);

	/* Good samples then a stuck run in one call: nothing of that call is credited. */
	splitmix64_samples(&seed, buf, 100, 8);
	memset(buf + 100, buf[99] ^ 0x80, 20);
	assert_int_equal(eb_health_feed(&h, buf, 120, &ok), 0);
	assert_int_equal(ok, 0);
	assert_int_equal(eb_health_get_state(&h), EB_HEALTH_FAILED);
	assert_int_equal(h.episodes, 1);
	assert_int_equal(eb_health_get_failure(&h, &f), 0);
	assert_int_equal(f.sample, 5000 + 100 + h.rct_cutoff - 1);
	assert_int_equal(f.alarms, 20 / h.rct_cutoff);

	/* 1023 clean samples are not enough; the 1024th re-admits, uncredited itself. */
	splitmix64_samples(&seed, buf, 1024, 8);
	assert_int_equal(eb_health_feed(&h, buf, 1023, &ok), 0);
	assert_int_equal(ok, 0);
	assert_int_equal(eb_health_get_state(&h), EB_HEALTH_FAILED);
	assert_int_equal(eb_health_feed(&h, buf + 1023, 1, &ok), 0);
	assert_int_equal(ok, 0);
	assert_int_equal(eb_health_get_state(&h), EB_HEALTH_OK);
	feed_good(&h, &seed, 100, &ok);
	assert_int_equal(ok, 100);

	/* An alarm during re-admission starts it over, in the same episode. The stuck value
	 * differs from the last sample, so that alarms fall every cutoff samples. */
	memset(stuck, h.rct_value ^ 0x42, sizeof(stuck));
	assert_int_equal(eb_health_feed(&h, stuck, sizeof(stuck), &ok), 0);
	assert_int_equal(h.episodes, 2);
	splitmix64_samples(&seed, buf, 1000, 8);
	assert_int_equal(eb_health_feed(&h, buf, 1000, &ok), 0);
	assert_int_equal(eb_health_get_state(&h), EB_HEALTH_FAILED);
	memset(stuck, h.rct_value ^ 0x42, sizeof(stuck));
	assert_int_equal(eb_health_feed(&h, stuck, h.rct_cutoff, &ok), 0);
	assert_int_equal(eb_health_get_failure(&h, &f), 0);
	assert_int_equal(h.episodes, 2);
	assert_int_equal(f.alarms, sizeof(stuck) / h.rct_cutoff + 1);
	splitmix64_samples(&seed, buf, 1100, 8);
	assert_int_equal(eb_health_feed(&h, buf, 1100, &ok), 0);
	assert_int_equal(eb_health_get_state(&h), EB_HEALTH_OK);
	/* Re-admission and credit within one call: only what follows the start-up test. */
	assert_int_equal(ok, 1100 - EB_HEALTH_STARTUP_SAMPLES);

	/* The record keeps the episode's first alarm, whatever repeats followed. */
	assert_int_equal(f.sample, 5000 + 120 + 1024 + 100 + h.rct_cutoff - 1);
	assert_int_equal(f.test, EB_HEALTH_TEST_RCT);
}

/* The same semantics, one sample at a time and written from the spec's text, for checking the
 * fast path against. */
struct model {
	unsigned bits, rct_cutoff, apt_cutoff, window;
	uint8_t last, a;
	unsigned run, b, pos, clean;
	/* The pattern tests: the last two samples (p0 the last), equal differences in a row, the
	 * difference window, samples in a row equal to the one two before. */
	uint8_t p0, p1, dlast, da;
	unsigned seen, drun, db, dpos, lag;
	/* The periodic test: the samples since the restart (hist[0] the last) and, for each lag
	 * d in 1..EB_HEALTH_PERIOD_MAX, the samples in a row equal to the one d before. */
	unsigned period_cutoff, prun[EB_HEALTH_PERIOD_MAX + 1];
	uint8_t hist[EB_HEALTH_PERIOD_MAX];
	enum eb_health_state state;
	uint64_t samples, episodes, alarms, first_sample;
	enum eb_health_test first_test;
};

enum {
	M_HOLD,
	M_CREDIT,
	M_ALARM,
};

static int model_step(struct model *m, uint8_t x)
{
	int alarm = -1;

	if (m->pos == 0) {
		m->a = x;
		m->b = 1;
	} else
		m->b += x == m->a;
	m->pos++;
	m->run = m->run > 0 && x == m->last ? m->run + 1 : 1;
	m->last = x;

	if (m->seen >= 1) {
		uint8_t d = (uint8_t)((x - m->p0) % (1u << m->bits));

		m->drun = m->drun > 0 && d == m->dlast ? m->drun + 1 : 1;
		m->dlast = d;
		if (m->dpos == 0) {
			m->da = d;
			m->db = 1;
		} else
			m->db += d == m->da;
		m->dpos++;
	}
	if (m->seen >= 2)
		m->lag = x == m->p1 ? m->lag + 1 : 0;
	bool periodic = false;
	for (unsigned d = 1; d <= EB_HEALTH_PERIOD_MAX; d++) {
		m->prun[d] = d <= m->seen && x == m->hist[d - 1] ? m->prun[d] + 1 : 0;
		periodic |= m->period_cutoff > 0 && m->prun[d] >= m->period_cutoff;
	}
	memmove(m->hist + 1, m->hist, sizeof(m->hist) - 1);
	m->hist[0] = x;
	m->p1 = m->p0;
	m->p0 = x;
	m->seen++;

	if (m->run >= m->rct_cutoff)
		alarm = EB_HEALTH_TEST_RCT;
	else if (m->b >= m->apt_cutoff)
		alarm = EB_HEALTH_TEST_APT;
	else if (m->seen >= 2 && m->drun >= m->rct_cutoff)
		alarm = EB_HEALTH_TEST_DIFF_RCT;
	else if (m->seen >= 2 && m->db >= m->apt_cutoff)
		alarm = EB_HEALTH_TEST_DIFF_APT;
	else if (m->seen >= 3 && m->lag >= m->rct_cutoff - 1)
		alarm = EB_HEALTH_TEST_PERIOD2;
	else if (periodic)
		alarm = EB_HEALTH_TEST_PERIOD;
	m->samples++;

	if (alarm >= 0) {
		if (m->state != EB_HEALTH_FAILED) {
			m->episodes++;
			m->alarms = 0;
			m->first_sample = m->samples - 1;
			m->first_test = (enum eb_health_test)alarm;
			m->state = EB_HEALTH_FAILED;
		}
		m->alarms++;
		m->run = 0;
		m->pos = 0;
		m->clean = 0;
		m->seen = m->drun = m->dpos = m->lag = 0;
		memset(m->prun, 0, sizeof(m->prun));
		return M_ALARM;
	}
	if (m->dpos == m->window)
		m->dpos = 0;
	if (m->pos == m->window)
		m->pos = 0;
	if (m->state == EB_HEALTH_OK)
		return M_CREDIT;
	if (++m->clean == EB_HEALTH_STARTUP_SAMPLES)
		m->state = EB_HEALTH_OK;
	return M_HOLD;
}

/* A stream of good stretches, stuck runs around the RCT cutoff, biased stretches, and counters
 * and ABAB stretches around the pattern tests' cutoffs. */
static void mixed_stream(uint64_t *seed, uint8_t *buf, size_t n, unsigned bits, unsigned rct)
{
	uint8_t mask = (uint8_t)((1u << bits) - 1);

	for (size_t i = 0; i < n;) {
		uint64_t r = splitmix64(seed);
		size_t len = MIN(n - i, (size_t)(1 + r % 3000));

		switch ((r >> 32) % 7) {
		case 0:
		case 1:
			splitmix64_samples(seed, buf + i, len, bits);
			break;
		case 6: {
			/* Random samples repeated with a period of 3..300, for a run at that lag of
			 * up to twice the periodic test's cutoff (any period above the test's
			 * maximum must pass it). */
			size_t period = 3 + (r >> 40) % 298;

			len = MIN(n - i, period + (size_t)((r >> 50) % (2 * rct + 2)));
			splitmix64_samples(seed, buf + i, MIN(len, period), bits);
			for (size_t j = period; j < len; j++)
				buf[i + j] = buf[i + j - period];
			break;
		}
		case 4:
			len = MIN(n - i, (size_t)(1 + (r >> 40) % (2 * rct + 2)));
			for (size_t j = 0; j < len; j++)
				buf[i + j] = (uint8_t)(((r >> 48) + j * (1 + (r >> 56))) & mask);
			break;
		case 5:
			len = MIN(n - i, (size_t)(1 + (r >> 40) % (2 * rct + 2)));
			for (size_t j = 0; j < len; j++)
				buf[i + j] = (uint8_t)((j % 2 ? r >> 48 : r >> 56) & mask);
			break;
		case 2:
			len = MIN(n - i, (size_t)(1 + (r >> 40) % (2 * rct + 2)));
			memset(buf + i, (r >> 48) & mask, len);
			break;
		default:
			for (size_t j = 0; j < len; j++) {
				uint64_t s = splitmix64(seed);

				buf[i + j] = s % 4 == 0 ? 0 : (uint8_t)((s >> 8) & mask);
			}
			break;
		}
		i += len;
	}
}

static void check_against_model(unsigned bits, double hps, uint64_t seed)
{
	static uint8_t buf[200000];
	struct eb_health h;
	struct eb_health_failure f;
	struct model m;

	assert_int_equal(eb_health_init(&h, hps, bits), 0);
	m = (struct model){
	    .bits = bits,
	    .rct_cutoff = h.rct_cutoff,
	    .apt_cutoff = h.apt_cutoff,
	    .window = h.apt_window,
	    .period_cutoff = h.period_cutoff,
	    .state = EB_HEALTH_STARTUP,
	};
	mixed_stream(&seed, buf, sizeof(buf), bits, h.rct_cutoff);

	for (size_t i = 0; i < sizeof(buf);) {
		/* Calls of every size, from one sample to several windows. */
		uint64_t r = splitmix64(&seed);
		size_t len = MIN(sizeof(buf) - i, (size_t)(r % 4 == 0 ? 1 + r % 7 : 1 + r % 5000));
		size_t ok, expect = 0;

		for (size_t j = 0; j < len; j++)
			switch (model_step(&m, buf[i + j])) {
			case M_HOLD:
				break;
			case M_CREDIT:
				expect++;
				break;
			case M_ALARM:
				expect = 0;
				break;
			}

		assert_int_equal(eb_health_feed(&h, buf + i, len, &ok), 0);
		assert_int_equal(ok, expect);
		assert_int_equal(eb_health_get_state(&h), m.state);
		assert_int_equal(h.samples, m.samples);
		assert_int_equal(h.episodes, m.episodes);
		if (m.episodes > 0) {
			assert_int_equal(eb_health_get_failure(&h, &f), 0);
			assert_int_equal(f.alarms, m.alarms);
			assert_int_equal(f.sample, m.first_sample);
			assert_int_equal(f.test, m.first_test);
		}
		i += len;
	}
	/* The stream must have exercised every path to mean anything. */
	assert_true(m.episodes > 1);
	assert_true(h.credited > 0);
	assert_true(h.alarms[EB_HEALTH_TEST_DIFF_RCT] > 0);
	assert_true(h.alarms[EB_HEALTH_TEST_PERIOD2] > 0 || bits == 1);
	assert_true(h.alarms[EB_HEALTH_TEST_PERIOD] > 0);
}

static void test_fast_path_matches_model(void **state)
{
	(void)state;

	for (uint64_t seed = 0; seed < 4; seed++) {
		/* H = 8 and 7 have the RCT cutoff (4) that the fast path's run screen looks for
		 * exactly; 6 one above it. */
		check_against_model(8, 8, seed);
		check_against_model(8, 7, seed);
		check_against_model(8, 6, seed);
		check_against_model(8, 2, seed);
		check_against_model(4, 3, seed);
		check_against_model(2, 1.5, seed);
		check_against_model(1, 1, seed);
		check_against_model(1, 0.5, seed);
	}
}

static void test_strings(void **state)
{
	(void)state;

	for (int i = 0; i < _EB_HEALTH_STATE_MAX; i++)
		assert_non_null(eb_health_state_to_string(i));
	for (int i = 0; i < _EB_HEALTH_TEST_MAX; i++)
		assert_non_null(eb_health_test_to_string(i));
	assert_null(eb_health_state_to_string(_EB_HEALTH_STATE_MAX));
	assert_null(eb_health_state_to_string(_EB_HEALTH_STATE_INVALID));
	assert_null(eb_health_test_to_string(_EB_HEALTH_TEST_INVALID));
	assert_string_equal(eb_health_test_to_string(EB_HEALTH_TEST_RCT), "repetition-count");
	assert_string_equal(eb_health_state_to_string(EB_HEALTH_FAILED), "failed");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pinned_cutoffs),
	    cmocka_unit_test(test_cutoffs_match_reference),
	    cmocka_unit_test(test_init_errors),
	    cmocka_unit_test(test_edom_leaves_state),
	    cmocka_unit_test(test_startup_gating),
	    cmocka_unit_test(test_stuck_from_start),
	    cmocka_unit_test(test_stuck_later),
	    cmocka_unit_test(test_apt_alternating),
	    cmocka_unit_test(test_apt_binary_pattern),
	    cmocka_unit_test(test_apt_biased_random),
	    cmocka_unit_test(test_apt_biased_binary),
	    cmocka_unit_test(test_good_data_never_fires),
	    cmocka_unit_test(test_counter),
	    cmocka_unit_test(test_abab),
	    cmocka_unit_test(test_diff_apt),
	    cmocka_unit_test(test_periodic),
	    cmocka_unit_test(test_pattern_false_positives),
	    cmocka_unit_test(test_quarantine_readmission),
	    cmocka_unit_test(test_fast_path_matches_model),
	    cmocka_unit_test(test_strings),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
