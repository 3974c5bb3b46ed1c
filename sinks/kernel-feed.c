/* SPDX-License-Identifier: MIT */
#include "kernel-feed.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#include "client.h"
#include "kernel.h"
#include "log.h"
#include "sink.h"
#include "time-util.h"

static uint64_t boottime_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* One kernel_feed() in progress. */
struct feed {
	int fd;
	uint64_t want, credited, deadline;
	int *ready_first;
	bool unreachable;
};

/* Whole bytes for the bits still wanted, one DATA's worth at most. */
static size_t feed_want(void *userdata, struct eb_client *c, uint64_t in_flight)
{
	struct feed *f = userdata;
	uint64_t bytes = (f->want - f->credited) / 8;

	(void)c;
	return bytes > in_flight ? (size_t)MIN(bytes - in_flight, (uint64_t)EB_DATA_MAX) : 0;
}

static int feed_take(void *userdata, struct eb_client *c, const uint8_t *buf, size_t len,
                     uint32_t bits)
{
	struct feed *f = userdata;
	uint32_t credit = bits == 8 * (uint64_t)len ? bits : 0;
	int r;

	if (f->ready_first && *f->ready_first < 0 && credit > 0) {
		*f->ready_first = eb_kernel_crng_ready();
		if (*f->ready_first < 0)
			return log_error_errno(
			    *f->ready_first,
			    "Failed to ask the kernel whether its RNG is ready: %m");
	}
	r = eb_kernel_add_entropy(f->fd, buf, len, credit);
	if (r < 0)
		return log_error_errno(r,
		                       "Failed to add entropy to the kernel (RNDADDENTROPY): %m");
	if (credit == 0) {
		/* A broker that sends bytes it does not vouch for is misconfigured or broken:
		 * take nothing more from it for a while. */
		log_warning("Broker %s vouched for only %u bits of the %zu bytes it sent; "
		            "mixed them in without credit",
		            eb_client_broker(c), bits, len);
		(void)eb_sleep_ms(f->deadline ? MIN((uint64_t)1000, eb_ms_until(f->deadline))
		                              : 1000);
		return EB_SINK_FAILOVER;
	}
	f->credited += credit;
	log_debug("Credited %u bits from %s (%" PRIu64 " of %" PRIu64 ")", credit,
	          eb_client_broker(c), f->credited, f->want);
	return f->credited >= f->want ? EB_SINK_DONE : 0;
}

static void feed_event(void *userdata, struct eb_client *c, enum eb_sink_event e, int r,
                       unsigned ms)
{
	struct feed *f = userdata;

	if (e != EB_SINK_UNREACHABLE) {
		eb_sink_log_event(c, e, r, ms);
		return;
	}
	/* One line says it all: a guest whose host is silent logs this and boots on. */
	log_error_errno(
	    r, "Cannot reach a broker: %s; giving up with %" PRIu64 " of %" PRIu64 " bits credited",
	    eb_client_last_error(c), f->credited, f->want);
	f->unreachable = true;
}

static const struct eb_sink_ops feed_ops = {
    .want = feed_want, .take = feed_take, .event = feed_event};

int kernel_feed(struct eb_client *client, int fd, uint64_t want, uint64_t deadline,
                uint64_t *ret_credited, int *ready_first)
{
	struct feed f = {.fd = fd, .want = want, .deadline = deadline, .ready_first = ready_first};
	/* One draw and done: the broker ends the session after its last answer. */
	const struct eb_sink_params p = {
	    .mode = EB_GET_FULL, .deadline_ms = deadline, .oneshot = true};
	int r;

	/* Every wait of the client ends by the deadline too, whatever the broker sends. */
	eb_client_set_deadline(client, deadline);
	r = eb_sink_run(client, &p, &feed_ops, &f);
	if (r < 0 && f.unreachable)
		return r;
	if (r < 0) {
		log_error("Credited %" PRIu64 " of %" PRIu64 " bits before giving up", f.credited,
		          want);
		return r;
	}
	*ret_credited = f.credited;
	return 0;
}

static const char *followup_to_string(enum eb_kernel_followup f)
{
	switch (f) {
	case EB_KERNEL_FOLLOWUP_NONE:
		return "none";
	case EB_KERNEL_FOLLOWUP_RESEEDED:
		return "reseeded";
	case EB_KERNEL_FOLLOWUP_SCHEDULED:
		return "scheduled";
	case _EB_KERNEL_FOLLOWUP_MAX:
	case _EB_KERNEL_FOLLOWUP_INVALID:
		break;
	}
	return "invalid";
}

int kernel_seed(struct eb_client *client, int fd, uint64_t bits, uint64_t deadline)
{
	enum eb_kernel_followup followup = EB_KERNEL_FOLLOWUP_SCHEDULED;
	uint64_t t0 = eb_now_ms(), credited = 0;
	int at_start, before = -1, after, r;
	const char *state;
	char fields[320];

	at_start = eb_kernel_crng_ready();
	if (at_start < 0)
		return log_error_errno(at_start,
		                       "Failed to ask the kernel whether its RNG is ready: %m");
	log_info("Kernel RNG %s; drawing %" PRIu64 " bits",
	         at_start ? "already initialised" : "not yet initialised", bits);
	r = kernel_feed(client, fd, bits, deadline, &credited, &before);
	if (r < 0)
		return r;
	after = eb_kernel_crng_ready();
	r = eb_kernel_followup(fd, before > 0, eb_kernel_is_modern(), &followup);
	if (r < 0)
		log_warning_errno(
		    r, "Failed to force a CRNG reseed (RNDRESEEDCRNG), ignoring: %m; the "
		       "CRNG takes the bits in at its next scheduled reseed");
	switch (followup) {
	case EB_KERNEL_FOLLOWUP_NONE:
		state = after > 0
		            ? "kernel RNG was not initialised before them and is now"
		            : "kernel RNG was not initialised before them and still is not (it "
		              "needs 256 credited bits)";
		break;
	case EB_KERNEL_FOLLOWUP_RESEEDED:
		state = "kernel RNG was already initialised; forced a CRNG reseed (RNDRESEEDCRNG), "
			"so they are in use now";
		break;
	case EB_KERNEL_FOLLOWUP_SCHEDULED:
	case _EB_KERNEL_FOLLOWUP_MAX:
	case _EB_KERNEL_FOLLOWUP_INVALID:
		state = "kernel RNG was already initialised; the CRNG takes them in at its next "
			"scheduled reseed";
		break;
	}
	snprintf(fields, sizeof(fields),
	         "EB_CREDITED_BITS=%" PRIu64 "\nEB_BROKER=%s\nEB_SEED_MS=%" PRIu64
	         "\nEB_CRNG_READY_BEFORE=%d\nEB_CRNG_READY=%d\nEB_CRNG_FOLLOWUP=%s",
	         credited, eb_client_broker(client), eb_now_ms() - t0, before > 0, after > 0,
	         followup_to_string(followup));
	log_struct(LOG_INFO, fields,
	           "Credited %" PRIu64 " bits from %s in %" PRIu64 " ms, %.3f s after boot; %s",
	           credited, eb_client_broker(client), eb_now_ms() - t0,
	           (double)boottime_ms() / 1000, state);
	return 0;
}
