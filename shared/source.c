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
#include "log.h"
#include "proto.h"

/* journalctl MESSAGE_ID= for a source's health-test failure and its re-admission; the catalog
 * explains both. */
#define MSGID_HEALTH_ALARM "3c2022901111464f90e9aa4e20d64086"
#define MSGID_HEALTH_OK    "b319abeea24c4c83b1fec169e0cea9af"

static int ensure_connected(struct eb_client *c)
{
	int r;

	if (eb_client_connected(c))
		return 0;
	r = eb_client_connect_retry(c, 0);
	if (r < 0)
		return log_error_errno(r, "Cannot reach a broker: %s", eb_client_last_error(c));
	log_info("Donating to %s", eb_client_broker(c));
	return 0;
}

static int write_full(int fd, const uint8_t *buf, size_t len)
{
	while (len > 0) {
		ssize_t k = write(fd, buf, len);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return negative_errno();
		buf += k;
		len -= (size_t)k;
	}
	return 0;
}

/* Takes up to n samples, calling the source until it has them all or its input ends, so that
 * a device read in small pieces still makes whole blocks. *ret_eof says the input ended. */
static ssize_t take(eb_source_sample_t sample, void *userdata, uint8_t *buf, size_t n,
                    bool *ret_eof)
{
	size_t got = 0;

	*ret_eof = false;
	while (got < n) {
		ssize_t k = sample(userdata, buf + got, n - got);

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

static void pause_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
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

int eb_source_run(struct eb_client *c, const struct eb_source_params *p, eb_source_sample_t sample,
                  void *userdata, struct eb_source_stats *stats)
{
	struct eb_source_stats st = {};
	_cleanup_free_ uint8_t *raw = NULL, *out = NULL;
	struct eb_gate g;
	size_t block, out_size;
	int r;

	r = eb_gate_init(&g, &p->gate);
	if (r == -ERANGE)
		return log_error_errno(r,
		                       "H = %" PRIu32 ".%03" PRIu32
		                       " bits per sample is too small for the health tests",
		                       p->gate.h_mbits / 1000, p->gate.h_mbits % 1000);
	if (r < 0)
		return log_error_errno(r, "Invalid sampling parameters for %s", p->name);

	block = p->block > 0 ? MIN(p->block, (size_t)EB_GATE_BLOCK_MAX) : EB_GATE_BLOCK_DEFAULT;
	/* One spare byte covers a partial Von Neumann byte or a part-filled packed byte. */
	out_size = block + 1;
	raw = malloc(block);
	out = malloc(out_size);
	if (!raw || !out)
		return log_oom();
	log_start(p, &g);

	for (;;) {
		struct eb_gate_block b;
		size_t want = block;
		bool eof;
		ssize_t n;

		if (p->max_samples > 0) {
			if (st.samples >= p->max_samples)
				break;
			want = (size_t)MIN((uint64_t)want, p->max_samples - st.samples);
		}
		r = ensure_connected(c);
		if (r < 0)
			goto finish;
		if (eb_client_asleep(c)) {
			/* The pool is full: sample nothing until the broker wants more. */
			log_debug("Broker %s is full; resting", eb_client_broker(c));
			r = eb_client_wait_wake(c);
			if (r < 0) {
				log_warning("Lost broker %s: %s; failing over", eb_client_broker(c),
				            eb_client_last_error(c));
				continue;
			}
			log_debug("Broker %s wants data again", eb_client_broker(c));
		}

		n = take(sample, userdata, raw, want, &eof);
		if (n < 0) {
			r = (int)n;
			if (r == -EOVERFLOW)
				log_error("%s returned more samples than asked for", p->name);
			goto finish;
		}
		if (p->dump_fd >= 0 && n > 0) {
			r = write_full(p->dump_fd, raw, (size_t)n);
			if (r < 0) {
				log_error_errno(r, "Failed to write raw samples: %m");
				goto finish;
			}
		}
		st.samples += (uint64_t)n;

		r = eb_gate_feed(&g, raw, (size_t)n, out, out_size, &b);
		explicit_bzero(raw, (size_t)n);
		if (r == -EDOM) {
			log_error("%s gave a sample wider than %u bits", p->name, p->gate.bits);
			goto finish;
		}
		if (r < 0) {
			log_error_errno(r, "Failed to condition samples: %m");
			goto finish;
		}
		if (b.alarm)
			log_alarm(p, &g);
		if (b.readmitted)
			log_readmitted(p, &g);
		if (b.startup_done)
			log_info("Start-up health test passed for %s; crediting", p->name);
		st.admitted += b.ok;

		if (b.send) {
			r = eb_client_put(c, out, b.len, b.credit);
			explicit_bzero(out, b.len);
			if (r == -EACCES) {
				log_error("Broker %s refused the data: %s", eb_client_broker(c),
				          eb_client_last_error(c));
				goto finish;
			}
			if (r < 0)
				/* What was in flight is lost with the connection; it is not sent
				 * twice. */
				log_warning("Lost broker %s: %s; failing over", eb_client_broker(c),
				            eb_client_last_error(c));
			else {
				st.bytes += b.len;
				st.claimed += b.credit;
			}
		}
		if (eof)
			break;
		if (g.tested && eb_health_get_state(&g.health) == EB_HEALTH_FAILED &&
		    p->quarantine_ms > 0)
			/* A stuck device can return garbage as fast as it is read; there is no
			 * hurry to prove it well again. */
			pause_ms(p->quarantine_ms);
	}

	r = 0;
	if (eb_client_connected(c) && eb_client_flush(c) < 0)
		log_warning("Broker %s did not acknowledge the last data: %s", eb_client_broker(c),
		            eb_client_last_error(c));
finish:
	explicit_bzero(raw, block);
	explicit_bzero(out, out_size);
	st.credited = eb_client_bits_credited(c);
	st.alarms = g.tested ? g.health.episodes : 0;
	if (stats)
		*stats = st;
	return r;
}
