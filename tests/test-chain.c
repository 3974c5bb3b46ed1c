/* SPDX-License-Identifier: MIT */
/* Tests for daemon/chain.c's verdicts on a chained HELLO, with a broker of the test's own (no loop,
 * no sessions): a user that is not a downstream broker, a cycle through this broker, a path that
 * would grow too deep, and a path that holds the ids of the links joined, and only while they
 * are. The session acts on the verdict; nothing here sends or closes anything. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../daemon/broker.h"
#include "../daemon/chain.h"
#include "log.h"

#define SELF 0x5e1f5e1f5e1f5e1fULL

static struct eb_user users[3] = {
    {.name = (char *)"sink", .roles = EB_ROLE_SINK},
    {.name = (char *)"edge", .roles = EB_ROLE_SINK, .downstream_broker = true},
    {.name = (char *)"edge2", .roles = EB_ROLE_SINK, .downstream_broker = true},
};

static void setup_broker(struct broker *b, struct eb_conf *conf)
{
	*conf = (struct eb_conf){.users = users, .n_users = 3};
	*b = (struct broker){.conf = conf, .chain_id = SELF, .chain_refused_user = -1};
	for (int k = 0; k < _PEER_LOG_MAX; k++)
		b->peer_log[k] = EB_RATELIMIT_INIT(PEER_LOG_INTERVAL_USEC, PEER_LOG_BURST);
}

static struct eb_msg_hello hello(unsigned n, uint64_t first)
{
	struct eb_msg_hello h = {.n_chain = (uint8_t)n};

	for (unsigned i = 0; i < n; i++)
		h.chain[i] = first + i;
	return h;
}

static void test_not_a_broker(void **state)
{
	struct broker b;
	struct eb_conf conf;
	struct chain_link link = {};
	struct eb_msg_hello h = hello(1, 100);
	const char *why = NULL;

	(void)state;
	setup_broker(&b, &conf);
	assert_int_equal(chain_accept(&b, 0, "test peer", &h, &link, &why), -EPERM);
	assert_non_null(why);
	assert_int_equal(link.n, 0); /* nothing kept */
}

static void test_cycle_refused(void **state)
{
	struct broker b;
	struct eb_conf conf;
	struct chain_link link = {};
	struct eb_msg_hello h = hello(2, 100);
	const char *why = NULL;

	(void)state;
	setup_broker(&b, &conf);
	h.chain[1] = SELF;
	assert_int_equal(chain_accept(&b, 1, "test peer", &h, &link, &why), -ELOOP);
	assert_non_null(strstr(why, "cycle"));
	assert_int_equal(link.n, 0);
	/* Logged once per user and chain: the refusal is remembered. */
	assert_int_equal(b.chain_refused_user, 1);
	assert_int_equal(chain_accept(&b, 1, "test peer", &h, &link, &why), -ELOOP);
}

static void test_path_follows_links(void **state)
{
	struct broker b;
	struct eb_conf conf;
	struct chain_link a = {}, c = {};
	struct eb_msg_hello ha = hello(2, 100), hc = hello(2, 101);
	uint64_t path[EB_CHAIN_MAX];
	const char *why = NULL;

	(void)state;
	setup_broker(&b, &conf);
	assert_int_equal(chain_accept(&b, 1, "a", &ha, &a, &why), 0);
	assert_int_equal(chain_accept(&b, 1, "c", &hc, &c, &why), 0);
	/* Accepted is not joined: the path is this broker alone until the link is READY. */
	assert_int_equal(chain_path(&b, path), 1);
	assert_true(path[0] == SELF);
	chain_join(&b, &a);
	chain_join(&b, &c);
	assert_int_equal(chain_path(&b, path), 4); /* SELF, 100, 101, 102: each id once */
	assert_true(path[3] == 102);
	chain_leave(&b, &a);
	assert_int_equal(chain_path(&b, path), 3);
	assert_true(path[1] == 101);
	chain_leave(&b, &c);
	assert_int_equal(chain_path(&b, path), 1);
}

static void test_too_deep(void **state)
{
	struct broker b;
	struct eb_conf conf;
	struct chain_link a = {}, c = {};
	struct eb_msg_hello ha = hello(EB_CHAIN_MAX - 1, 100), hc = hello(1, 500);
	const char *why = NULL;

	(void)state;
	setup_broker(&b, &conf);
	b.upstream = (struct upstream *)&b; /* only tested for NULL: this broker draws upstream */
	assert_int_equal(chain_accept(&b, 1, "a", &ha, &a, &why), 0);
	chain_join(&b, &a);
	assert_int_equal(chain_accept(&b, 1, "c", &hc, &c, &why), -E2BIG);
	assert_non_null(strstr(why, "too deep"));
	chain_leave(&b, &a);
	assert_int_equal(chain_accept(&b, 1, "c", &hc, &c, &why), 0);
}

/* The budget is not first come, first served (issue 31, item 4): user edge's 15 ids (made up or
 * not) fill the path; user edge2 arriving with 1 id gets edge's link ended, not a refusal. edge
 * coming back with 15 is then the one that holds the most and is refused; ties stay. And with no
 * upstream, nothing needs room. */
static void test_budget_shared(void **state)
{
	struct broker b;
	struct eb_conf conf;
	struct chain_link a = {}, c = {}, a2 = {};
	struct eb_msg_hello ha = hello(EB_CHAIN_MAX - 1, 100), hc = hello(1, 500),
			    ha2 = hello(EB_CHAIN_MAX - 2, 200);
	const char *why = NULL;

	(void)state;
	setup_broker(&b, &conf);
	assert_int_equal(chain_accept(&b, 1, "a", &ha, &a, &why), 0);
	chain_join(&b, &a);
	assert_null(chain_make_way(&b, 2, &hc)); /* no upstream: no path to fit */

	b.upstream = (struct upstream *)&b;
	/* Another link of edge's own makes no way for edge. */
	assert_null(chain_make_way(&b, 1, &hc));
	assert_ptr_equal(chain_make_way(&b, 2, &hc), &a);
	chain_leave(&b, &a); /* the session ends */
	assert_null(chain_make_way(&b, 2, &hc));
	assert_int_equal(chain_accept(&b, 2, "c", &hc, &c, &why), 0);
	chain_join(&b, &c);

	/* edge again with 15: it would hold more than edge2, so it is refused. */
	assert_null(chain_make_way(&b, 1, &ha));
	assert_int_equal(chain_accept(&b, 1, "a", &ha, &a, &why), -E2BIG);
	/* With 14 it fits beside edge2's one (1 + 1 + 14 = 16). */
	assert_null(chain_make_way(&b, 1, &ha2));
	assert_int_equal(chain_accept(&b, 1, "a", &ha2, &a2, &why), 0);
	chain_join(&b, &a2);
	/* A user displaces only one that holds more than it would: edge2 (1 id) with a second
	 * link of 12 new ids would hold 13 against edge's 14, and edge makes way; with 13 it
	 * would hold 14, a tie, and nobody does. */
	ha2 = hello(12, 600);
	assert_ptr_equal(chain_make_way(&b, 2, &ha2), &a2);
	ha2 = hello(13, 600);
	assert_null(chain_make_way(&b, 2, &ha2));
	chain_leave(&b, &a2);
	chain_leave(&b, &c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_not_a_broker),       cmocka_unit_test(test_cycle_refused),
	    cmocka_unit_test(test_path_follows_links), cmocka_unit_test(test_too_deep),
	    cmocka_unit_test(test_budget_shared),
	};

	log_set_max_level(LOG_CRIT);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
