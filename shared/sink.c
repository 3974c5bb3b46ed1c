/* SPDX-License-Identifier: MIT */
#include "sink.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "backoff.h"
#include "cli.h"
#include "client.h"
#include "log.h"
#include "macro.h"
#include "time-util.h"

/* An EMPTY or QUOTA's hint is the broker's; a sink waits no longer than this whatever it says. */
#define RETRY_MAX_MS 60000

struct run {
	struct eb_client *c;
	const struct eb_sink_params *p;
	const struct eb_sink_ops *ops;
	void *userdata;
	struct eb_backoff backoff;
	unsigned window;
	uint32_t in_flight[EB_CLIENT_GETS_MAX]; /* bytes asked, oldest first */
	unsigned n_in_flight;
	uint64_t in_flight_bytes;
	bool served; /* the broker has answered since this connection began */
	/* How long the sink has rested on EMPTY answers since the last DATA on this connection, and
	 * how long it may before it moves (EB_SINK_LEAVE_EMPTY_MIN_MS; 0: no EMPTY yet). Rests, not
	 * the clock: a sink that wanted nothing for an hour between two EMPTY answers has not
	 * waited on an empty broker for an hour. */
	uint64_t empty_waited_ms;
	uint64_t empty_bound_ms;
	struct eb_backoff leave;
	uint8_t *buf;
};

static const char *waiting_reason(int r)
{
	return r == -EDQUOT ? "quota spent" : "pool empty";
}

void eb_sink_log_event(struct eb_client *c, enum eb_sink_event e, int r, unsigned ms)
{
	switch (e) {
	case EB_SINK_CONNECTED:
		log_debug("Drawing from %s", eb_client_broker(c));
		break;
	case EB_SINK_SERVED:
		break;
	case EB_SINK_DATA:
		eb_cli_sink_answer(c, 0);
		break;
	case EB_SINK_WAITING:
		eb_cli_sink_answer(c, r);
		log_debug("Broker %s: %s, retrying in %u ms", eb_client_broker(c),
		          waiting_reason(r), ms);
		break;
	case EB_SINK_LOST:
		log_warning_errno(r, "Lost broker %s: %s; failing over", eb_client_broker(c),
		                  eb_client_last_error(c));
		break;
	case EB_SINK_MOVING:
		log_notice("Broker %s has answered only EMPTY for %u s; trying another broker",
		           eb_client_broker(c), ms / 1000);
		break;
	case EB_SINK_RETRYING:
		/* The watch (eb_cli_client_watch()) has logged it, at a bounded rate. */
		break;
	case EB_SINK_UNREACHABLE:
		log_error_errno(r, "Cannot reach a broker: %s", eb_client_last_error(c));
		break;
	case EB_SINK_REFUSED:
		log_error("Broker %s refused: %s", eb_client_broker(c), eb_client_last_error(c));
		break;
	case _EB_SINK_EVENT_MAX:
	case _EB_SINK_EVENT_INVALID:
		break;
	}
}

static void event(struct run *s, enum eb_sink_event e, int r, unsigned ms)
{
	if (s->ops->event)
		s->ops->event(s->userdata, s->c, e, r, ms);
	else
		eb_sink_log_event(s->c, e, r, ms);
}

static bool connected(const struct run *s)
{
	return s->c && eb_client_connected(s->c);
}

static uint64_t remaining_ms(const struct run *s)
{
	uint64_t now = eb_now_ms();

	return s->p->deadline_ms > now ? s->p->deadline_ms - now : 0;
}

/* Rests ms (-1: until the program has news), never past the deadline: 0, or the program's
 * reason to stop. */
static int rest(struct run *s, int ms)
{
	if (ms >= 0 && s->p->deadline_ms)
		ms = (int)MIN((uint64_t)ms, remaining_ms(s));
	if (s->ops->wait)
		return s->ops->wait(s->userdata, ms);
	if (ms > 0)
		(void)eb_sleep_ms((uint64_t)ms);
	return 0;
}

static void forget_requests(struct run *s)
{
	s->n_in_flight = 0;
	s->in_flight_bytes = 0;
	s->empty_bound_ms = 0;
}

/* A thread's way: one pass, then a back-off it can be stopped in. 0 also when not connected:
 * the loop comes round. */
static int connect_pass(struct run *s)
{
	unsigned ms;
	int r;

	r = s->ops->connect ? s->ops->connect(s->userdata, &s->c) : eb_client_connect(s->c);
	if (r >= 0)
		return 0;
	if ((r == -EACCES || r == -EPROTONOSUPPORT) && !s->p->persist) {
		event(s, EB_SINK_REFUSED, r, 0);
		return r;
	}
	ms = eb_backoff_next(&s->backoff);
	event(s, EB_SINK_RETRYING, r, ms);
	return rest(s, (int)ms);
}

static int connect_broker(struct run *s)
{
	int r;

	forget_requests(s);
	if (s->ops->wait) {
		r = connect_pass(s);
		if (r < 0 || !connected(s))
			return r;
	} else {
		/* The client's own back-off, which also spaces out brokers that end every
		 * session before answering. */
		r = eb_client_connect_retry(
		    s->c, s->p->deadline_ms ? (int)MAX(remaining_ms(s), (uint64_t)1) : 0);
		if (r < 0) {
			event(s, EB_SINK_UNREACHABLE, r, 0);
			return r;
		}
	}
	s->served = false;
	event(s, EB_SINK_CONNECTED, 0, 0);
	return 0;
}

static int lose(struct run *s, int r)
{
	forget_requests(s);
	eb_client_disconnect(s->c);
	/* A stop is not a loss (eb_client_set_cancel()). */
	if (r == -ECANCELED && s->ops->wait)
		return r;
	event(s, EB_SINK_LOST, r, 0);
	/* A thread backs off before it reconnects: an answer resets the back-off, so a broker
	 * that takes HELLO and then ends every session is retried on the back-off's schedule. */
	if (s->ops->wait) {
		unsigned ms = eb_backoff_next(&s->backoff);

		event(s, EB_SINK_RETRYING, r, ms);
		return rest(s, (int)ms);
	}
	return 0;
}

/* Asks for what the program wants, up to the window. A one-shot program that wants nothing
 * beyond its GETs out says they are the session's last; a broker that does not know the rule
 * (-EOPNOTSUPP) just keeps the session open. */
static int request(struct run *s)
{
	/* A one-shot program is asked even with the window full, to learn whether the GETs out
	 * are its last (its want() does not block). */
	while (s->p->oneshot ? !eb_client_ended(s->c) : s->n_in_flight < s->window) {
		size_t n = s->ops->want(s->userdata, s->c, s->in_flight_bytes);
		int r;

		if (n == 0 && s->p->oneshot && s->n_in_flight > 0)
			(void)eb_client_end_requests(s->c);
		if (n == 0 || n == EB_SINK_WANT_CONNECT || s->n_in_flight >= s->window)
			break;
		n = MIN(n, (size_t)EB_DATA_MAX);
		r = eb_client_request(s->c, n, s->p->mode);
		if (r < 0)
			return r;
		s->in_flight[s->n_in_flight++] = (uint32_t)n;
		s->in_flight_bytes += n;
	}
	return 0;
}

static void answered(struct run *s)
{
	s->in_flight_bytes -= s->in_flight[0];
	memmove(s->in_flight, s->in_flight + 1, (s->n_in_flight - 1) * sizeof(s->in_flight[0]));
	s->n_in_flight--;
	if (!s->served) {
		s->served = true;
		eb_backoff_reset(&s->backoff);
		event(s, EB_SINK_SERVED, 0, 0);
	}
}

/* An EMPTY: true when it is the one past the bound and the sink has moved off the broker
 * (EB_SINK_LEAVE_EMPTY_MIN_MS). */
static bool leave_empty(struct run *s, uint64_t held_ms)
{
	char why[128];

	/* The broker holds a GET up to 250 ms before it says EMPTY: that is waiting too. */
	s->empty_waited_ms += held_ms;
	if (s->empty_bound_ms == 0) {
		s->empty_waited_ms = held_ms;
		/* At least EB_SINK_LEAVE_EMPTY_MIN_MS / 2: never 0, which means no EMPTY yet. */
		s->empty_bound_ms = eb_backoff_next(&s->leave);
		return false;
	}
	if (s->empty_waited_ms < s->empty_bound_ms || !eb_client_has_other(s->c))
		return false;
	event(s, EB_SINK_MOVING, -EAGAIN, (unsigned)MIN(s->empty_waited_ms, (uint64_t)UINT_MAX));
	snprintf(why, sizeof(why), "it answered only EMPTY for %" PRIu64 " ms", s->empty_waited_ms);
	forget_requests(s);
	eb_client_leave(s->c, why);
	return true;
}

static int starve(struct run *s, int r, uint32_t retry_ms)
{
	unsigned max = s->p->retry_max_ms ? s->p->retry_max_ms : RETRY_MAX_MS;
	unsigned ms = MIN(MAX(retry_ms, s->p->retry_min_ms), max);

	if (s->p->deadline_ms)
		ms = (unsigned)MIN((uint64_t)ms, remaining_ms(s));
	event(s, EB_SINK_WAITING, r, ms);
	if (r == -EAGAIN)
		s->empty_waited_ms += ms;
	return rest(s, (int)ms);
}

static int deliver(struct run *s, size_t len, uint32_t bits)
{
	int r;

	s->empty_bound_ms = 0;
	eb_backoff_reset(&s->leave);
	event(s, EB_SINK_DATA, 0, 0);
	r = s->ops->take(s->userdata, s->c, s->buf, len, bits);
	explicit_bzero(s->buf, len);
	if (r == EB_SINK_FAILOVER) {
		/* The program has said why; it rested as long as it thinks the broker deserves. */
		forget_requests(s);
		eb_client_disconnect(s->c);
		return 0;
	}
	return r;
}

/* Nothing wanted and nothing in flight: a thread rests until the program has news; a program
 * is done. */
static int idle(struct run *s)
{
	if (!s->ops->wait)
		return EB_SINK_DONE;
	return rest(s, -1);
}

/* One turn: connect, or ask and take one answer. 0 to come round, EB_SINK_DONE, or an error. */
static int step(struct run *s)
{
	size_t len = 0;
	uint32_t bits = 0, retry = 0;
	uint64_t waiting_since = 0;
	int r;

	if (!connected(s)) {
		if (s->ops->want(s->userdata, s->c, 0) == 0)
			return idle(s);
		return connect_broker(s);
	}
	/* The last answers of a session whose requests were ended are in, and more is wanted (a
	 * short DATA, an EMPTY): the broker ends that session; the next turn connects again. */
	if (s->p->oneshot && s->n_in_flight == 0 && eb_client_ended(s->c)) {
		eb_client_disconnect(s->c);
		return 0;
	}
	if (s->n_in_flight == 0 && s->ops->between) {
		r = s->ops->between(s->userdata, s->c);
		if (r < 0)
			return lose(s, r);
	}
	r = request(s);
	if (r >= 0 && s->n_in_flight == 0)
		return idle(s);
	if (r >= 0) {
		waiting_since = eb_now_ms();
		r = eb_client_receive(s->c, s->buf, EB_DATA_MAX, &len, &bits, &retry);
		if (r >= 0 || r == -EAGAIN || r == -EDQUOT)
			answered(s);
	}
	if (r == -EAGAIN && leave_empty(s, eb_now_ms() - waiting_since))
		return 0;
	if (r == -EAGAIN || r == -EDQUOT)
		return starve(s, r, retry);
	if ((r == -EACCES || r == -EPROTONOSUPPORT) && !s->p->persist) {
		event(s, EB_SINK_REFUSED, r, 0);
		return r;
	}
	if (r < 0)
		return lose(s, r);
	if (len == 0)
		return 0;
	return deliver(s, len, bits);
}

int eb_sink_run(struct eb_client *c, const struct eb_sink_params *p, const struct eb_sink_ops *ops,
                void *userdata)
{
	struct run s = {
	    .c = c,
	    .p = p,
	    .ops = ops,
	    .userdata = userdata,
	    .window = MIN(MAX(p->window, 1u), (unsigned)EB_CLIENT_GETS_MAX),
	    .backoff = EB_BACKOFF_INIT(p->backoff_min_ms ?: EB_BACKOFF_RECONNECT_MIN_MS,
	                               p->backoff_max_ms ?: EB_BACKOFF_RECONNECT_MAX_MS),
	    .leave = EB_BACKOFF_INIT(EB_SINK_LEAVE_EMPTY_MIN_MS, EB_SINK_LEAVE_EMPTY_MAX_MS),
	    .buf = p->buf,
	};
	int r;

	if (!s.c && !ops->connect)
		return -EINVAL;
	if (!s.buf) {
		s.buf = mmap(NULL, EB_DATA_MAX, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		             -1, 0);
		if (s.buf == MAP_FAILED)
			return negative_errno();
		/* Best effort: what passes through is the caller's secret. */
		(void)madvise(s.buf, EB_DATA_MAX, MADV_DONTDUMP);
		(void)mlock(s.buf, EB_DATA_MAX);
	}
	do {
		r = 0;
		if (p->deadline_ms && eb_now_ms() >= p->deadline_ms)
			r = -ETIMEDOUT;
		else
			r = step(&s);
	} while (r == 0);
	if (!p->buf) {
		explicit_bzero(s.buf, EB_DATA_MAX);
		munmap(s.buf, EB_DATA_MAX);
	}
	return r == EB_SINK_DONE ? 0 : r;
}
