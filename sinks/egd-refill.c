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
#include "time-util.h"

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
	struct eb_client *active;
	uint8_t *scratch; /* EB_DATA_MAX locked bytes: a broker answer or a donation in transit */
	bool scratch_locked;
	struct eb_backoff backoff;
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

/* Connects to a broker as a source and sink if the user may be both, as a sink otherwise. On a
 * transient failure it backs off (with jitter, so sinks that lost the same broker do not come
 * back in step) and returns the error; -EACCES for both roles is final. */
static int connect_broker(struct egd_refill *r)
{
	enum donate_state donate;
	int k;

	pthread_mutex_lock(&r->lock);
	donate = r->donate;
	pthread_mutex_unlock(&r->lock);

	k = -EACCES;
	if (donate != DONATE_NO) {
		k = eb_client_connect(r->both);
		if (k >= 0)
			r->active = r->both;
	}
	if (k == -EACCES) {
		k = eb_client_connect(r->sink_only);
		if (k >= 0) {
			r->active = r->sink_only;
			if (donate != DONATE_NO)
				log_notice(
				    "Broker %s does not take this user as a source: EGD writes (0x03) are read and dropped",
				    eb_client_broker(r->sink_only));
			pthread_mutex_lock(&r->lock);
			r->donate = DONATE_NO;
			r->stats.may_donate = false;
			r->stats.donate_dropped += egd_buffer_level(r->donations);
			egd_buffer_clear(r->donations);
			r->donate_claim = 0;
			pthread_mutex_unlock(&r->lock);
		} else if (k == -EACCES) {
			log_error("Broker %s refused this sink: %s", eb_client_broker(r->sink_only),
			          eb_client_last_error(r->sink_only));
			return k;
		}
	} else if (k >= 0) {
		pthread_mutex_lock(&r->lock);
		r->donate = DONATE_YES;
		r->stats.may_donate = true;
		pthread_mutex_unlock(&r->lock);
	}
	if (k < 0) {
		/* The watch (eb_cli_client_watch()) has logged it, at a bounded rate. */
		struct eb_client *c = donate != DONATE_NO ? r->both : r->sink_only;

		set_link(r, "Not connected: %s", eb_client_last_error(c));
		pause_ms(r, eb_backoff_next(&r->backoff));
		return k;
	}
	log_info("Drawing from broker %s%s", eb_client_broker(r->active),
	         r->active == r->both ? " (EGD writes are donated to it)" : "");
	set_link(r, "Connected to %s", eb_client_broker(r->active));
	eb_backoff_reset(&r->backoff);
	return 0;
}

static void lost(struct egd_refill *r, int k)
{
	log_warning_errno(k, "Lost broker %s: %s; failing over", eb_client_broker(r->active),
	                  eb_client_last_error(r->active));
	set_link(r, "Not connected: lost %s: %s", eb_client_broker(r->active),
	         eb_client_last_error(r->active));
	eb_client_disconnect(r->active);
	r->active = NULL;
}

/* Passes queued EGD writes on. The broker's SLEEP means its pool is full: what it would drop
 * anyway is dropped here, so that a chatty EGD writer cannot keep a full broker busy. */
static void donate(struct egd_refill *r)
{
	uint32_t claim;
	size_t n;
	int k;

	pthread_mutex_lock(&r->lock);
	n = egd_buffer_take(r->donations, r->scratch, EB_DATA_MAX);
	claim = r->donate_claim;
	r->donate_claim = 0;
	pthread_mutex_unlock(&r->lock);
	if (n == 0)
		return;
	if (eb_client_asleep(r->active)) {
		log_debug("Broker %s is full; dropping %zu bytes of EGD writes",
		          eb_client_broker(r->active), n);
		k = -ENOSPC;
	} else {
		k = eb_client_put(r->active, r->scratch, n, claim);
		if (k >= 0)
			k = eb_client_flush(r->active);
	}
	explicit_bzero(r->scratch, n);
	pthread_mutex_lock(&r->lock);
	if (k >= 0) {
		r->stats.donated += n;
		r->stats.donated_claim += claim;
	} else
		r->stats.donate_dropped += n;
	pthread_mutex_unlock(&r->lock);
	if (k < 0 && k != -ENOSPC && !eb_client_connected(r->active))
		lost(r, k);
}

/* Asks for what the buffer lacks, in one full-entropy GET. */
static void refill(struct egd_refill *r)
{
	size_t want, len = 0, put;
	uint32_t bits = 0, retry = 0;
	int k;

	pthread_mutex_lock(&r->lock);
	want = egd_buffer_space(r->buf);
	pthread_mutex_unlock(&r->lock);
	/* The level only falls while the GET is out, so the answer will fit. */
	want = MIN(MAX(want, (size_t)8), (size_t)EB_DATA_MAX);
	k = eb_client_request(r->active, want, EB_GET_FULL);
	if (k >= 0) {
		k = eb_client_receive(r->active, r->scratch, EB_DATA_MAX, &len, &bits, &retry);
		eb_cli_sink_answer(r->active, k);
	}
	if (k == -EAGAIN || k == -EDQUOT) {
		log_debug("Broker %s: %s, retrying in %" PRIu32 " ms", eb_client_broker(r->active),
		          k == -EAGAIN ? "pool empty" : "quota spent", retry);
		pause_ms(r, MIN(MAX(retry, 10u), (unsigned)RETRY_MAX_MS));
		return;
	}
	if (k < 0) {
		lost(r, k);
		return;
	}
	if ((uint64_t)bits < (uint64_t)len * 8) {
		/* Full entropy or nothing: the EGD clients (a VM's virtio-rng above all) credit
		 * every byte they read. */
		explicit_bzero(r->scratch, len);
		log_warning("Broker %s sent %zu bytes carrying only %" PRIu32
		            " bits; dropping them and failing over",
		            eb_client_broker(r->active), len, bits);
		eb_client_disconnect(r->active);
		r->active = NULL;
		pause_ms(r, EB_BACKOFF_RECONNECT_MIN_MS);
		return;
	}
	pthread_mutex_lock(&r->lock);
	put = egd_buffer_put(r->buf, r->scratch, len);
	r->stats.fetched += put;
	pthread_mutex_unlock(&r->lock);
	explicit_bzero(r->scratch, len);
	if (put > 0)
		notify(r);
}

static void *refill_thread(void *userdata)
{
	struct egd_refill *r = userdata;

	pthread_mutex_lock(&r->lock);
	while (!r->stop) {
		bool want_data;

		/* Below the low water mark a refill starts, and it goes on until the buffer is
		 * full: a GET brings at most EB_DATA_MAX bytes, a buffer may hold more. */
		if (egd_buffer_level(r->buf) < r->low_water)
			r->filling = true;
		else if (egd_buffer_space(r->buf) < 8)
			r->filling = false;
		want_data = r->filling;
		bool want_donate = r->donate != DONATE_NO && egd_buffer_level(r->donations) > 0;

		if (!want_data && !want_donate) {
			pthread_cond_wait(&r->cond, &r->lock);
			continue;
		}
		pthread_mutex_unlock(&r->lock);
		if (!r->active) {
			int k = connect_broker(r);

			if (k == -EACCES) {
				pthread_mutex_lock(&r->lock);
				r->stats.failed = true;
				pthread_mutex_unlock(&r->lock);
				notify(r);
				return NULL;
			}
		}
		/* A PUT waits for its ACK, so it goes between GETs, never while one is out. */
		if (r->active && want_donate && r->active == r->both)
			donate(r);
		if (r->active && want_data)
			refill(r);
		pthread_mutex_lock(&r->lock);
	}
	pthread_mutex_unlock(&r->lock);
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
	r->backoff = EB_BACKOFF_INIT(EB_BACKOFF_RECONNECT_MIN_MS, EB_BACKOFF_RECONNECT_MAX_MS);
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
