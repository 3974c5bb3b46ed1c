/* SPDX-License-Identifier: MIT */
/* Tests for daemon/agent-word.c alone: what a load balancer's agent check is told for a level, a
 * drain and a stop, the hysteresis between empty and refilled, and the lines as HAProxy reads
 * them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../daemon/agent-word.h"

#define CAP 1048576u

/* A pool of CAP bits holding level, empty below 1024 and refilled at a quarter. */
static struct agent_view at(uint64_t level)
{
	return (struct agent_view){.level_bits = level,
	                           .capacity_bits = CAP,
	                           .empty_bits = 1024,
	                           .refilled_bits = CAP / 4};
}

static void weight_follows_level(void **state)
{
	struct agent_state st = {};
	struct agent_view v = at(CAP / 2);
	unsigned w;

	(void)state;
	assert_int_equal(agent_decide(&st, &v, &w), AGENT_READY);
	assert_int_equal(w, 50);
	v = at(CAP);
	assert_int_equal(agent_decide(&st, &v, &w), AGENT_READY);
	assert_int_equal(w, 100);
	/* Not empty, but under 1%: still a weight, never 0% (HAProxy's drain). */
	v = at(2048);
	assert_int_equal(agent_decide(&st, &v, &w), AGENT_READY);
	assert_int_equal(w, 1);
}

static void empty_drains_until_refilled(void **state)
{
	struct agent_state st = {};
	struct agent_view v = at(100);
	unsigned w;

	(void)state;
	assert_int_equal(agent_decide(&st, &v, &w), AGENT_DRAIN);
	/* Above empty but below the refill mark: the drain holds, so an edge at the brink
	 * does not flap. */
	v = at(CAP / 8);
	assert_int_equal(agent_decide(&st, &v, &w), AGENT_DRAIN);
	assert_int_equal(agent_decide(&st, &v, &w), AGENT_DRAIN);
	v = at(CAP / 4);
	assert_int_equal(agent_decide(&st, &v, &w), AGENT_READY);
	assert_int_equal(w, 25);
	/* Going down again, it stays ready until empty. */
	v = at(CAP / 8);
	assert_int_equal(agent_decide(&st, &v, &w), AGENT_READY);
	v = at(1023);
	assert_int_equal(agent_decide(&st, &v, &w), AGENT_DRAIN);
}

static void admin_drain_and_stop(void **state)
{
	struct agent_state st = {};
	struct agent_view v = at(CAP);
	unsigned w = 7;

	(void)state;
	v.drained = true;
	assert_int_equal(agent_decide(&st, &v, &w), AGENT_DRAIN);
	assert_int_equal(w, 0);
	v.stopping = true;
	assert_int_equal(agent_decide(&st, &v, &w), AGENT_MAINT);
	/* A drain and a stop still move the hysteresis: an empty pool behind them is seen. */
	v = at(0);
	v.stopping = true;
	assert_int_equal(agent_decide(&st, &v, &w), AGENT_MAINT);
	v = at(CAP / 8);
	assert_int_equal(agent_decide(&st, &v, &w), AGENT_DRAIN);
}

static void lines(void **state)
{
	char buf[32];

	(void)state;
	assert_int_equal(agent_format(AGENT_READY, 37, buf, sizeof(buf)), 10);
	assert_string_equal(buf, "37% ready\n");
	assert_int_equal(agent_format(AGENT_DRAIN, 0, buf, sizeof(buf)), 6);
	assert_string_equal(buf, "drain\n");
	assert_int_equal(agent_format(AGENT_MAINT, 0, buf, sizeof(buf)), 6);
	assert_string_equal(buf, "maint\n");
	assert_int_equal(agent_format(AGENT_READY, 100, buf, 11), -ENOBUFS);
	assert_int_equal(agent_format(_AGENT_WORD_MAX, 0, buf, sizeof(buf)), -ENOBUFS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(weight_follows_level),
	    cmocka_unit_test(empty_drains_until_refilled),
	    cmocka_unit_test(admin_drain_and_stop),
	    cmocka_unit_test(lines),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
