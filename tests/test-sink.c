/* SPDX-License-Identifier: MIT */
/* Tests for shared/sink.c, the loop every sink runs, with the broker client replaced through link
 * seams (-Wl,--wrap=eb_client_*) by a scripted broker, and the clock and sleep doubled
 * (-Wl,--wrap=eb_now_ms, eb_sleep_ms) so that rests are recorded, not taken: what is asked and
 * delivered with a window of GETs, the rest an EMPTY or QUOTA costs (its hint bounded), failover
 * when the broker goes away with what was in flight asked for again, the end at a refusal or the
 * deadline, a thread's back-off between connect passes and its stop, what a program sends
 * between GETs, and the move off a broker that has only EMPTY to give. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "client.h"
#include "macro.h"
#include "sink.h"

/* One answer of the scripted broker to the oldest GET. */
struct answer {
	int r;          /* 0: DATA; -EAGAIN, -EDQUOT, or an error (then disconnected) */
	uint32_t bits;  /* per DATA; UINT32_MAX: 8 a byte */
	uint32_t retry; /* EMPTY or QUOTA's hint */
	size_t len;     /* DATA's length; 0: what was asked */
	uint32_t held;  /* ms the broker holds the GET before it answers */
};

#define FULL UINT32_MAX

static struct fake {
	bool connected;
	int connects;      /* passes that succeeded */
	int connect_fails; /* this many passes fail first ... */
	int connect_error; /* ... with this */
	size_t asked[256]; /* every GET's length */
	size_t n_asked;
	size_t pending[16]; /* GETs not yet answered */
	size_t n_pending;
	const struct answer *answers;
	size_t n_answers, at;
	uint64_t now_ms;
	unsigned rests[64]; /* eb_sleep_ms() or wait() calls, in ms */
	size_t n_rests;
	char events[64]; /* C connected, S served, D data, W waiting, L lost, M moving,
	                    R retrying, U unreachable, X refused */
	size_t n_events;
	bool ended;         /* eb_client_end_requests() on this connection */
	size_t ended_after; /* GETs asked when it was */
	int ends;           /* sessions whose requests were ended */
	bool has_other;     /* eb_client_has_other() */
	int leaves;         /* eb_client_leave() calls */
	unsigned moves[8];  /* EB_SINK_MOVING's ms */
	size_t n_moves;
} fake;

static struct eb_client *const client = (struct eb_client *)&fake;

bool __wrap_eb_client_connected(const struct eb_client *c);
bool __wrap_eb_client_connected(const struct eb_client *c)
{
	(void)c;
	return fake.connected;
}

int __wrap_eb_client_connect(struct eb_client *c);
int __wrap_eb_client_connect(struct eb_client *c)
{
	(void)c;
	if (fake.connect_fails > 0) {
		fake.connect_fails--;
		return fake.connect_error;
	}
	fake.connected = true;
	fake.connects++;
	return 0;
}

/* The client's own retry loop, reduced to its outcome: the failures, then a connection, unless
 * the failure is a refusal or the deadline has passed. */
int __wrap_eb_client_connect_retry(struct eb_client *c, int deadline_ms);
int __wrap_eb_client_connect_retry(struct eb_client *c, int deadline_ms)
{
	(void)deadline_ms;
	while (fake.connect_fails > 0) {
		if (fake.connect_error == -EACCES || fake.connect_error == -ETIMEDOUT) {
			fake.connect_fails--;
			return fake.connect_error;
		}
		fake.connect_fails--;
	}
	return __wrap_eb_client_connect(c);
}

void __wrap_eb_client_disconnect(struct eb_client *c);
void __wrap_eb_client_disconnect(struct eb_client *c)
{
	(void)c;
	fake.connected = false;
	fake.n_pending = 0;
	fake.ended = false;
}

int __wrap_eb_client_end_requests(struct eb_client *c);
int __wrap_eb_client_end_requests(struct eb_client *c)
{
	(void)c;
	assert_true(fake.connected);
	assert_false(fake.ended);
	fake.ended = true;
	fake.ended_after = fake.n_asked;
	fake.ends++;
	return 0;
}

bool __wrap_eb_client_ended(const struct eb_client *c);
bool __wrap_eb_client_ended(const struct eb_client *c)
{
	(void)c;
	return fake.ended;
}

bool __wrap_eb_client_has_other(const struct eb_client *c);
bool __wrap_eb_client_has_other(const struct eb_client *c)
{
	(void)c;
	return fake.has_other;
}

void __wrap_eb_client_leave(struct eb_client *c, const char *why);
void __wrap_eb_client_leave(struct eb_client *c, const char *why)
{
	assert_non_null(strstr(why, "only EMPTY"));
	fake.leaves++;
	__wrap_eb_client_disconnect(c);
}

int __wrap_eb_client_request(struct eb_client *c, size_t len, enum eb_get_mode mode);
int __wrap_eb_client_request(struct eb_client *c, size_t len, enum eb_get_mode mode)
{
	(void)c;
	assert_int_equal(mode, EB_GET_FULL);
	assert_true(fake.connected);
	assert_in_range(len, 1, EB_DATA_MAX);
	assert_true(fake.n_pending < EB_CLIENT_GETS_MAX);
	assert_false(fake.ended); /* nothing is sent after the end */
	assert_true(fake.n_asked < ELEMENTSOF(fake.asked));
	fake.asked[fake.n_asked++] = len;
	fake.pending[fake.n_pending++] = len;
	return 0;
}

int __wrap_eb_client_receive(struct eb_client *c, void *buf, size_t size, size_t *ret_len,
                             uint32_t *ret_bits, uint32_t *ret_retry_ms);
int __wrap_eb_client_receive(struct eb_client *c, void *buf, size_t size, size_t *ret_len,
                             uint32_t *ret_bits, uint32_t *ret_retry_ms)
{
	const struct answer *a;
	size_t asked;

	(void)c;
	assert_true(fake.connected);
	assert_true(fake.n_pending > 0);
	assert_true(fake.at < fake.n_answers); /* nothing asked beyond the script */
	a = &fake.answers[fake.at++];
	fake.now_ms += a->held;
	asked = fake.pending[0];
	memmove(fake.pending, fake.pending + 1, --fake.n_pending * sizeof(fake.pending[0]));
	if (a->r == -EAGAIN || a->r == -EDQUOT) {
		*ret_retry_ms = a->retry;
		return a->r;
	}
	if (a->r < 0) {
		fake.connected = false;
		fake.n_pending = 0;
		return a->r;
	}
	*ret_len = a->len ? MIN(a->len, asked) : asked;
	assert_true(*ret_len <= size);
	memset(buf, 0xa5, *ret_len);
	*ret_bits = a->bits == FULL ? (uint32_t)(8 * *ret_len) : a->bits;
	return 0;
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

uint64_t __wrap_eb_now_ms(void);
uint64_t __wrap_eb_now_ms(void)
{
	return fake.now_ms;
}

static void rested(unsigned ms)
{
	if (fake.n_rests < ELEMENTSOF(fake.rests))
		fake.rests[fake.n_rests++] = ms;
	fake.now_ms += ms;
}

int __wrap_eb_sleep_ms(uint64_t ms);
int __wrap_eb_sleep_ms(uint64_t ms)
{
	rested((unsigned)ms);
	return 0;
}

/* The program: wants `total` bytes in pieces of at most `chunk`, and records what it took. */
struct program {
	uint64_t total, taken, bits;
	size_t chunk;
	int failover_at; /* take() says EB_SINK_FAILOVER for this DATA (1-based) */
	int takes;
	int stop_at_wait; /* wait() says stop at this call (1-based); 0: never */
	int waits;
	bool wake_on_idle; /* wait(-1) brings `total` more wanted */
	bool endless;      /* take() never says EB_SINK_DONE, as a thread's does not */
	bool to_send;      /* want() asks for a connection while between() has this to send */
	int betweens;
	int between_fail_at; /* between() loses the broker at this call (1-based) */
};

static size_t want(void *userdata, struct eb_client *c, uint64_t in_flight)
{
	struct program *pg = userdata;
	uint64_t left = pg->total - pg->taken;

	assert_ptr_equal(c, client);
	if (left <= in_flight)
		return pg->to_send ? EB_SINK_WANT_CONNECT : 0;
	return (size_t)MIN(left - in_flight, (uint64_t)pg->chunk);
}

static int take(void *userdata, struct eb_client *c, const uint8_t *buf, size_t len, uint32_t bits)
{
	struct program *pg = userdata;

	assert_ptr_equal(c, client);
	assert_int_equal(buf[0], 0xa5);
	assert_int_equal(buf[len - 1], 0xa5);
	if (++pg->takes == pg->failover_at)
		return EB_SINK_FAILOVER;
	pg->taken += len;
	pg->bits += bits;
	return pg->taken >= pg->total && !pg->endless ? EB_SINK_DONE : 0;
}

static int wait_hook(void *userdata, int ms)
{
	struct program *pg = userdata;

	pg->waits++;
	if (pg->waits == pg->stop_at_wait)
		return -ECANCELED;
	if (ms < 0) {
		assert_true(pg->wake_on_idle); /* an idle wait nobody will end */
		pg->wake_on_idle = false;
		pg->total += pg->total;
		return 0;
	}
	rested((unsigned)ms);
	return 0;
}

static void on_event(void *userdata, struct eb_client *c, enum eb_sink_event e, int r, unsigned ms)
{
	static const char letters[] = {
	    [EB_SINK_CONNECTED] = 'C', [EB_SINK_SERVED] = 'S',      [EB_SINK_DATA] = 'D',
	    [EB_SINK_WAITING] = 'W',   [EB_SINK_LOST] = 'L',        [EB_SINK_MOVING] = 'M',
	    [EB_SINK_RETRYING] = 'R',  [EB_SINK_UNREACHABLE] = 'U', [EB_SINK_REFUSED] = 'X',
	};

	(void)userdata;
	(void)r;
	(void)ms;
	assert_in_range(e, 0, _EB_SINK_EVENT_MAX - 1);
	if (e == EB_SINK_MOVING && fake.n_moves < ELEMENTSOF(fake.moves))
		fake.moves[fake.n_moves++] = ms;
	if (fake.n_events + 1 < sizeof(fake.events))
		fake.events[fake.n_events++] = letters[e];
	eb_sink_log_event(c, e, r, ms);
}

/* Sends what it has, as eb-sink-egd passes on EGD writes: only with nothing asked for. */
static int between(void *userdata, struct eb_client *c)
{
	struct program *pg = userdata;

	assert_ptr_equal(c, client);
	assert_true(fake.connected);
	assert_int_equal(fake.n_pending, 0);
	if (++pg->betweens == pg->between_fail_at) {
		fake.connected = false;
		return -EPIPE;
	}
	pg->to_send = false;
	return 0;
}

static const struct eb_sink_ops program_ops = {.want = want, .take = take, .event = on_event};
static const struct eb_sink_ops thread_ops = {
    .want = want, .take = take, .wait = wait_hook, .event = on_event};
static const struct eb_sink_ops sending_ops = {
    .want = want, .take = take, .wait = wait_hook, .between = between, .event = on_event};

static void script(const struct answer *a, size_t n)
{
	fake.answers = a;
	fake.n_answers = n;
}

static int setup(void **state)
{
	(void)state;
	fake = (struct fake){.now_ms = 1000};
	return 0;
}

/* 100 bytes in pieces of 40, two GETs out at a time: asked once each, delivered in full. */
static void test_draw_window(void **state)
{
	static const struct answer a[] = {{0, FULL, 0, 0}, {0, FULL, 0, 0}, {0, FULL, 0, 0}};
	struct program pg = {.total = 100, .chunk = 40};
	struct eb_sink_params p = {.mode = EB_GET_FULL, .window = 2};

	(void)state;
	script(a, ELEMENTSOF(a));
	assert_int_equal(eb_sink_run(client, &p, &program_ops, &pg), 0);
	assert_int_equal(pg.taken, 100);
	assert_int_equal(pg.bits, 800);
	assert_int_equal(fake.n_asked, 3);
	assert_int_equal(fake.asked[0], 40);
	assert_int_equal(fake.asked[1], 40);
	assert_int_equal(fake.asked[2], 20);
	assert_int_equal(fake.connects, 1);
	assert_int_equal(fake.n_rests, 0);
	assert_string_equal(fake.events, "CSDDD");
}

/* A one-shot draw ends the session's requests with its last GET; a short answer after the end is
 * asked for again on a new session. */
static void test_oneshot_ends_requests(void **state)
{
	static const struct answer a[] = {{0, FULL, 0, 0}, {0, FULL, 0, 0}, {0, FULL, 0, 0}};
	static const struct answer short_one[] = {{0, FULL, 0, 10}, {0, FULL, 0, 0}};
	struct program pg = {.total = 100, .chunk = 40};
	struct eb_sink_params p = {.mode = EB_GET_FULL, .window = 2, .oneshot = true};

	(void)state;
	script(a, ELEMENTSOF(a));
	assert_int_equal(eb_sink_run(client, &p, &program_ops, &pg), 0);
	assert_int_equal(pg.taken, 100);
	assert_int_equal(fake.n_asked, 3);
	assert_int_equal(fake.ends, 1);
	assert_int_equal(fake.ended_after, 3); /* with the last GET, not before */
	assert_int_equal(fake.connects, 1);

	/* Without oneshot, nothing is ended. */
	fake = (struct fake){.now_ms = 1000};
	script(a, ELEMENTSOF(a));
	pg = (struct program){.total = 100, .chunk = 40};
	p.oneshot = false;
	assert_int_equal(eb_sink_run(client, &p, &program_ops, &pg), 0);
	assert_int_equal(fake.ends, 0);

	fake = (struct fake){.now_ms = 1000};
	script(short_one, ELEMENTSOF(short_one));
	pg = (struct program){.total = 40, .chunk = 40};
	p = (struct eb_sink_params){.mode = EB_GET_FULL, .oneshot = true};
	assert_int_equal(eb_sink_run(client, &p, &program_ops, &pg), 0);
	assert_int_equal(pg.taken, 40);
	assert_int_equal(fake.n_asked, 2);
	assert_int_equal(fake.asked[1], 30);
	assert_int_equal(fake.ends, 2);
	assert_int_equal(fake.connects, 2);
	assert_string_equal(fake.events, "CSDCSD"); /* no "lost": the session ended as asked */
}

/* A short DATA: what it did not bring is asked for again. */
static void test_short_data_asked_again(void **state)
{
	static const struct answer a[] = {{0, FULL, 0, 10}, {0, FULL, 0, 0}};
	struct program pg = {.total = 40, .chunk = 40};
	struct eb_sink_params p = {.mode = EB_GET_FULL};

	(void)state;
	script(a, ELEMENTSOF(a));
	assert_int_equal(eb_sink_run(client, &p, &program_ops, &pg), 0);
	assert_int_equal(pg.taken, 40);
	assert_int_equal(fake.n_asked, 2);
	assert_int_equal(fake.asked[1], 30);
}

/* EMPTY and QUOTA rest as long as their hint says, within the bounds; nothing is lost. */
static void test_empty_and_quota_back_off(void **state)
{
	static const struct answer a[] = {
	    {-EAGAIN, 0, 250, 0}, {-EDQUOT, 0, 5000000, 0}, {-EAGAIN, 0, 0, 0}, {0, FULL, 0, 0}};
	struct program pg = {.total = 16, .chunk = 16};
	struct eb_sink_params p = {.mode = EB_GET_FULL, .retry_min_ms = 10};

	(void)state;
	script(a, ELEMENTSOF(a));
	assert_int_equal(eb_sink_run(client, &p, &program_ops, &pg), 0);
	assert_int_equal(pg.taken, 16);
	assert_int_equal(fake.n_rests, 3);
	assert_int_equal(fake.rests[0], 250);
	assert_int_equal(fake.rests[1], 60000); /* the broker's hint, capped */
	assert_int_equal(fake.rests[2], 10);    /* and raised to the floor */
	assert_int_equal(fake.n_asked, 4);
	assert_int_equal(fake.connects, 1);
	assert_string_equal(fake.events, "CSWWWD");
}

/* The rest never goes past the deadline, and the deadline ends the run. */
static void test_deadline(void **state)
{
	static const struct answer a[] = {{-EAGAIN, 0, 30000, 0}};
	struct program pg = {.total = 16, .chunk = 16};
	struct eb_sink_params p = {.mode = EB_GET_FULL, .deadline_ms = 1000 + 700};

	(void)state;
	script(a, ELEMENTSOF(a));
	assert_int_equal(eb_sink_run(client, &p, &program_ops, &pg), -ETIMEDOUT);
	assert_int_equal(fake.n_rests, 1);
	assert_int_equal(fake.rests[0], 700);
	assert_int_equal(pg.taken, 0);
}

/* A lost broker: failover, and what was in flight is asked for again from the next. */
static void test_connection_loss(void **state)
{
	static const struct answer a[] = {
	    {0, FULL, 0, 0}, {-ECONNRESET, 0, 0, 0}, {0, FULL, 0, 0}, {0, FULL, 0, 0}};
	struct program pg = {.total = 120, .chunk = 40};
	struct eb_sink_params p = {.mode = EB_GET_FULL, .window = 2};

	(void)state;
	script(a, ELEMENTSOF(a));
	assert_int_equal(eb_sink_run(client, &p, &program_ops, &pg), 0);
	assert_int_equal(pg.taken, 120);
	assert_int_equal(fake.connects, 2);
	/* 40, 40 out; the first answered; 40 more; then the loss takes two: 40, 40 again. */
	assert_int_equal(fake.n_asked, 5);
	assert_int_equal(fake.asked[3], 40);
	assert_int_equal(fake.asked[4], 40);
	assert_string_equal(fake.events, "CSDLCSDD");
	/* A program reconnects at once: the client's connect_retry() spaces out attempts. */
	assert_int_equal(fake.n_rests, 0);
}

/* A refusal ends the run: retrying would not change the broker's mind. */
static void test_refusal_ends(void **state)
{
	static const struct answer a[] = {{-EACCES, 0, 0, 0}};
	struct program pg = {.total = 16, .chunk = 16};
	struct eb_sink_params p = {.mode = EB_GET_FULL};

	(void)state;
	script(a, ELEMENTSOF(a));
	assert_int_equal(eb_sink_run(client, &p, &program_ops, &pg), -EACCES);
	assert_string_equal(fake.events, "CX");
}

/* A program that cannot reach a broker by its deadline says so once and ends. */
static void test_unreachable(void **state)
{
	struct program pg = {.total = 16, .chunk = 16};
	struct eb_sink_params p = {.mode = EB_GET_FULL, .deadline_ms = 5000};

	(void)state;
	fake.connect_fails = 1;
	fake.connect_error = -ETIMEDOUT;
	assert_int_equal(eb_sink_run(client, &p, &program_ops, &pg), -ETIMEDOUT);
	assert_string_equal(fake.events, "U");
	assert_int_equal(fake.n_asked, 0);
}

/* take() refuses a broker's bytes: disconnected, and the next broker asked. */
static void test_take_fails_over(void **state)
{
	static const struct answer a[] = {{0, 3, 0, 0}, {0, FULL, 0, 0}};
	struct program pg = {.total = 16, .chunk = 16, .failover_at = 1};
	struct eb_sink_params p = {.mode = EB_GET_FULL};

	(void)state;
	script(a, ELEMENTSOF(a));
	assert_int_equal(eb_sink_run(client, &p, &program_ops, &pg), 0);
	assert_int_equal(fake.connects, 2);
	assert_int_equal(pg.taken, 16);
	assert_int_equal(pg.bits, 128);
}

/* A thread connects pass by pass, backing off through wait() between them, the back-off growing
 * until an answer resets it. */
static void test_thread_backoff(void **state)
{
	static const struct answer a[] = {{0, FULL, 0, 0}};
	struct program pg = {.total = 8, .chunk = 8};
	struct eb_sink_params p = {
	    .mode = EB_GET_FULL, .backoff_min_ms = 1000, .backoff_max_ms = 4000};

	(void)state;
	script(a, ELEMENTSOF(a));
	fake.connect_fails = 4;
	fake.connect_error = -ECONNREFUSED;
	assert_int_equal(eb_sink_run(client, &p, &thread_ops, &pg), 0);
	assert_int_equal(pg.taken, 8);
	assert_int_equal(fake.n_rests, 4);
	/* Equal jitter: each wait in [ceiling/2, ceiling], the ceiling doubling to the max. */
	assert_in_range(fake.rests[0], 500, 1000);
	assert_in_range(fake.rests[1], 1000, 2000);
	assert_in_range(fake.rests[2], 2000, 4000);
	assert_in_range(fake.rests[3], 2000, 4000);
	assert_string_equal(fake.events, "RRRRCSD");
}

/* A thread rests while nothing is wanted, until the program has news, and stops when wait()
 * says so. */
static void test_thread_idle_and_stop(void **state)
{
	static const struct answer a[] = {{0, FULL, 0, 0}, {-EAGAIN, 0, 100, 0}};
	struct program pg = {
	    .total = 8, .chunk = 8, .endless = true, .wake_on_idle = true, .stop_at_wait = 2};
	struct eb_sink_params p = {.mode = EB_GET_FULL};

	(void)state;
	script(a, ELEMENTSOF(a));
	/* 8 bytes, then the idle wait brings 8 more, whose EMPTY's rest is where the stop
	 * comes. */
	assert_int_equal(eb_sink_run(client, &p, &thread_ops, &pg), -ECANCELED);
	assert_int_equal(pg.taken, 8);
	assert_int_equal(pg.waits, 2);
	assert_int_equal(fake.n_asked, 2);
	assert_string_equal(fake.events, "CSDW");
}

/* A thread's stop while it rests after an EMPTY ends the run with the stop. */
static void test_thread_stop_in_rest(void **state)
{
	static const struct answer a[] = {{-EAGAIN, 0, 100, 0}};
	struct program pg = {.total = 8, .chunk = 8, .stop_at_wait = 1};
	struct eb_sink_params p = {.mode = EB_GET_FULL};

	(void)state;
	script(a, ELEMENTSOF(a));
	assert_int_equal(eb_sink_run(client, &p, &thread_ops, &pg), -ECANCELED);
	assert_int_equal(pg.taken, 0);
	assert_string_equal(fake.events, "CSW");
}

/* A thread that loses its broker backs off before reconnecting; a persisting one retries a
 * refusal as well. */
static void test_thread_loss_and_persist(void **state)
{
	static const struct answer a[] = {
	    {-ECONNRESET, 0, 0, 0}, {-EACCES, 0, 0, 0}, {0, FULL, 0, 0}};
	struct program pg = {.total = 8, .chunk = 8};
	struct eb_sink_params p = {.mode = EB_GET_FULL, .persist = true, .backoff_min_ms = 1000};

	(void)state;
	script(a, ELEMENTSOF(a));
	assert_int_equal(eb_sink_run(client, &p, &thread_ops, &pg), 0);
	assert_int_equal(pg.taken, 8);
	assert_int_equal(fake.connects, 3);
	assert_int_equal(fake.n_rests, 2);
	assert_string_equal(fake.events, "CLRCLRCSD");
}

/* between() comes before each GET while none is out; a broker it loses is failed over. */
static void test_between_gets(void **state)
{
	static const struct answer a[] = {{0, FULL, 0, 0}, {0, FULL, 0, 0}};
	struct program pg = {.total = 16, .chunk = 8, .between_fail_at = 2};
	struct eb_sink_params p = {.mode = EB_GET_FULL};

	(void)state;
	script(a, ELEMENTSOF(a));
	assert_int_equal(eb_sink_run(client, &p, &sending_ops, &pg), 0);
	assert_int_equal(pg.taken, 16);
	assert_int_equal(pg.betweens, 3);
	assert_int_equal(fake.n_asked, 2);
	assert_int_equal(fake.connects, 2);
	assert_int_equal(fake.n_rests, 1);
	assert_string_equal(fake.events, "CSDLRCSD");
}

/* A thread with nothing to draw but something to send connects, sends, and rests. */
static void test_between_without_gets(void **state)
{
	struct program pg = {.to_send = true, .stop_at_wait = 1};
	struct eb_sink_params p = {.mode = EB_GET_FULL};

	(void)state;
	assert_int_equal(eb_sink_run(client, &p, &sending_ops, &pg), -ECANCELED);
	assert_int_equal(pg.betweens, 1);
	assert_false(pg.to_send);
	assert_int_equal(fake.n_asked, 0);
	assert_string_equal(fake.events, "C");
}

/* EMPTY answers, each held 250 ms by the broker and asking for a rest of a second, then one
 * DATA, n of them from a. */
#define EMPTY_EACH_MS 1250
static size_t empties(struct answer *a, size_t n)
{
	for (size_t i = 0; i < n; i++)
		a[i] = (struct answer){-EAGAIN, 0, 1000, 0, 250};
	a[n] = (struct answer){0, FULL, 0, 0};
	return n + 1;
}

/* A broker with only EMPTY to give is left after a bound drawn from [10 s, 20 s], and the next
 * one that has only EMPTY too after one from [20 s, 40 s]; DATA starts the bound again. The
 * move is made at the EMPTY past the bound, a hold and a rest (1.25 s here) at most after it. */
static void test_empty_moves_on(void **state)
{
	static struct answer a[54 + 1 + 25 + 1];
	struct program pg = {.total = 32, .chunk = 16};
	struct eb_sink_params p = {.mode = EB_GET_FULL};
	size_t n;

	(void)state;
	n = empties(a, 54); /* two moves, the second after 17 to 33 EMPTY answers */
	n += empties(a + n, 25);
	script(a, n);
	fake.has_other = true;
	assert_int_equal(eb_sink_run(client, &p, &program_ops, &pg), 0);
	assert_int_equal(pg.taken, 32);
	assert_int_equal(fake.at, n);
	assert_int_equal(fake.leaves, 3);
	assert_int_equal(fake.connects, 4);
	assert_int_equal(fake.n_moves, 3);
	/* The holds count: the wait is the clock's, from the first EMPTY's GET on. */
	assert_in_range(fake.moves[0], EB_SINK_LEAVE_EMPTY_MIN_MS / 2,
	                EB_SINK_LEAVE_EMPTY_MIN_MS + EMPTY_EACH_MS);
	assert_in_range(fake.moves[1], EB_SINK_LEAVE_EMPTY_MIN_MS,
	                2 * EB_SINK_LEAVE_EMPTY_MIN_MS + EMPTY_EACH_MS);
	assert_in_range(fake.moves[2], EB_SINK_LEAVE_EMPTY_MIN_MS / 2,
	                EB_SINK_LEAVE_EMPTY_MIN_MS + EMPTY_EACH_MS);
}

/* With no other broker to go to, a sink waits on the one it has, however long it is empty. */
static void test_empty_stays_alone(void **state)
{
	static struct answer a[100 + 1];
	struct program pg = {.total = 16, .chunk = 16};
	struct eb_sink_params p = {.mode = EB_GET_FULL};

	(void)state;
	script(a, empties(a, 100));
	assert_int_equal(eb_sink_run(client, &p, &program_ops, &pg), 0);
	assert_int_equal(pg.taken, 16);
	assert_int_equal(fake.leaves, 0);
	assert_int_equal(fake.connects, 1);
	assert_int_equal(fake.n_moves, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_draw_window, setup),
	    cmocka_unit_test_setup(test_short_data_asked_again, setup),
	    cmocka_unit_test_setup(test_oneshot_ends_requests, setup),
	    cmocka_unit_test_setup(test_empty_and_quota_back_off, setup),
	    cmocka_unit_test_setup(test_deadline, setup),
	    cmocka_unit_test_setup(test_connection_loss, setup),
	    cmocka_unit_test_setup(test_refusal_ends, setup),
	    cmocka_unit_test_setup(test_unreachable, setup),
	    cmocka_unit_test_setup(test_take_fails_over, setup),
	    cmocka_unit_test_setup(test_thread_backoff, setup),
	    cmocka_unit_test_setup(test_thread_idle_and_stop, setup),
	    cmocka_unit_test_setup(test_thread_stop_in_rest, setup),
	    cmocka_unit_test_setup(test_thread_loss_and_persist, setup),
	    cmocka_unit_test_setup(test_between_gets, setup),
	    cmocka_unit_test_setup(test_between_without_gets, setup),
	    cmocka_unit_test_setup(test_empty_moves_on, setup),
	    cmocka_unit_test_setup(test_empty_stays_alone, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
