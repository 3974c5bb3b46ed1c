/* SPDX-License-Identifier: MIT */
#include "egd-refill.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "backoff.h"
#include "cli.h"
#include "egd-buffer.h"
#include "log.h"
#include "sink.h"
#include "time-util.h"

/* An EMPTY or QUOTA's retry hint, bounded: it is the broker's word. */
#define RETRY_MIN_MS 10
#define RETRY_MAX_MS 60000

/* Whether EGD writes go on to the broker: unknown until a broker has taken or refused the user
 * as a source. */
enum donate_state {
	DONATE_UNKNOWN,
	DONATE_YES,
	DONATE_NO,
};

struct egd_refill {
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int event_fd;

	/* Under lock. */
	struct egd_buffer *buf;
	struct egd_buffer *donations;
	uint32_t donate_claim; /* bits claimed for what donations holds */
	enum donate_state donate;
	bool stop;
	bool filling; /* refilling, from below the low water mark until full */
	struct egd_refill_stats stats;
	size_t low_water;

	/* The thread's alone. */
	struct eb_client *both;      /* asks for sink and source */
	struct eb_client *sink_only; /* when the user may not donate */
	uint8_t *scratch; /* EB_DATA_MAX locked bytes: a broker answer or a donation in transit */
	bool scratch_locked;
	bool refused; /* the broker refused the user as a sink: the run ends */
};

_printf_(2, 3) static void set_link(struct egd_refill *r, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&r->lock);
	va_start(ap, fmt);
	vsnprintf(r->stats.link, sizeof(r->stats.link), fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&r->lock);
}

static void notify(struct egd_refill *r)
{
	uint64_t one = 1;

	/* Only a full counter fails, and then the loop is due to wake anyway. */
	(void)!write(r->event_fd, &one, sizeof(one));
}

/* Sleeps up to ms, or until egd_refill_stop_and_free() wakes the thread. Called locked. */
static void wait_locked(struct egd_refill *r, unsigned ms)
{
	struct timespec ts = eb_timespec_after_ms(CLOCK_MONOTONIC, ms);

	while (!r->stop && pthread_cond_timedwait(&r->cond, &r->lock, &ts) != ETIMEDOUT)
		;
}

static void pause_ms(struct egd_refill *r, unsigned ms)
{
	pthread_mutex_lock(&r->lock);
	wait_locked(r, ms);
	pthread_mutex_unlock(&r->lock);
}

/* What the thread wants, called locked: the bytes the buffer lacks, EB_SINK_WANT_CONNECT for
 * EGD writes to pass on, or 0. Below the low water mark a refill starts, and it goes on until
 * the buffer is full: a GET brings at most EB_DATA_MAX bytes, a buffer may hold more. */
static size_t wanted_locked(struct egd_refill *r)
{
	if (r->stop)
		return 0;
	if (egd_buffer_level(r->buf) < r->low_water)
		r->filling = true;
	else if (egd_buffer_space(r->buf) < 8)
		r->filling = false;
	/* One GET at a time, so the level only falls while it is out and the answer will fit. */
	if (r->filling)
		return MIN(MAX(egd_buffer_space(r->buf), (size_t)8), (size_t)EB_DATA_MAX);
	if (r->donate != DONATE_NO && egd_buffer_level(r->donations) > 0)
		return EB_SINK_WANT_CONNECT;
	return 0;
}

static size_t want(void *userdata, struct eb_client *c, uint64_t in_flight)
{
	struct egd_refill *r = userdata;
	size_t n;

	(void)c;
	(void)in_flight;
	pthread_mutex_lock(&r->lock);
	n = wanted_locked(r);
	pthread_mutex_unlock(&r->lock);
	return n;
}

/* Rests ms, or until there is something to do (ms < 0); -ECANCELED once stopped. The wanted
 * test and the wait share the lock, so a wake-up between them is not lost. */
static int wait_news(void *userdata, int ms)
{
	struct egd_refill *r = userdata;
	int k;

	if (r->refused)
		return -EACCES;
	pthread_mutex_lock(&r->lock);
	if (ms >= 0)
		wait_locked(r, (unsigned)ms);
	else
		while (!r->stop && wanted_locked(r) == 0)
			pthread_cond_wait(&r->cond, &r->lock);
	k = r->stop ? -ECANCELED : 0;
	pthread_mutex_unlock(&r->lock);
	return k;
}

static void set_donate(struct egd_refill *r, enum donate_state d)
{
	pthread_mutex_lock(&r->lock);
	r->donate = d;
	r->stats.may_donate = d == DONATE_YES;
	if (d == DONATE_NO) {
		r->stats.donate_dropped += egd_buffer_level(r->donations);
		egd_buffer_clear(r->donations);
		r->donate_claim = 0;
	}
	pthread_mutex_unlock(&r->lock);
}

/* One pass, as a source and sink if the user may be both, as a sink otherwise. The runtime
 * backs off after a failure (with jitter, so sinks that lost the same broker do not come back
 * in step); a refusal for both roles is final, through wait_news(). */
static int connect_roles(void *userdata, struct eb_client **ret)
{
	struct egd_refill *r = userdata;
	enum donate_state donate;
	int k = -EACCES;

	pthread_mutex_lock(&r->lock);
	donate = r->donate;
	pthread_mutex_unlock(&r->lock);
	if (donate != DONATE_NO) {
		k = eb_client_connect(r->both);
		if (k >= 0) {
			set_donate(r, DONATE_YES);
			*ret = r->both;
			return 0;
		}
	}
	if (k == -EACCES) {
		k = eb_client_connect(r->sink_only);
		if (k >= 0) {
			if (donate != DONATE_NO)
				log_notice(
				    "Broker %s does not take this user as a source: EGD writes (0x03) are read and dropped",
				    eb_client_broker(r->sink_only));
			set_donate(r, DONATE_NO);
			*ret = r->sink_only;
			return 0;
		}
		if (k == -EACCES) {
			log_error("Broker %s refused this sink: %s", eb_client_broker(r->sink_only),
			          eb_client_last_error(r->sink_only));
			r->refused = true;
			return k;
		}
	}
	/* The watch (eb_cli_client_watch()) has logged it, at a bounded rate. */
	set_link(r, "Not connected: %s",
	         eb_client_last_error(donate != DONATE_NO ? r->both : r->sink_only));
	return k;
}

/* Passes queued EGD writes on; a PUT waits for its ACK, so the runtime calls this between GETs,
 * never while one is out. The broker's SLEEP means its pool is full: what it would drop anyway
 * is dropped here, so that a chatty EGD writer cannot keep a full broker busy. */
static int donate(void *userdata, struct eb_client *c)
{
	struct egd_refill *r = userdata;
	uint32_t claim;
	size_t n = 0;
	int k;

	pthread_mutex_lock(&r->lock);
	if (!r->stop && c == r->both && r->donate != DONATE_NO)
		n = egd_buffer_take(r->donations, r->scratch, EB_DATA_MAX);
	claim = r->donate_claim;
	if (n > 0)
		r->donate_claim = 0;
	pthread_mutex_unlock(&r->lock);
	if (n == 0)
		return 0;
	if (eb_client_asleep(c)) {
		log_debug("Broker %s is full; dropping %zu bytes of EGD writes",
		          eb_client_broker(c), n);
		k = -ENOSPC;
	} else {
		k = eb_client_put(c, r->scratch, n, claim);
		if (k >= 0)
			k = eb_client_flush(c);
	}
	explicit_bzero(r->scratch, n);
	pthread_mutex_lock(&r->lock);
	if (k >= 0) {
		r->stats.donated += n;
		r->stats.donated_claim += claim;
	} else
		r->stats.donate_dropped += n;
	pthread_mutex_unlock(&r->lock);
	return k < 0 && k != -ENOSPC && !eb_client_connected(c) ? k : 0;
}

/* One DATA into the buffer, under its lock. */
static int take(void *userdata, struct eb_client *c, const uint8_t *data, size_t len, uint32_t bits)
{
	struct egd_refill *r = userdata;
	size_t put;

	if ((uint64_t)bits < (uint64_t)len * 8) {
		/* Full entropy or nothing: the EGD clients (a VM's virtio-rng above all) credit
		 * every byte they read. */
		log_warning("Broker %s sent %zu bytes carrying only %" PRIu32
		            " bits; dropping them and failing over",
		            eb_client_broker(c), len, bits);
		pause_ms(r, EB_BACKOFF_RECONNECT_MIN_MS);
		return EB_SINK_FAILOVER;
	}
	pthread_mutex_lock(&r->lock);
	put = egd_buffer_put(r->buf, data, len);
	r->stats.fetched += put;
	pthread_mutex_unlock(&r->lock);
	if (put > 0)
		notify(r);
	return 0;
}

/* The runtime's log lines, but for the connection, which eb-sink-egd reports at info with the
 * roles, and STATUS='s link. */
static void on_event(void *userdata, struct eb_client *c, enum eb_sink_event e, int k, unsigned ms)
{
	struct egd_refill *r = userdata;

	switch (e) {
	case EB_SINK_CONNECTED:
		log_info("Drawing from broker %s%s", eb_client_broker(c),
		         c == r->both ? " (EGD writes are donated to it)" : "");
		set_link(r, "Connected to %s", eb_client_broker(c));
		return;
	case EB_SINK_LOST:
		set_link(r, "Not connected: lost %s: %s", eb_client_broker(c),
		         eb_client_last_error(c));
		break;
	case EB_SINK_MOVING:
	case EB_SINK_SERVED:
	case EB_SINK_DATA:
	case EB_SINK_WAITING:
	case EB_SINK_RETRYING:
	case EB_SINK_UNREACHABLE:
	case EB_SINK_REFUSED:
	case _EB_SINK_EVENT_MAX:
	case _EB_SINK_EVENT_INVALID:
		break;
	}
	eb_sink_log_event(c, e, k, ms);
}

static const struct eb_sink_ops refill_ops = {
    .want = want,
    .take = take,
    .wait = wait_news,
    .connect = connect_roles,
    .between = donate,
    .event = on_event,
};

static void *refill_thread(void *userdata)
{
	struct egd_refill *r = userdata;
	const struct eb_sink_params p = {
	    .mode = EB_GET_FULL,
	    .window = 1,
	    .retry_min_ms = RETRY_MIN_MS,
	    .retry_max_ms = RETRY_MAX_MS,
	    /* connect_roles() judges a refusal: the source role's is retried as a sink, and a
	     * broker that refuses in mid-session is failed over. */
	    .persist = true,
	    .buf = r->scratch,
	};

	if (eb_sink_run(NULL, &p, &refill_ops, r) == -EACCES) {
		pthread_mutex_lock(&r->lock);
		r->stats.failed = true;
		pthread_mutex_unlock(&r->lock);
		notify(r);
	}
	return NULL;
}

int egd_refill_new(const struct egd_refill_options *o, struct egd_refill **ret)
{
	struct eb_client_options co = o->client;
	struct egd_refill *r;
	int k;

	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->event_fd = -EBADF;
	pthread_mutex_init(&r->lock, NULL);
	{
		pthread_condattr_t a;

		pthread_condattr_init(&a);
		pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
		pthread_cond_init(&r->cond, &a);
		pthread_condattr_destroy(&a);
	}
	r->low_water = o->low_water;
	r->scratch = MAP_FAILED;

	co.kind = "egd";
	co.roles = EB_ROLE_SINK | EB_ROLE_SOURCE;
	k = eb_cli_client_new(&co, &r->both);
	if (k < 0)
		goto fail;
	co.roles = EB_ROLE_SINK;
	k = eb_cli_client_new(&co, &r->sink_only);
	if (k < 0)
		goto fail;
	eb_cli_client_watch(r->both);
	eb_cli_client_watch(r->sink_only);
	set_link(r, "Not connected yet");
	k = egd_buffer_new(o->capacity, &r->buf);
	if (k < 0) {
		log_error_errno(k, "Failed to allocate a %zu byte buffer: %m", o->capacity);
		goto fail;
	}
	k = egd_buffer_new(MAX(o->donate_max, (size_t)EGD_BUFFER_MIN), &r->donations);
	if (k < 0) {
		log_error_errno(k, "Failed to allocate the write queue: %m");
		goto fail;
	}
	r->scratch =
	    mmap(NULL, EB_DATA_MAX, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (r->scratch == MAP_FAILED) {
		k = log_error_errno(errno, "Failed to allocate a receive buffer: %m");
		goto fail;
	}
	(void)madvise(r->scratch, EB_DATA_MAX, MADV_DONTDUMP);
	r->scratch_locked = mlock(r->scratch, EB_DATA_MAX) == 0;
	if (!egd_buffer_locked(r->buf) || !r->scratch_locked)
		log_warning(
		    "Failed to lock the buffers in memory (raise LimitMEMLOCK=?), going on: served bytes may reach swap");
	r->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (r->event_fd < 0) {
		k = log_error_errno(errno, "Failed to create an eventfd: %m");
		goto fail;
	}
	*ret = r;
	return 0;
fail:
	r->stop = true;
	(void)egd_refill_stop_and_free(r, 0);
	return k;
}

int egd_refill_start(struct egd_refill *r)
{
	int k;

	k = pthread_create(&r->thread, NULL, refill_thread, r);
	if (k != 0)
		return -k;
	r->started = true;
	return 0;
}

void egd_refill_wipe(struct egd_refill *r)
{
	pthread_mutex_lock(&r->lock);
	egd_buffer_clear(r->buf);
	egd_buffer_clear(r->donations);
	pthread_mutex_unlock(&r->lock);
}

int egd_refill_stop_and_free(struct egd_refill *r, int timeout_ms)
{
	if (!r)
		return 0;
	pthread_mutex_lock(&r->lock);
	r->stop = true;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
	if (r->started) {
		struct timespec ts = eb_timespec_after_ms(CLOCK_REALTIME, timeout_ms);

		/* A broker call can block for its timeout; the caller exits rather than wait. */
		if (pthread_timedjoin_np(r->thread, NULL, &ts) != 0)
			return -ETIMEDOUT;
	}
	eb_client_free(r->both);
	eb_client_free(r->sink_only);
	egd_buffer_free(r->buf);
	egd_buffer_free(r->donations);
	if (r->scratch != MAP_FAILED) {
		explicit_bzero(r->scratch, EB_DATA_MAX);
		munmap(r->scratch, EB_DATA_MAX);
	}
	safe_close(r->event_fd);
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->lock);
	free(r);
	return 0;
}

int egd_refill_fd(const struct egd_refill *r)
{
	return r->event_fd;
}

void egd_refill_ack(struct egd_refill *r)
{
	uint64_t n;

	(void)!read(r->event_fd, &n, sizeof(n));
}

size_t egd_refill_take(struct egd_refill *r, void *dst, size_t n)
{
	size_t k;

	pthread_mutex_lock(&r->lock);
	k = egd_buffer_take(r->buf, dst, n);
	if (egd_buffer_level(r->buf) < r->low_water)
		pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
	return k;
}

size_t egd_refill_level(struct egd_refill *r)
{
	size_t k;

	pthread_mutex_lock(&r->lock);
	k = egd_buffer_level(r->buf);
	pthread_mutex_unlock(&r->lock);
	return k;
}

int egd_refill_donate(struct egd_refill *r, const void *data, size_t n, uint32_t claim_bits)
{
	int k = 0;

	pthread_mutex_lock(&r->lock);
	if (r->donate == DONATE_NO)
		k = -EPERM;
	else if (egd_buffer_space(r->donations) < n)
		k = -ENOBUFS;
	if (k < 0)
		r->stats.donate_dropped += n;
	else {
		egd_buffer_put(r->donations, data, n);
		/* Nobody may claim more than 8 bits a byte; the broker caps it further. */
		r->donate_claim += MIN(claim_bits, (uint32_t)n * 8);
		pthread_cond_signal(&r->cond);
	}
	pthread_mutex_unlock(&r->lock);
	return k;
}

void egd_refill_stats(struct egd_refill *r, struct egd_refill_stats *ret)
{
	pthread_mutex_lock(&r->lock);
	*ret = r->stats;
	pthread_mutex_unlock(&r->lock);
}
