/* SPDX-License-Identifier: MIT */
/* Tests for daemon/upstream.c, the event loop's side of [upstream], with the thread's end of the
 * socket pair held by the test instead of the thread: pthread_create is doubled (-Wl,--wrap) so
 * that the thread ends at once and the test reads the commands it would have, socketpair so that
 * the pair holds only a few of them, and the pool's level and the chain's path are the test's.
 * What is checked: a DRAW the pair has no room for is sent once it has (EPOLLOUT), not lost, and
 * the path changes that filled it reach the thread as their latest state. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>
#include <systemd/sd-event.h>

#include "../daemon/broker.h"
#include "../daemon/chain.h"
#include "../daemon/upstream-internal.h"
#include "../daemon/upstream.h"
#include "macro.h"

#define CAPACITY (1u << 20)

static struct {
	uint64_t level;
	uint64_t path_id; /* the one id of this broker's path */
	struct up_thread *thread;
} fake;

uint64_t __wrap_eb_pool_level(const struct eb_pool *pool);
uint64_t __wrap_eb_pool_level(const struct eb_pool *pool)
{
	(void)pool;
	return fake.level;
}

uint64_t __wrap_eb_pool_capacity(const struct eb_pool *pool);
uint64_t __wrap_eb_pool_capacity(const struct eb_pool *pool)
{
	(void)pool;
	return CAPACITY;
}

int __wrap_chain_path(const struct broker *b, uint64_t ret[EB_CHAIN_MAX]);
int __wrap_chain_path(const struct broker *b, uint64_t ret[EB_CHAIN_MAX])
{
	(void)b;
	ret[0] = fake.path_id;
	return 1;
}

/* The pair at its smallest (the kernel raises the size to its floor): a few commands fill it. */
int __real_socketpair(int domain, int type, int protocol, int sv[2]);
int __wrap_socketpair(int domain, int type, int protocol, int sv[2]);
int __wrap_socketpair(int domain, int type, int protocol, int sv[2])
{
	int r = __real_socketpair(domain, type, protocol, sv), size = 1;

	if (r >= 0)
		for (int i = 0; i < 2; i++)
			assert_return_code(
			    setsockopt(sv[i], SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)), errno);
	return r;
}

static void *no_thread(void *arg)
{
	(void)arg;
	return NULL;
}

/* The upstream thread is not run: the test reads its end of the pair. */
int __real_pthread_create(pthread_t *id, const pthread_attr_t *attr, void *(*start)(void *),
                          void *arg);
int __wrap_pthread_create(pthread_t *id, const pthread_attr_t *attr, void *(*start)(void *),
                          void *arg);
int __wrap_pthread_create(pthread_t *id, const pthread_attr_t *attr, void *(*start)(void *),
                          void *arg)
{
	assert_ptr_equal(start, upstream_thread);
	fake.thread = arg;
	return __real_pthread_create(id, attr, no_thread, NULL);
}

/* Reads every command waiting at the thread's end: how many, and the last in *ret. */
static unsigned drain(struct up_cmd *ret)
{
	unsigned n = 0;
	struct up_cmd cmd;

	while (recv(fake.thread->fd, &cmd, sizeof(cmd), MSG_DONTWAIT) == (ssize_t)sizeof(cmd)) {
		*ret = cmd;
		n++;
	}
	return n;
}

static void test_draw_queued_when_full(void **state)
{
	char broker_uri[] = "unix:/nonexistent/broker.sock";
	struct eb_conf conf = {
	    .upstream = {.set = true,
	                 .brokers = {broker_uri},
	                 .n_brokers = 1,
	                 .low_water_pct = 50,
	                 .draw_bits = 65536},
	};
	struct broker b = {.conf = &conf};
	struct up_cmd last = {};
	unsigned sent = 0, received, turns;
	bool drew = false;

	(void)state;
	fake.level = CAPACITY; /* full: path changes alone, no DRAW */
	assert_return_code(sd_event_new(&b.event), 0);
	assert_int_equal(upstream_new(&b, &b.upstream), 0);
	assert_non_null(b.upstream);
	assert_non_null(fake.thread);

	/* The thread is busy in a client call: path changes fill the pair. */
	for (fake.path_id = 1; fake.path_id <= 64; fake.path_id++, sent++)
		upstream_path_changed(&b);
	fake.path_id--;
	/* Then the level falls: a DRAW the pair has no room for. */
	fake.level = 0;
	upstream_level_changed(&b);

	received = drain(&last);
	/* Else the pair never filled, and this test tests nothing. */
	assert_in_range(received, 1, sent - 1);
	drew = last.bits > 0;
	/* The thread has read what was there: the loop sends the rest when the pair has room. */
	for (turns = 0; turns < 8 && !drew; turns++) {
		struct up_cmd cmd;

		assert_return_code(sd_event_run(b.event, 0), 0);
		if (drain(&cmd) > 0) {
			last = cmd;
			drew = cmd.bits > 0;
		}
	}
	assert_true(drew);
	assert_int_equal(last.type, UP_CMD_DRAW);
	assert_int_equal(last.bits, 65536);
	/* The DRAW carries the path as it stands, the latest of those that did not fit. */
	assert_int_equal(last.n_chain, 1);
	assert_int_equal(last.chain[0], fake.path_id);

	b.upstream = upstream_free(b.upstream);
	b.event = sd_event_unref(b.event);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_draw_queued_when_full),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
