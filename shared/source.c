/* SPDX-License-Identifier: MIT */
#include "source.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "io.h"
#include "log.h"
#include "proto.h"
#include "time-util.h"

/* journalctl MESSAGE_ID= for a source's health-test failure and its re-admission; the catalog
 * explains both. */
#define MSGID_HEALTH_ALARM "3c2022901111464f90e9aa4e20d64086"
#define MSGID_HEALTH_OK    "b319abeea24c4c83b1fec169e0cea9af"

/* Blocks that a fast source samples back to back are sent together, up to this many bytes a PUT:
 * with the frame and PUT headers (16 bytes) that is 64 KiB, four full 16 KiB TLS records. One
 * PUT per 4 KiB block cost the source a TLS record, a write(2) and an ACK each, and the broker a
 * frame each: over TLS they took more CPU than the health tests. */
#define PUT_BYTES_MAX (EB_DATA_MAX - EB_FRAME_HEADER_SIZE - 8u) /* 8: credit and length */

/* The longest a block waits for others to join it, counted from when its sampling began. A source
 * slower than a block per PUT_HOLD_NS thus sends each block as soon as it has it, as before. */
#define PUT_HOLD_NS (10 * 1000 * 1000ull)

static int ensure_connected(struct eb_client *c)
{
	int r;

	if (!c || eb_client_connected(c))
		return 0;
	r = eb_client_connect_retry(c, 0);
	if (r < 0)
		return log_error_errno(r, "Cannot reach a broker: %s", eb_client_last_error(c));
	log_info("Donating to %s", eb_client_broker(c));
	return 0;
}

/* Takes up to n samples, calling the source until it has them all or its input ends, so that
 * a device read in small pieces still makes whole blocks. *ret_eof says the input ended;
 * *ret_alarm that the device reported a failure of its own tests, and then none of the samples
 * taken is kept (0). */
static ssize_t take(eb_source_sample_t sample, void *userdata, uint8_t *buf, size_t n,
                    bool *ret_eof, bool *ret_alarm)
{
	size_t got = 0;

	*ret_eof = false;
	*ret_alarm = false;
	while (got < n) {
		ssize_t k = sample(userdata, buf + got, n - got);

		if (k == EB_SOURCE_DEVICE_ALARM) {
			/* Sampled while the device was failing its tests: worth nothing. */
			explicit_bzero(buf, got);
			*ret_alarm = true;
			return 0;
		}
		if (k < 0)
			return k;
		if (k == 0) {
			*ret_eof = true;
			break;
		}
		if ((size_t)k > n - got)
			return -EOVERFLOW; /* the source broke its contract */
		got += (size_t)k;
	}
	return (ssize_t)got;
}

static void log_alarm(const struct eb_source_params *p, const struct eb_gate *g)
{
	struct eb_health_failure f;
	char fields[512];

	if (eb_health_get_failure(&g->health, &f) < 0)
		return;
	if (f.test == EB_HEALTH_TEST_DEVICE) {
		snprintf(fields, sizeof(fields),
		         "MESSAGE_ID=" MSGID_HEALTH_ALARM "\nEB_SOURCE=%s\nEB_HEALTH_TEST=%s\n"
		         "EB_HEALTH_SAMPLE=%" PRIu64 "\nEB_HEALTH_H_MBITS=%" PRIu32,
		         p->name, eb_health_test_to_string(f.test), f.sample, p->gate.h_mbits);
		log_struct(
		    LOG_WARNING, fields,
		    "Health test failed: the device reports that its own tests failed (sample %" PRIu64
		    "); crediting nothing until %u clean samples re-admit %s",
		    f.sample, EB_HEALTH_STARTUP_SAMPLES, p->name);
		return;
	}
	snprintf(fields, sizeof(fields),
	         "MESSAGE_ID=" MSGID_HEALTH_ALARM "\nEB_SOURCE=%s\nEB_HEALTH_TEST=%s\n"
	         "EB_HEALTH_CUTOFF=%u\nEB_HEALTH_COUNT=%u\nEB_HEALTH_VALUE=%u\n"
	         "EB_HEALTH_SAMPLE=%" PRIu64 "\nEB_HEALTH_H_MBITS=%" PRIu32,
	         p->name, eb_health_test_to_string(f.test), f.cutoff, f.count, f.value, f.sample,
	         p->gate.h_mbits);
	log_struct(LOG_WARNING, fields,
	           "Health test failed: %s test, cutoff %u, count %u (value 0x%02x, sample %" PRIu64
	           "); crediting nothing until %u clean samples re-admit %s",
	           eb_health_test_to_string(f.test), f.cutoff, f.count, f.value, f.sample,
	           EB_HEALTH_STARTUP_SAMPLES, p->name);
}

static void log_readmitted(const struct eb_source_params *p, const struct eb_gate *g)
{
	char fields[256];

	snprintf(fields, sizeof(fields),
	         "MESSAGE_ID=" MSGID_HEALTH_OK "\nEB_SOURCE=%s\nEB_HEALTH_ALARMS=%" PRIu64, p->name,
	         g->health.failure.alarms);
	log_struct(LOG_NOTICE, fields,
	           "Health tests passed %u clean samples after %" PRIu64
	           " alarm(s); crediting %s again",
	           EB_HEALTH_STARTUP_SAMPLES, g->health.failure.alarms, p->name);
}

static void log_start(const struct eb_source_params *p, const struct eb_gate *g)
{
	const struct eb_gate_params *gp = &p->gate;

	if (!g->tested) {
		log_info(
		    "Sampling %s: %u-bit samples, claiming no entropy (mixed in, not credited)",
		    p->name, gp->bits);
		return;
	}
	log_info("Sampling %s: %u-bit samples, H = %" PRIu32 ".%03" PRIu32
	         " bits each; RCT cutoff %u, APT cutoff %u in %u; at most %" PRIu32 ".%03" PRIu32
	         " bits credited per byte%s",
	         p->name, gp->bits, gp->h_mbits / 1000, gp->h_mbits % 1000, g->health.rct_cutoff,
	         g->health.apt_cutoff, g->health.apt_window, gp->cap_mbits_per_byte / 1000,
	         gp->cap_mbits_per_byte % 1000, gp->vonneumann ? "; Von Neumann debiased" : "");
}

/* The vetted bytes of the blocks sampled since the last PUT, and the credit they earned. */
struct pending {
	uint8_t *buf;
	size_t size; /* room for PUT_BYTES_MAX or one block's output, whichever is more */
	size_t len;
	uint32_t credit;
	uint64_t since; /* when the sampling of its first block began */
};

/* Sends what is pending as one PUT and wipes it; it is gone either way, since what a lost broker
 * had in flight is not sent twice. Only a refusal (-EACCES) is returned: a lost broker is failed
 * over by the loop. */
static int send_pending(struct eb_client *c, struct pending *q, struct eb_source_stats *st)
{
	int r;

	if (q->len == 0)
		return 0;
	/* Capturing alone (no broker), or while the broker is full: the conditioned bytes have
	 * nowhere to go, and are wiped. */
	if (!c || eb_client_asleep(c)) {
		explicit_bzero(q->buf, q->len);
		q->len = 0;
		q->credit = 0;
		return 0;
	}
	r = eb_client_put(c, q->buf, q->len, q->credit);
	explicit_bzero(q->buf, q->len);
	if (r == -EACCES)
		log_error("Broker %s refused the data: %s", eb_client_broker(c),
		          eb_client_last_error(c));
	else if (r < 0)
		log_warning("Lost broker %s: %s; failing over", eb_client_broker(c),
		            eb_client_last_error(c));
	else {
		st->bytes += q->len;
		st->claimed += q->credit;
	}
	q->len = 0;
	q->credit = 0;
	return r == -EACCES ? r : 0;
}

/* One run of eb_source_run(): what it was given, and what it holds between blocks. */
struct run {
	struct eb_client *c;
	const struct eb_source_params *p;
	eb_source_sample_t sample;
	void *userdata;
	struct eb_source_stats st;
	struct eb_gate g;
	struct pending q;
	size_t block; /* samples a block */
	/* 8-bit samples are sent as they are: they are sampled straight behind what is pending
	 * and tested there, not copied from a buffer of their own (raw) that would need a wipe
	 * too. */
	bool in_place;
	uint8_t *raw;
	bool capturing_asleep; /* told SLEEP, and still sampling for --dump-raw */
};

static int gate_start(struct eb_gate *g, const struct eb_source_params *p)
{
	int r;

	r = eb_gate_init(g, &p->gate);
	if (r == -ERANGE)
		return log_error_errno(r,
		                       "H = %" PRIu32 ".%03" PRIu32
		                       " bits per sample is too small for the health tests",
		                       p->gate.h_mbits / 1000, p->gate.h_mbits % 1000);
	if (r < 0)
		return log_error_errno(r, "Invalid sampling parameters for %s", p->name);
	return 0;
}

/* Told SLEEP with a capture under way: the samples go on to the dump, what they become is dropped
 * until the broker wants data again. 1 when the broker is lost (the caller fails over). */
static int capture_while_asleep(struct run *run)
{
	struct eb_client *c = run->c;

	if (!run->capturing_asleep)
		log_notice(
		    "Broker %s is full (SLEEP); still capturing to --dump-raw, donating nothing until it wants data",
		    eb_client_broker(c));
	run->capturing_asleep = true;
	if (eb_client_poll_wake(c) < 0) {
		log_warning("Lost broker %s: %s; failing over", eb_client_broker(c),
		            eb_client_last_error(c));
		run->capturing_asleep = false;
		return 1;
	}
	if (!eb_client_asleep(c)) {
		log_notice("Broker %s wants data again; donating", eb_client_broker(c));
		run->capturing_asleep = false;
	}
	return 0;
}

/* Told SLEEP: the pool is full, so nothing is sampled until the broker wants more. 1 when the
 * broker is lost (the caller fails over). */
static int rest_while_asleep(struct run *run)
{
	struct eb_client *c = run->c;
	uint64_t rest;
	int r;

	/* Only a PUT hears SLEEP, and it leaves nothing pending; this is for safety. */
	r = send_pending(c, &run->q, &run->st);
	if (r < 0)
		return r;
	rest = eb_now_ms();
	log_notice("Broker %s is full (SLEEP); resting until it wants data", eb_client_broker(c));
	if (eb_client_wait_wake(c) < 0) {
		log_warning("Lost broker %s: %s; failing over", eb_client_broker(c),
		            eb_client_last_error(c));
		return 1;
	}
	log_notice("Broker %s wants data again; resuming after %" PRIu64 " s", eb_client_broker(c),
	           (eb_now_ms() - rest + 500) / 1000);
	return 0;
}

/* Runs n samples at s through the health tests into what is pending: what they vouch for joins
 * it, the rest is wiped. start: when their sampling began. */
static int feed(struct run *run, uint8_t *s, size_t n, uint64_t start)
{
	const struct eb_source_params *p = run->p;
	struct pending *q = &run->q;
	struct eb_gate_block b;
	int r;

	r = eb_gate_feed(&run->g, s, n, q->buf + q->len, q->size - q->len, &b);
	if (!run->in_place)
		explicit_bzero(run->raw, n);
	if (r == -EDOM)
		return log_error_errno(r, "%s gave a sample wider than %u bits", p->name,
		                       p->gate.bits);
	if (r < 0)
		return log_error_errno(r, "Failed to condition samples: %m");
	if (b.alarm)
		log_alarm(p, &run->g);
	if (b.readmitted)
		log_readmitted(p, &run->g);
	if (b.startup_done)
		log_info("Start-up health test passed for %s; crediting", p->name);
	run->st.admitted += b.ok;

	if (b.send) {
		if (q->len == 0)
			q->since = start;
		q->len += b.len;
		q->credit += b.credit;
	} else
		/* What a block the tests did not vouch for became is never sent. */
		explicit_bzero(q->buf + q->len, b.len);
	return 0;
}

/* The device reported that its own tests failed: an alarm, and what is pending unsent goes unsent,
 * since the device vouches for none of it now. */
static int device_alarm(struct run *run)
{
	struct pending *q = &run->q;

	if (eb_gate_device_alarm(&run->g))
		log_alarm(run->p, &run->g);
	explicit_bzero(q->buf, q->len);
	q->len = 0;
	q->credit = 0;
	return 0;
}

/* Samples a block of up to want samples, tests it and sends what is pending when it is time.
 * *ret_eof says the input ended. */
static int sample_block(struct run *run, size_t want, bool *ret_eof)
{
	const struct eb_source_params *p = run->p;
	struct pending *q = &run->q;
	bool failed_before, resting, alarm;
	uint64_t start;
	uint8_t *s;
	ssize_t n;
	int r;

	/* The gate writes straight behind what is pending: room for the most the block can become
	 * (a Von Neumann block's output depends on its data), and for its samples when they are
	 * taken there. */
	if (MAX(eb_gate_out_max(&run->g, want), run->in_place ? want : 0) > q->size - q->len) {
		r = send_pending(run->c, q, &run->st);
		if (r < 0)
			return r;
	}
	s = run->in_place ? q->buf + q->len : run->raw;

	failed_before = run->g.tested && eb_health_get_state(&run->g.health) == EB_HEALTH_FAILED;
	start = eb_now_ns();
	n = take(run->sample, run->userdata, s, want, ret_eof, &alarm);
	if (alarm)
		return device_alarm(run);
	if (n < 0) {
		if (n == -EOVERFLOW)
			log_error("%s returned more samples than asked for", p->name);
		return (int)n;
	}
	if (p->dump_fd >= 0 && n > 0) {
		r = eb_write_all(p->dump_fd, s, (size_t)n);
		if (r < 0)
			return log_error_errno(r, "Failed to write raw samples: %m");
	}
	run->st.samples += (uint64_t)n;
	r = feed(run, s, (size_t)n, start);
	if (r < 0 || *ret_eof)
		return r;

	/* Rest only while a failure lasts: a block that began and ended failed. A single false
	 * alarm on good data is over within the next 1024 samples, and resting for it would only
	 * cost output. */
	resting = failed_before && eb_health_get_state(&run->g.health) == EB_HEALTH_FAILED &&
	          p->quarantine_ms > 0;
	/* Send when the next block might not fit, when the first block has waited long enough, or
	 * before resting. */
	if (q->len > 0 && (q->len + eb_gate_out_max(&run->g, run->block) > PUT_BYTES_MAX ||
	                   eb_now_ns() - q->since >= PUT_HOLD_NS || resting)) {
		r = send_pending(run->c, q, &run->st);
		if (r < 0)
			return r;
	}
	if (resting)
		/* A stuck device can return garbage as fast as it is read; there is no hurry to
		 * prove it well again. */
		(void)eb_sleep_ms(p->quarantine_ms);
	return 0;
}

/* Samples until the input ends or max_samples are taken; a refusal or a failure ends it early. */
static int sample_all(struct run *run)
{
	const struct eb_source_params *p = run->p;
	struct eb_client *c = run->c;
	bool eof = false;
	int r;

	while (!eof) {
		size_t want = run->block;

		if (p->max_samples > 0) {
			if (run->st.samples >= p->max_samples)
				break;
			want = (size_t)MIN((uint64_t)want, p->max_samples - run->st.samples);
		}
		r = ensure_connected(c);
		if (r < 0)
			return r;
		if (c && eb_client_asleep(c)) {
			r = p->dump_fd >= 0 ? capture_while_asleep(run) : rest_while_asleep(run);
			if (r < 0)
				return r;
			if (r > 0)
				continue;
		}
		r = sample_block(run, want, &eof);
		if (r < 0)
			return r;
	}
	r = send_pending(c, &run->q, &run->st);
	if (r < 0)
		return r;
	if (c && eb_client_connected(c) && eb_client_flush(c) < 0)
		log_warning("Broker %s did not acknowledge the last data: %s", eb_client_broker(c),
		            eb_client_last_error(c));
	return 0;
}

int eb_source_run(struct eb_client *c, const struct eb_source_params *p, eb_source_sample_t sample,
                  void *userdata, struct eb_source_stats *stats)
{
	struct run run = {.c = c, .p = p, .sample = sample, .userdata = userdata};
	_cleanup_free_ uint8_t *raw = NULL, *pend_buf = NULL;
	int r;

	r = gate_start(&run.g, p);
	if (r < 0)
		return r;
	run.block = p->block > 0 ? MIN(p->block, (size_t)EB_GATE_BLOCK_MAX) : EB_GATE_BLOCK_DEFAULT;
	/* One spare byte covers a partial Von Neumann byte or a part-filled packed byte. */
	run.q.size = MAX((size_t)PUT_BYTES_MAX, run.block + 1);
	run.in_place = p->gate.bits == 8 && !p->gate.vonneumann;
	raw = run.in_place ? NULL : malloc(run.block);
	pend_buf = malloc(run.q.size);
	if ((!run.in_place && !raw) || !pend_buf)
		return log_oom();
	run.raw = raw;
	run.q.buf = pend_buf;
	log_start(p, &run.g);

	r = sample_all(&run);
	/* A failed sample or a bad one ends the run, but the blocks vetted before it are sent, as
	 * they would have been had the source been slower. */
	if (r < 0 && r != -EACCES && run.q.len > 0 && c && eb_client_connected(c))
		(void)send_pending(c, &run.q, &run.st);
	if (raw)
		explicit_bzero(raw, run.block);
	explicit_bzero(run.q.buf, run.q.size);
	run.st.credited = c ? eb_client_bits_credited(c) : 0;
	run.st.alarms = run.g.tested ? run.g.health.episodes : 0;
	if (stats)
		*stats = run.st;
	return r;
}
