/* SPDX-License-Identifier: MIT */
/* Tests for shared/source.c, the loop every source runs, with the broker client replaced through
 * link seams (-Wl,--wrap=eb_client_*): what is sent and claimed per block, nothing sampled while
 * the broker says SLEEP, a stuck source sending and claiming nothing, --dump-raw receiving
 * exactly the samples taken, --samples stopping exactly, failover on a lost broker and the end
 * on a refusal; the blocks of a fast source sent several to a PUT, a slow one's one by one. The
 * monotonic clock is doubled too (-Wl,--wrap=clock_gettime): it moves only when the input says
 * sampling took time. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "client.h"
#include "macro.h"
#include "source.h"
#include "splitmix64.h"

/* The doubled client: a script of what the broker does, and a record of what was asked. */
static struct fake {
	bool connected;
	int connects;
	bool asleep;         /* what eb_client_asleep() says now */
	int sleep_after_put; /* the broker says SLEEP after this PUT (1-based); 0: never */
	int wakes;           /* eb_client_wait_wake() calls */
	int put_error_at;    /* this PUT (1-based) fails with put_error */
	int put_error;
	int puts;
	uint64_t put_bytes, put_credit;
	uint32_t credits[64];
	size_t lens[64];
	char events[256]; /* 's' sample, 'P' put, 'W' wait for wake, 'C' connect */
	size_t n_events;
	uint64_t now_ns; /* CLOCK_MONOTONIC */
} fake;

/* Longer than the runtime holds a block for others to join it: each block is sent on its own. */
#define SLOW_NS (11 * 1000 * 1000ull)

int __real_clock_gettime(clockid_t id, struct timespec *ts);
int __wrap_clock_gettime(clockid_t id, struct timespec *ts);
int __wrap_clock_gettime(clockid_t id, struct timespec *ts)
{
	if (id != CLOCK_MONOTONIC)
		return __real_clock_gettime(id, ts);
	ts->tv_sec = (time_t)(fake.now_ns / 1000000000u);
	ts->tv_nsec = (long)(fake.now_ns % 1000000000u);
	return 0;
}

static void event(char e)
{
	if (fake.n_events + 1 < sizeof(fake.events))
		fake.events[fake.n_events++] = e;
}

bool __wrap_eb_client_connected(const struct eb_client *c);
bool __wrap_eb_client_connected(const struct eb_client *c)
{
	(void)c;
	return fake.connected;
}

int __wrap_eb_client_connect_retry(struct eb_client *c, int deadline_ms);
int __wrap_eb_client_connect_retry(struct eb_client *c, int deadline_ms)
{
	(void)c;
	(void)deadline_ms;
	fake.connected = true;
	fake.connects++;
	event('C');
	return 0;
}

bool __wrap_eb_client_asleep(const struct eb_client *c);
bool __wrap_eb_client_asleep(const struct eb_client *c)
{
	(void)c;
	return fake.asleep;
}

int __wrap_eb_client_wait_wake(struct eb_client *c);
int __wrap_eb_client_wait_wake(struct eb_client *c)
{
	(void)c;
	fake.wakes++;
	fake.asleep = false;
	event('W');
	return 0;
}

int __wrap_eb_client_put(struct eb_client *c, const void *data, size_t len, uint32_t credit);
int __wrap_eb_client_put(struct eb_client *c, const void *data, size_t len, uint32_t credit)
{
	(void)c;
	(void)data;
	fake.puts++;
	event('P');
	if (fake.puts == fake.put_error_at) {
		fake.connected = false;
		return fake.put_error;
	}
	if ((size_t)fake.puts <= ELEMENTSOF(fake.credits)) {
		fake.credits[fake.puts - 1] = credit;
		fake.lens[fake.puts - 1] = len;
	}
	fake.put_bytes += len;
	fake.put_credit += credit;
	if (fake.puts == fake.sleep_after_put)
		fake.asleep = true;
	return 0;
}

int __wrap_eb_client_flush(struct eb_client *c);
int __wrap_eb_client_flush(struct eb_client *c)
{
	(void)c;
	return 0;
}

uint64_t __wrap_eb_client_bits_credited(const struct eb_client *c);
uint64_t __wrap_eb_client_bits_credited(const struct eb_client *c)
{
	(void)c;
	return fake.put_credit;
}

const char *__wrap_eb_client_broker(const struct eb_client *c);
const char *__wrap_eb_client_broker(const struct eb_client *c)
{
	(void)c;
	return "fake";
}

const char *__wrap_eb_client_last_error(const struct eb_client *c);
const char *__wrap_eb_client_last_error(const struct eb_client *c)
{
	(void)c;
	return "fake error";
}

/* The sampled input: good noise, or a stuck value, served in reads of at most `piece`, each
 * taking ns_per_call. */
struct input {
	uint64_t seed;
	bool stuck;
	uint64_t stuck_at, stuck_len; /* a stuck stretch in good noise: its samples' indexes */
	uint64_t alarm_at;            /* the device reports failed tests here, alarms times */
	unsigned alarms;
	unsigned bits; /* sample width; 0: 8 */
	size_t piece;
	uint64_t ns_per_call;
	uint64_t left; /* samples before the end of the input */
	uint64_t pos;  /* samples handed out */
	uint8_t *copy; /* everything handed out, for --dump-raw */
	size_t copied;
};

static ssize_t sample(void *userdata, uint8_t *buf, size_t n)
{
	struct input *in = userdata;

	event('s');
	/* Nothing is sampled while the broker has said SLEEP. */
	assert_false(fake.asleep);
	if (in->alarms > 0 && in->pos == in->alarm_at) {
		in->alarms--;
		return EB_SOURCE_DEVICE_ALARM;
	}
	n = MIN(n, in->piece);
	n = (size_t)MIN((uint64_t)n, in->left);
	fake.now_ns += in->ns_per_call;
	if (in->stuck)
		memset(buf, 0x42, n);
	else
		splitmix64_samples(&in->seed, buf, n, in->bits ? in->bits : 8);
	for (size_t i = 0; i < n; i++)
		if (in->pos + i >= in->stuck_at && in->pos + i - in->stuck_at < in->stuck_len)
			buf[i] = 0x42;
	in->pos += n;
	if (in->copy) {
		memcpy(in->copy + in->copied, buf, n);
		in->copied += n;
	}
	in->left -= n;
	return (ssize_t)n;
}

static struct eb_client *const client = (struct eb_client *)&fake;

static int setup(void **state)
{
	(void)state;
	fake = (struct fake){};
	return 0;
}

static struct eb_source_params params(uint32_t h, uint32_t cap)
{
	return (struct eb_source_params){
	    .name = "test",
	    .gate = {.bits = 8, .h_mbits = h, .cap_mbits_per_byte = cap},
	    .dump_fd = -EBADF,
	};
}

static void test_blocks_and_credit(void **state)
{
	struct eb_source_params p = params(4000, 8000);
	struct input in = {.seed = 1, .piece = 512, .ns_per_call = SLOW_NS, .left = 5 * 4096 + 100};
	struct eb_source_stats st;

	(void)state;

	assert_int_equal(eb_source_run(client, &p, sample, &in, &st), 0);
	/* Short reads make whole blocks; the last one is what the input had left. The source is
	 * slow, so each block is a PUT of its own. */
	assert_int_equal(fake.puts, 6);
	for (int i = 0; i < 5; i++)
		assert_int_equal(fake.lens[i], 4096);
	assert_int_equal(fake.lens[5], 100);
	/* The start-up test's 1024 samples earn nothing; every other sample 4 bits. */
	assert_int_equal(fake.credits[0], (4096 - 1024) * 4);
	assert_int_equal(fake.credits[1], 4096 * 4);
	assert_int_equal(fake.credits[5], 100 * 4);
	assert_int_equal(st.samples, 5 * 4096 + 100);
	assert_int_equal(st.admitted, 5 * 4096 + 100 - 1024);
	assert_int_equal(st.claimed, (5 * 4096 + 100 - 1024) * 4);
	assert_int_equal(st.credited, st.claimed);
	assert_int_equal(st.bytes, 5 * 4096 + 100);
	assert_int_equal(st.alarms, 0);
	assert_int_equal(fake.connects, 1);
}

static void test_sleep_stops_sampling(void **state)
{
	struct eb_source_params p = params(4000, 8000);
	struct input in = {.seed = 2, .piece = 4096, .ns_per_call = SLOW_NS, .left = 4 * 4096};

	(void)state;

	/* After the second PUT the broker says SLEEP: the next thing the loop does is wait for
	 * WAKE, not sample (sample() asserts that too). */
	fake.sleep_after_put = 2;
	assert_int_equal(eb_source_run(client, &p, sample, &in, NULL), 0);
	assert_string_equal(fake.events, "CsPsPWsPsPs");
	assert_int_equal(fake.wakes, 1);
}

static void test_stuck_source(void **state)
{
	struct eb_source_params p = params(4000, 8000);
	struct input in = {.stuck = true, .piece = 4096, .left = 50 * 4096};
	struct eb_source_stats st;

	(void)state;

	/* A stuck source sends nothing and claims nothing: its blocks prove nothing. */
	assert_int_equal(eb_source_run(client, &p, sample, &in, &st), 0);
	assert_int_equal(fake.puts, 0);
	assert_int_equal(st.claimed, 0);
	assert_int_equal(st.credited, 0);
	assert_int_equal(st.admitted, 0);
	assert_int_equal(st.samples, 50 * 4096);
	/* One failure episode for the whole stuck stretch. */
	assert_int_equal(st.alarms, 1);
}

static void test_low_trust_cap(void **state)
{
	struct eb_source_params p = params(8000, 1000);
	struct input in = {.seed = 3, .piece = 4096, .ns_per_call = SLOW_NS, .left = 3 * 4096};
	struct eb_source_stats st;

	(void)state;

	/* The cap is per byte sent: even the first block, whose 3072 admitted samples earned
	 * 8 bits each, is credited 1 bit per byte. */
	assert_int_equal(eb_source_run(client, &p, sample, &in, &st), 0);
	assert_int_equal(fake.credits[0], 4096);
	assert_int_equal(fake.credits[1], 4096);
	assert_int_equal(st.claimed, 3 * 4096);
}

static void test_untested_source(void **state)
{
	struct eb_source_params p = params(0, 8000);
	struct input in = {.stuck = true, .piece = 4096, .ns_per_call = SLOW_NS, .left = 2 * 4096};
	struct eb_source_stats st;

	(void)state;

	/* Claiming nothing, it sends everything, even stuck data, and is credited nothing. */
	assert_int_equal(eb_source_run(client, &p, sample, &in, &st), 0);
	assert_int_equal(fake.puts, 2);
	assert_int_equal(st.bytes, 2 * 4096);
	assert_int_equal(st.claimed, 0);
	assert_int_equal(st.alarms, 0);
}

static void test_dump_raw_and_max_samples(void **state)
{
	struct eb_source_params p = params(4000, 8000);
	struct input in = {.seed = 4, .piece = 1000, .left = UINT64_MAX};
	static uint8_t copy[3 * 4096], dumped[3 * 4096 + 1];
	struct eb_source_stats st;
	ssize_t k;
	int fd;

	(void)state;

	fd = memfd_create("dump", MFD_CLOEXEC);
	assert_true(fd >= 0);
	in.copy = copy;
	p.dump_fd = fd;
	p.max_samples = 10000;
	assert_int_equal(eb_source_run(client, &p, sample, &in, &st), 0);
	/* Exactly --samples were taken, and the dump holds exactly them, in order. */
	assert_int_equal(st.samples, 10000);
	assert_int_equal(in.copied, 10000);
	/* A fast source: the three blocks went in one PUT, sent when --samples were taken. */
	assert_int_equal(fake.puts, 1);
	assert_int_equal(fake.lens[0], 10000);
	k = pread(fd, dumped, sizeof(dumped), 0);
	assert_int_equal(k, 10000);
	assert_memory_equal(dumped, copy, 10000);
	close(fd);
}

static void test_failover_and_refusal(void **state)
{
	struct eb_source_params p = params(4000, 8000);
	struct input in = {.seed = 5, .piece = 4096, .ns_per_call = SLOW_NS, .left = 4 * 4096};
	struct eb_source_stats st;

	(void)state;

	/* A lost broker: the block in flight is lost, the loop reconnects and goes on. */
	fake.put_error_at = 2;
	fake.put_error = -ECONNRESET;
	assert_int_equal(eb_source_run(client, &p, sample, &in, &st), 0);
	assert_int_equal(fake.connects, 2);
	assert_int_equal(fake.puts, 4);
	assert_int_equal(st.bytes, 3 * 4096);

	/* A refusal ends the run. */
	fake = (struct fake){.put_error_at = 1, .put_error = -EACCES};
	in = (struct input){.seed = 6, .piece = 4096, .ns_per_call = SLOW_NS, .left = 4 * 4096};
	assert_int_equal(eb_source_run(client, &p, sample, &in, &st), -EACCES);
	assert_int_equal(fake.puts, 1);
}

static void test_fast_source_coalesced(void **state)
{
	struct eb_source_params p = params(4000, 8000);
	struct input in = {.seed = 8, .piece = 4096, .left = 40 * 4096 + 100};
	struct eb_source_stats st;

	(void)state;

	/* Blocks sampled back to back go 15 to a PUT (61440 bytes: a 16th would pass 65520, what
	 * fills four TLS records), each with its own credit; the rest at the end of the input. */
	assert_int_equal(eb_source_run(client, &p, sample, &in, &st), 0);
	assert_int_equal(fake.puts, 3);
	assert_int_equal(fake.lens[0], 15 * 4096);
	assert_int_equal(fake.lens[1], 15 * 4096);
	assert_int_equal(fake.lens[2], 10 * 4096 + 100);
	assert_int_equal(fake.credits[0], (15 * 4096 - 1024) * 4);
	assert_int_equal(fake.credits[1], 15 * 4096 * 4);
	assert_int_equal(fake.credits[2], (10 * 4096 + 100) * 4);
	assert_int_equal(st.bytes, 40 * 4096 + 100);
	assert_int_equal(st.claimed, (40 * 4096 + 100 - 1024) * 4);
	assert_int_equal(st.credited, st.claimed);
}

static void test_hold_time(void **state)
{
	struct eb_source_params p = params(4000, 8000);
	struct input in = {.seed = 9, .piece = 4096, .ns_per_call = 3000000, .left = 8 * 4096};

	(void)state;

	/* 3 ms a block: the first block of a PUT has waited 12 ms, past the 10 ms hold, when the
	 * fourth is sampled, so they go four to a PUT. */
	assert_int_equal(eb_source_run(client, &p, sample, &in, NULL), 0);
	assert_string_equal(fake.events, "CssssPssssPs");
	assert_int_equal(fake.lens[0], 4 * 4096);
	assert_int_equal(fake.lens[1], 4 * 4096);
}

static void test_alarm_between_coalesced_blocks(void **state)
{
	struct eb_source_params p = params(4000, 8000);
	struct input in = {.seed = 10,
	                   .piece = 4096,
	                   .stuck_at = 3 * 4096,
	                   .stuck_len = 2 * 4096,
	                   .left = 8 * 4096};
	struct eb_source_stats st;

	(void)state;

	/* Three good blocks are pending when the fourth sticks: they keep their credit and are
	 * sent before the quarantine's rest, which begins with the second stuck block; the stuck
	 * blocks are not sent; the block that re-admits the source earns credit after its 1024
	 * clean samples, and goes out with the rest at the end. */
	p.quarantine_ms = 1;
	assert_int_equal(eb_source_run(client, &p, sample, &in, &st), 0);
	assert_string_equal(fake.events, "CsssssPssssP");
	assert_int_equal(fake.lens[0], 3 * 4096);
	assert_int_equal(fake.credits[0], (3 * 4096 - 1024) * 4);
	assert_int_equal(fake.lens[1], 3 * 4096);
	/* The RCT (cutoff 6) fires every sixth stuck sample, the last time at 8190 of 8192: the
	 * stretch's last two samples already count towards re-admission. */
	assert_int_equal(fake.credits[1], (3 * 4096 - 1024 + 2) * 4);
	assert_int_equal(st.alarms, 1);
	assert_int_equal(st.claimed, (2 * (3 * 4096 - 1024) + 2) * 4);
}

static void test_no_rest_for_one_alarm(void **state)
{
	struct eb_source_params p = params(4000, 8000);
	struct input in = {
	    .seed = 12, .piece = 4096, .stuck_at = 4096 - 8, .stuck_len = 8, .left = 3 * 4096};
	struct eb_source_stats st;
	time_t t0 = time(NULL);

	(void)state;

	/* A run at the end of the first block fires the RCT (cutoff 6) and leaves the source
	 * failed at the block's end; the next block re-admits it. That is a false alarm's story,
	 * not a stuck source's: no 3 s rest. */
	p.quarantine_ms = 3000;
	assert_int_equal(eb_source_run(client, &p, sample, &in, &st), 0);
	assert_int_equal(st.alarms, 1);
	assert_true(time(NULL) - t0 < 2);
	/* The first block's credit went with the alarm; the second earns after its first 1022
	 * samples (the stuck run's last 2 samples after the alarm count as clean). */
	assert_int_equal(st.claimed, (4096 - 1022 + 4096) * 4);
}

static void test_device_alarm(void **state)
{
	struct eb_source_params p = params(4000, 8000);
	struct input in = {.seed = 13,
	                   .piece = 1000,
	                   .ns_per_call = SLOW_NS,
	                   .alarm_at = 2 * 4096 + 1000,
	                   .alarms = 2,
	                   .left = 5 * 4096};
	struct eb_source_stats st;

	(void)state;

	/* The device says twice, 1000 samples into the third block, that its own tests failed:
	 * one episode. Those 1000 samples are dropped, and the start-up test runs again on what
	 * follows, so the next 1024 earn nothing. */
	assert_int_equal(eb_source_run(client, &p, sample, &in, &st), 0);
	assert_int_equal(st.alarms, 1);
	assert_int_equal(st.samples, 5 * 4096 - 1000);
	assert_int_equal(fake.credits[0], (4096 - 1024) * 4);
	assert_int_equal(fake.credits[1], 4096 * 4);
	assert_int_equal(fake.credits[2], (4096 - 1024) * 4);
	assert_int_equal(fake.lens[2], 4096);
	/* Everything taken but the two start-up tests' samples. */
	assert_int_equal(st.claimed, (5 * 4096 - 1000 - 2 * 1024) * 4);
	assert_int_equal(st.bytes, 5 * 4096 - 1000);
}

static void test_packed_samples(void **state)
{
	struct eb_source_params p = params(3000, 8000);
	struct input in = {.seed = 11, .bits = 4, .piece = 1000, .left = 40 * 4096};
	struct eb_source_stats st;

	(void)state;

	/* 4-bit samples go through a buffer of their own and are packed two to a byte: 31 blocks
	 * of 2048 bytes fill a PUT (63488; a 32nd would pass 65520), the rest goes at the end. */
	p.gate.bits = 4;
	assert_int_equal(eb_source_run(client, &p, sample, &in, &st), 0);
	assert_int_equal(fake.puts, 2);
	assert_int_equal(fake.lens[0], 31 * 2048);
	assert_int_equal(fake.lens[1], 9 * 2048);
	assert_int_equal(fake.credits[0], (31 * 4096 - 1024) * 3);
	assert_int_equal(fake.credits[1], 9 * 4096 * 3);
	assert_int_equal(st.bytes, 40 * 2048);
}

static void test_bad_params(void **state)
{
	struct eb_source_params p = params(9000, 8000);
	struct input in = {.seed = 7, .piece = 4096, .left = 4096};

	(void)state;

	assert_int_equal(eb_source_run(client, &p, sample, &in, NULL), -EINVAL);
	p = params(1, 8000);
	assert_int_equal(eb_source_run(client, &p, sample, &in, NULL), -ERANGE);
	assert_int_equal(fake.n_events, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_blocks_and_credit, setup),
	    cmocka_unit_test_setup(test_sleep_stops_sampling, setup),
	    cmocka_unit_test_setup(test_stuck_source, setup),
	    cmocka_unit_test_setup(test_low_trust_cap, setup),
	    cmocka_unit_test_setup(test_untested_source, setup),
	    cmocka_unit_test_setup(test_dump_raw_and_max_samples, setup),
	    cmocka_unit_test_setup(test_failover_and_refusal, setup),
	    cmocka_unit_test_setup(test_fast_source_coalesced, setup),
	    cmocka_unit_test_setup(test_hold_time, setup),
	    cmocka_unit_test_setup(test_alarm_between_coalesced_blocks, setup),
	    cmocka_unit_test_setup(test_no_rest_for_one_alarm, setup),
	    cmocka_unit_test_setup(test_device_alarm, setup),
	    cmocka_unit_test_setup(test_packed_samples, setup),
	    cmocka_unit_test_setup(test_bad_params, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
