/* SPDX-License-Identifier: MIT */
/* SP 800-90B continuous health tests (section 4.4) on a source's raw samples, with the start-up
 * test and the quarantine that decides which samples may be credited. Beside them, three pattern
 * tests with the same cutoffs catch what the two cannot see and a hostile or broken device
 * finds cheapest to send: counters and arithmetic progressions (the RCT and APT on the
 * differences of successive samples) and ABAB... (a run of samples equal to the one two
 * before); a fourth catches any sequence that repeats with a period of up to
 * EB_HEALTH_PERIOD_MAX samples. Pure: no I/O, no clock, no allocation; the state is embedded by
 * value in its owner. */
#pragma once

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

/* False-positive probability of each test, as -log2(alpha). SP 800-90B recommends alpha in
 * [2^-40, 2^-20]; the lax end keeps the tests quick to catch a source that has gone bad. */
#define EB_HEALTH_ALPHA_LOG2 20u

/* Samples are at most a byte wide and are passed one per byte, as NIST's assessment tool reads
 * them, so that a --dump-raw capture is tested by exactly the bytes we tested. */
#define EB_HEALTH_BITS_MAX 8u

/* The APT window (SP 800-90B 4.4.2): 1024 for binary samples, 512 for everything else. */
#define EB_HEALTH_APT_WINDOW_BINARY 1024u
#define EB_HEALTH_APT_WINDOW        512u

/* The start-up test (SP 800-90B 4.3) is both tests over this many consecutive samples with no
 * alarm. It is also the re-admission test after a failure: a whole number of APT windows, so
 * passing it means at least one full, clean window of each kind. */
#define EB_HEALTH_STARTUP_SAMPLES 1024u

/* The longest period the periodic test catches: a run of samples each equal to the one d before,
 * for any d in 1..EB_HEALTH_PERIOD_MAX, fires it (a hostile upstream once sent x -> 5x + 1 mod
 * 256, period 256, and passed every other test). A power of two and a multiple of 16. */
#define EB_HEALTH_PERIOD_MAX 256u

/* Ceiling on any cutoff: an RCT cutoff above it means an H so small the source is worthless. */
#define EB_HEALTH_CUTOFF_MAX 65536u

enum eb_health_state {
	EB_HEALTH_STARTUP, /* the start-up test has not passed yet; nothing is credited */
	EB_HEALTH_OK,      /* tests passing; samples are credited */
	EB_HEALTH_FAILED,  /* a test fired; nothing is credited until the start-up test passes again
	                    */
	_EB_HEALTH_STATE_MAX,
	_EB_HEALTH_STATE_INVALID = -EINVAL,
};

enum eb_health_test {
	EB_HEALTH_TEST_RCT, /* Repetition Count Test, SP 800-90B 4.4.1 */
	EB_HEALTH_TEST_APT, /* Adaptive Proportion Test, SP 800-90B 4.4.2 */
	/* The pattern tests. For independent samples with P(any value) <= p = 2^-H, a difference
	 * x[i] - x[i-1] (mod 2^bits) takes any given value with probability at most p too, whatever
	 * came before x[i]; so does x[i] == x[i-2]. Hence the RCT's and APT's bounds, and cutoffs,
	 * hold for them unchanged: */
	EB_HEALTH_TEST_DIFF_RCT, /* the RCT on differences: C equal differences in a row */
	EB_HEALTH_TEST_DIFF_APT, /* the APT on differences, in windows of its own */
	EB_HEALTH_TEST_PERIOD2,  /* C - 1 samples in a row each equal to the one two before */
	/* The periodic test: Cp samples in a row each equal to the one d before, for some d in
	 * 1..EB_HEALTH_PERIOD_MAX. One lag alone would alarm with probability p^Cp; the union over
	 * the EB_HEALTH_PERIOD_MAX lags is held to alpha by Cp = ceil((alpha_log2 +
	 * log2(EB_HEALTH_PERIOD_MAX)) / H), so the test as a whole keeps the false-positive rate
	 * of the others. Off (cutoff 0) when Cp would pass 255, i.e. H < 28/255 bits. */
	EB_HEALTH_TEST_PERIOD,
	/* Not a test run here: the device reports that its own tests failed (a ComScire QNG's
	 * bad-statistics bit). No cutoff, count or value; eb_health_device_alarm() raises it. */
	EB_HEALTH_TEST_DEVICE,
	_EB_HEALTH_TEST_MAX,
	_EB_HEALTH_TEST_INVALID = -EINVAL,
};

/* The alarm that put the source into quarantine: the first one of the current (or last)
 * failure episode, so a log line names what tripped, not the latest repeat. */
struct eb_health_failure {
	enum eb_health_test test;
	unsigned cutoff; /* the test's cutoff */
	unsigned count;  /* the count it reached; tests fire the moment it reaches the cutoff */
	uint8_t value;   /* the sample value repeated (RCT, PERIOD2, PERIOD) or over-represented
	                  * (APT);   the difference, for the DIFF tests */
	uint64_t
	    sample; /* 0-based index, counted from eb_health_init(), of the sample that fired */
	uint64_t alarms; /* alarms in this episode; a stuck source keeps raising them */
};

/* All fields are read-only outside health.c. */
struct eb_health {
	/* Fixed by eb_health_init(). */
	double h;            /* claimed min-entropy per sample, bits */
	unsigned bits;       /* bits per sample, 1..8 */
	unsigned rct_cutoff; /* RCT fires when a value repeats this many times in a row */
	unsigned apt_window;
	unsigned apt_cutoff;    /* APT fires when a window's first value occurs this many times */
	unsigned period_cutoff; /* the periodic test's Cp; 0 when it is off */

	uint8_t rct_value;
	unsigned rct_count; /* length of the current run; 0 after a restart */
	uint8_t apt_value;  /* the window's first sample */
	unsigned apt_count; /* occurrences of apt_value so far in the window, itself included */
	unsigned apt_pos;   /* samples seen in the window; 0 means the next sample opens one */

	/* The pattern tests' state, forgotten at a restart as the others are. */
	struct eb_health_pattern {
		uint8_t prev[2];     /* the last sample, and the one before */
		unsigned seen;       /* samples since the restart, counted up to 2 */
		uint8_t drct_value;  /* the last difference */
		unsigned drct_count; /* equal differences in a row, that one included */
		uint8_t dapt_value;  /* the first difference of the window */
		unsigned dapt_count; /* its occurrences in the window so far */
		unsigned dapt_pos;   /* differences seen in the window; 0 opens one */
		unsigned lag_count;  /* samples in a row equal to the one two before */
	} pattern;

	/* The periodic test's state, forgotten at a restart too (seen = 0, runs zeroed). */
	struct eb_health_period {
		/* The last EB_HEALTH_PERIOD_MAX samples, each stored twice, so that they lie in
		 * order, oldest first, at hist[pos..pos + EB_HEALTH_PERIOD_MAX). */
		uint8_t hist[2 * EB_HEALTH_PERIOD_MAX];
		/* run[k]: samples in a row, ending with the last, each equal to the one
		 * EB_HEALTH_PERIOD_MAX - k before it (lane k is lag EB_HEALTH_PERIOD_MAX - k). */
		uint8_t run[EB_HEALTH_PERIOD_MAX];
		unsigned pos;  /* 0..EB_HEALTH_PERIOD_MAX - 1 */
		unsigned seen; /* samples since the restart, counted up to EB_HEALTH_PERIOD_MAX */
	} period;

	enum eb_health_state state;
	unsigned clean; /* alarm-free samples into the running start-up test */

	uint64_t samples;  /* tested since init */
	uint64_t credited; /* of which creditable (summed ret_ok) */
	uint64_t episodes; /* times the state went to FAILED from STARTUP or OK */
	/* Every alarm since init, by the test that raised it. */
	uint64_t alarms[_EB_HEALTH_TEST_MAX];
	struct eb_health_failure failure;
};

/* Prepares h for a source whose samples are bits_per_sample (1..8) wide and carry h_per_sample
 * bits of min-entropy each (0 < H <= bits_per_sample). -EINVAL for values outside those ranges,
 * -ERANGE when H is so small that a cutoff passes EB_HEALTH_CUTOFF_MAX or the APT could never
 * fire. The state starts at EB_HEALTH_STARTUP. */
int eb_health_init(struct eb_health *h, double h_per_sample, unsigned bits_per_sample);

/* Runs every test on n samples, one per byte. *ret_ok is how many of them may be credited:
 * samples tested in state OK, not counting any before the last alarm of this call (they led up to
 * it). A caller that conditions the whole buffer credits *ret_ok x H bits for it. -EDOM when a
 * sample has bits above bits_per_sample; h is unchanged then. */
int eb_health_feed(struct eb_health *h, const uint8_t *samples, size_t n, size_t *ret_ok);

/* The device says its own health tests failed: an alarm as one of ours would raise (a new
 * episode unless one is under way, the start-up test run again from scratch), counted under
 * EB_HEALTH_TEST_DEVICE at sample h->samples. */
void eb_health_device_alarm(struct eb_health *h);

enum eb_health_state eb_health_get_state(const struct eb_health *h);

/* Copies the alarm that opened the current or last failure episode; -ENODATA if none has. */
int eb_health_get_failure(const struct eb_health *h, struct eb_health_failure *ret);

/* Cutoffs for a false-positive probability of 2^-alpha_log2, pure functions of their arguments:
 *   RCT: C = 1 + ceil(alpha_log2 / H)                                     (SP 800-90B 4.4.1)
 *   APT: the smallest C with P(B >= C) <= alpha, where B = 1 + Binomial(W - 1, 2^-H) counts the
 *        window's first sample and its repeats among the other W - 1,     (SP 800-90B 4.4.2)
 *        i.e. C = 2 + CRITBINOM(W - 1, 2^-H, 1 - alpha).
 * The APT form is exact; the spec's printed 1 + CRITBINOM(W, 2^-H, 1 - alpha) is one lower for
 * some H (e.g. W = 512, H = 2: 177 vs 178) and then exceeds alpha, by up to a factor of 3. */
int eb_health_rct_cutoff(double h_per_sample, unsigned alpha_log2, unsigned *ret);
int eb_health_apt_cutoff(double h_per_sample, unsigned window, unsigned alpha_log2, unsigned *ret);
/* The periodic test's Cp = ceil((alpha_log2 + log2(EB_HEALTH_PERIOD_MAX)) / H): the smallest C
 * with EB_HEALTH_PERIOD_MAX x 2^-(H C) <= 2^-alpha_log2; -ERANGE above 255. */
int eb_health_period_cutoff(double h_per_sample, unsigned alpha_log2, unsigned *ret);
unsigned eb_health_apt_window(unsigned bits_per_sample);

const char *eb_health_state_to_string(enum eb_health_state s);
const char *eb_health_test_to_string(enum eb_health_test t);
