/* SPDX-License-Identifier: MIT */
/* Tests for shared/srv.c: the SRV answer parser on answers built here byte by byte (RFC 1035's
 * message format, RFC 2782's record), and RFC 2782's order with a seeded random seam: priorities
 * kept, each weight's share of many draws within six standard deviations of its expected share,
 * weight 0 chosen first only when the draw is 0. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "macro.h"
#include "splitmix64.h"
#include "srv.h"

#define QNAME "_entropy-broker._tcp.fleet.test"

struct msg {
	uint8_t b[4096];
	size_t len;
	size_t ancount_at;
};

static void put8(struct msg *m, uint8_t v)
{
	assert_true(m->len < sizeof(m->b));
	m->b[m->len++] = v;
}

static void put16(struct msg *m, uint16_t v)
{
	put8(m, (uint8_t)(v >> 8));
	put8(m, (uint8_t)v);
}

static void put32(struct msg *m, uint32_t v)
{
	put16(m, (uint16_t)(v >> 16));
	put16(m, (uint16_t)v);
}

/* A name as labels; "" is the root. */
static void put_name(struct msg *m, const char *name)
{
	while (*name) {
		size_t len = strcspn(name, ".");

		put8(m, (uint8_t)len);
		for (size_t i = 0; i < len; i++)
			put8(m, (uint8_t)name[i]);
		name += len;
		if (*name == '.')
			name++;
	}
	put8(m, 0);
}

/* A response header and the question for qname. */
static void begin(struct msg *m, const char *qname)
{
	memset(m, 0, sizeof(*m));
	put16(m, 0x1234);
	put16(m, 0x8180); /* response, recursion desired and available, NOERROR */
	put16(m, 1);
	m->ancount_at = m->len;
	put16(m, 0);
	put16(m, 0);
	put16(m, 0);
	put_name(m, qname);
	put16(m, 33); /* SRV */
	put16(m, 1);  /* IN */
}

static void count_answer(struct msg *m)
{
	uint16_t n = (uint16_t)(m->b[m->ancount_at] << 8 | m->b[m->ancount_at + 1]);

	n++;
	m->b[m->ancount_at] = (uint8_t)(n >> 8);
	m->b[m->ancount_at + 1] = (uint8_t)n;
}

/* An SRV answer owned by the question's name (a pointer to offset 12). */
static void add_srv(struct msg *m, uint32_t ttl, uint16_t prio, uint16_t weight, uint16_t port,
                    const char *target)
{
	size_t rdlen_at;

	count_answer(m);
	put16(m, 0xc00c);
	put16(m, 33);
	put16(m, 1);
	put32(m, ttl);
	rdlen_at = m->len;
	put16(m, 0);
	put16(m, prio);
	put16(m, weight);
	put16(m, port);
	put_name(m, target);
	m->b[rdlen_at] = (uint8_t)((m->len - rdlen_at - 2) >> 8);
	m->b[rdlen_at + 1] = (uint8_t)(m->len - rdlen_at - 2);
}

static int parse(const struct msg *m, struct eb_srv_record *recs, size_t *n, uint32_t *ttl)
{
	return eb_srv_parse(m->b, m->len, QNAME, recs, EB_SRV_TARGETS_MAX, n, ttl);
}

static void test_parse(void **state)
{
	struct eb_srv_record recs[EB_SRV_TARGETS_MAX];
	struct msg m;
	uint32_t ttl;
	size_t n;

	(void)state;
	begin(&m, QNAME);
	add_srv(&m, 300, 10, 60, 55225, "b1.fleet.test");
	add_srv(&m, 30, 20, 0, 4000, "B2.Fleet.Test.");
	assert_int_equal(parse(&m, recs, &n, &ttl), 0);
	assert_int_equal(n, 2);
	assert_int_equal(ttl, 30);
	assert_int_equal(recs[0].priority, 10);
	assert_int_equal(recs[0].weight, 60);
	assert_int_equal(recs[0].port, 55225);
	assert_int_equal(recs[0].ttl, 300);
	assert_string_equal(recs[0].target, "b1.fleet.test");
	assert_int_equal(recs[1].port, 4000);
	assert_string_equal(recs[1].target, "B2.Fleet.Test");

	/* The owner name compares without case. */
	begin(&m, "_Entropy-Broker._TCP.FLEET.test");
	add_srv(&m, 5, 0, 0, 1, "b");
	assert_int_equal(parse(&m, recs, &n, &ttl), 0);
	assert_int_equal(n, 1);
}

static void test_parse_skips(void **state)
{
	struct eb_srv_record recs[EB_SRV_TARGETS_MAX];
	struct msg m;
	uint32_t ttl;
	size_t n;

	(void)state;
	/* A CNAME before the SRV record, as a server following one sends it: skipped. */
	begin(&m, QNAME);
	count_answer(&m);
	put16(&m, 0xc00c);
	put16(&m, 5);
	put16(&m, 1);
	put32(&m, 60);
	put16(&m, 2);
	put16(&m, 0xc00c);
	add_srv(&m, 60, 1, 1, 7, "b1.fleet.test");
	assert_int_equal(parse(&m, recs, &n, &ttl), 0);
	assert_int_equal(n, 1);
	assert_string_equal(recs[0].target, "b1.fleet.test");

	/* Records of another name, and of port 0, are no brokers of this name. */
	begin(&m, "_entropy-broker._tcp.other.test");
	add_srv(&m, 60, 1, 1, 7, "b1.other.test");
	assert_int_equal(parse(&m, recs, &n, &ttl), -ENOENT);
	begin(&m, QNAME);
	add_srv(&m, 60, 1, 1, 0, "b1.fleet.test");
	assert_int_equal(parse(&m, recs, &n, &ttl), -ENOENT);

	/* No answer at all; and the target "." (RFC 2782: decidedly not available). */
	begin(&m, QNAME);
	assert_int_equal(parse(&m, recs, &n, &ttl), -ENOENT);
	begin(&m, QNAME);
	add_srv(&m, 60, 0, 0, 0, "");
	assert_int_equal(parse(&m, recs, &n, &ttl), -EHOSTDOWN);
}

static void test_parse_limit(void **state)
{
	struct eb_srv_record recs[EB_SRV_TARGETS_MAX + 1];
	struct msg m;
	uint32_t ttl;
	size_t n;

	(void)state;
	/* More records than a client takes: the first EB_SRV_TARGETS_MAX, the rest left out, and
	 * nothing written past the caller's array. */
	begin(&m, QNAME);
	for (unsigned i = 0; i < EB_SRV_TARGETS_MAX + 20; i++) {
		char t[32];

		snprintf(t, sizeof(t), "b%u.fleet.test", i);
		add_srv(&m, 60 + i, 0, 1, 1000, t);
	}
	memset(&recs[EB_SRV_TARGETS_MAX], 0x5a, sizeof(recs[0]));
	assert_int_equal(eb_srv_parse(m.b, m.len, QNAME, recs, EB_SRV_TARGETS_MAX, &n, &ttl), 0);
	assert_int_equal(n, EB_SRV_TARGETS_MAX);
	assert_string_equal(recs[EB_SRV_TARGETS_MAX - 1].target, "b31.fleet.test");
	assert_int_equal(ttl, 60);
	assert_int_equal(((uint8_t *)&recs[EB_SRV_TARGETS_MAX])[0], 0x5a);
}

static void test_parse_malformed(void **state)
{
	struct eb_srv_record recs[EB_SRV_TARGETS_MAX];
	struct msg m, good;
	uint32_t ttl;
	size_t n;

	(void)state;
	begin(&good, QNAME);
	add_srv(&good, 60, 1, 1, 7, "b1.fleet.test");
	assert_int_equal(parse(&good, recs, &n, &ttl), 0);

	/* Every cut short of the whole message is refused. */
	for (size_t len = 0; len < good.len; len++)
		assert_int_equal(
		    eb_srv_parse(good.b, len, QNAME, recs, EB_SRV_TARGETS_MAX, &n, &ttl), -EBADMSG);
	assert_int_equal(eb_srv_parse(NULL, 0, QNAME, recs, EB_SRV_TARGETS_MAX, &n, &ttl),
	                 -EBADMSG);

	/* rdata too short for priority, weight and port. */
	begin(&m, QNAME);
	count_answer(&m);
	put16(&m, 0xc00c);
	put16(&m, 33);
	put16(&m, 1);
	put32(&m, 60);
	put16(&m, 4);
	put32(&m, 0);
	assert_int_equal(parse(&m, recs, &n, &ttl), -EBADMSG);

	/* rdata longer than its target: bytes left over. */
	m = good;
	{
		/* The rdata is 6 bytes and the 15 of "b1.fleet.test"'s labels. */
		size_t rdlen_at = m.len - (6 + 15) - 2;

		assert_int_equal(m.b[rdlen_at + 1], 6 + 15);
		m.b[rdlen_at + 1] = 6 + 15 - 1;
		assert_int_equal(parse(&m, recs, &n, &ttl), -EBADMSG);
	}

	/* A target that is no host name. */
	begin(&m, QNAME);
	add_srv(&m, 60, 1, 1, 7, "b 1.fleet.test");
	assert_int_equal(parse(&m, recs, &n, &ttl), -EBADMSG);
	begin(&m, QNAME);
	add_srv(&m, 60, 1, 1, 7, "b1/../x");
	assert_int_equal(parse(&m, recs, &n, &ttl), -EBADMSG);

	/* A compression pointer that loops. */
	begin(&m, QNAME);
	count_answer(&m);
	put16(&m, 0xc00c);
	put16(&m, 33);
	put16(&m, 1);
	put32(&m, 60);
	put16(&m, 8);
	put16(&m, 1);
	put16(&m, 1);
	put16(&m, 7);
	put16(&m, (uint16_t)(0xc000 | (m.len)));
	assert_int_equal(parse(&m, recs, &n, &ttl), -EBADMSG);
}

/* The seeded seam: splitmix64, reduced without bias by rejection. */
static uint32_t seeded(uint32_t bound, void *userdata)
{
	uint64_t *state = userdata, n = (uint64_t)bound + 1, limit = UINT64_MAX - UINT64_MAX % n;

	for (;;) {
		uint64_t v = splitmix64(state);

		if (v < limit)
			return (uint32_t)(v % n);
	}
}

static struct eb_srv_record rec(uint16_t prio, uint16_t weight, const char *target)
{
	struct eb_srv_record r = {.priority = prio, .weight = weight, .port = 1, .ttl = 60};

	snprintf(r.target, sizeof(r.target), "%s", target);
	return r;
}

static void test_order_priority(void **state)
{
	uint64_t seed = 1;

	(void)state;
	for (unsigned round = 0; round < 1000; round++) {
		struct eb_srv_record r[] = {
		    rec(30, 5, "c1"), rec(10, 0, "a1"), rec(20, 1, "b1"), rec(10, 100, "a2"),
		    rec(30, 0, "c2"), rec(20, 9, "b2"), rec(10, 3, "a3"), rec(0, 0, "z"),
		};

		eb_srv_order(r, ELEMENTSOF(r), seeded, &seed);
		assert_string_equal(r[0].target, "z");
		for (size_t i = 1; i < 4; i++)
			assert_int_equal(r[i].priority, 10);
		for (size_t i = 4; i < 6; i++)
			assert_int_equal(r[i].priority, 20);
		for (size_t i = 6; i < 8; i++)
			assert_int_equal(r[i].priority, 30);
	}
}

/* Counts which target comes first over many orderings, and checks each count against its
 * expected share within six standard deviations of a binomial. */
static void check_first(struct eb_srv_record *in, size_t n, const double *share, unsigned draws,
                        uint64_t seed)
{
	unsigned first[8] = {0};

	assert_true(n <= ELEMENTSOF(first));
	for (unsigned d = 0; d < draws; d++) {
		struct eb_srv_record r[8];

		memcpy(r, in, n * sizeof(*in));
		eb_srv_order(r, n, seeded, &seed);
		for (size_t i = 0; i < n; i++)
			if (strcmp(r[0].target, in[i].target) == 0)
				first[i]++;
	}
	for (size_t i = 0; i < n; i++) {
		double mean = draws * share[i], sd = sqrt(draws * share[i] * (1 - share[i]));

		if (fabs(first[i] - mean) > 6 * sd + 0.5)
			fail_msg("%s came first %u times in %u, expected %.1f +- %.1f",
			         in[i].target, first[i], draws, mean, 6 * sd);
	}
}

static void test_order_weights(void **state)
{
	const unsigned draws = 101000;

	(void)state;
	/* RFC 2782: a draw from 0..sum picks the first whose running sum reaches it, weight 0
	 * first: chances 1/101, 10/101, 30/101, 60/101. */
	{
		struct eb_srv_record r[] = {rec(5, 60, "w60"), rec(5, 0, "w0"), rec(5, 30, "w30"),
		                            rec(5, 10, "w10")};
		const double share[] = {60.0 / 101, 1.0 / 101, 30.0 / 101, 10.0 / 101};

		check_first(r, ELEMENTSOF(r), share, draws, 42);
	}
	/* All weights 0: uniform. */
	{
		struct eb_srv_record r[] = {rec(0, 0, "a"), rec(0, 0, "b"), rec(0, 0, "c"),
		                            rec(0, 0, "d")};
		const double share[] = {0.25, 0.25, 0.25, 0.25};

		check_first(r, ELEMENTSOF(r), share, draws, 7);
	}
	/* A lower priority number wins whatever the weights. */
	{
		struct eb_srv_record r[] = {rec(1, 65535, "heavy"), rec(0, 0, "light")};
		const double share[] = {0, 1};

		check_first(r, ELEMENTSOF(r), share, 1000, 3);
	}
}

static void test_order_second(void **state)
{
	uint64_t seed = 99;
	unsigned second_w1 = 0, draws = 20000;

	(void)state;
	/* After the first is taken, the draw is over those left. */
	for (unsigned d = 0; d < draws; d++) {
		struct eb_srv_record r[] = {rec(0, 1, "w1"), rec(0, 3, "w3"), rec(0, 65535, "big")};

		eb_srv_order(r, ELEMENTSOF(r), seeded, &seed);
		if (strcmp(r[0].target, "big") == 0 && strcmp(r[1].target, "w1") == 0)
			second_w1++;
	}
	/* big is first with 65535/65540; then a draw from 0..4 over w1 and w3 (running sums 1
	 * and 4) picks w1 for 0 and 1: 2/5. */
	{
		double p = 65535.0 / 65540 * 2.0 / 5, mean = draws * p,
		       sd = sqrt(draws * p * (1 - p));

		assert_true(fabs(second_w1 - mean) <= 6 * sd);
	}
}

static void test_random(void **state)
{
	(void)state;
	for (unsigned i = 0; i < 1000; i++) {
		assert_int_equal(eb_srv_random(0, NULL), 0);
		assert_true(eb_srv_random(1, NULL) <= 1);
		assert_true(eb_srv_random(6, NULL) <= 6);
	}
	(void)eb_srv_random(UINT32_MAX, NULL);
}

static struct eb_srv_record record(uint16_t prio, uint16_t weight, const char *target,
                                   uint16_t port)
{
	struct eb_srv_record r = {.priority = prio, .weight = weight, .port = port, .ttl = 0};

	snprintf(r.target, sizeof(r.target), "%s", target);
	return r;
}

/* An answer's TTL of 0 is used for EB_SRV_TTL_MIN_S, 30 s: a fleet of long-lived clients does
 * not query every few seconds. */
static void test_ttl_floor(void **state)
{
	struct eb_srv_record recs[] = {record(0, 10, "lb.fleet.test", 55225)};
	struct eb_srv *s = NULL;

	(void)state;
	assert_int_equal(eb_srv_new("fleet.test", &s), 0);
	eb_srv_take(s, recs, 1, 0, 1000);
	assert_false(eb_srv_expired(s, 1000 + 29999));
	assert_true(eb_srv_expired(s, 1000 + 30000));
	s = eb_srv_free(s);
}

/* A client on the second target, the first having failed (issue 31, item 7): the same records
 * again, in another order, are no change and no reason to leave, however long it stays; records
 * that changed and put another first are, from a moment drawn over EB_SRV_LEAVE_SPREAD_S; a
 * change that leaves it first is not. */
static void test_follow(void **state)
{
	struct eb_srv_record r1[] = {record(0, 10, "lb.fleet.test", 55225),
	                             record(1, 10, "edge-a.fleet.test", 55225)};
	struct eb_srv_record r1b[] = {record(1, 10, "EDGE-A.fleet.test", 55225),
	                              record(0, 10, "lb.fleet.test", 55225)};
	struct eb_srv_record r2[] = {record(0, 10, "b3.fleet.test", 55225),
	                             record(1, 10, "edge-a.fleet.test", 55225)};
	struct eb_srv_record r3[] = {record(0, 10, "edge-a.fleet.test", 55225)};
	const uint64_t spread = EB_SRV_LEAVE_SPREAD_S * 1000;
	struct eb_srv *s = NULL;

	(void)state;
	assert_int_equal(eb_srv_new("fleet.test", &s), 0);
	eb_srv_take(s, r1, 2, 0, 1000);
	assert_false(eb_srv_should_leave(s, "edge-a.fleet.test", 55225, 1000));
	for (uint64_t t = 31000; t < 1000000; t += 30000) {
		eb_srv_take(s, t % 60000 ? r1b : r1, 2, 0, t);
		assert_false(eb_srv_should_leave(s, "edge-a.fleet.test", 55225, t + spread + 1));
	}

	eb_srv_take(s, r2, 2, 0, 2000000);
	assert_false(eb_srv_should_leave(s, "edge-a.fleet.test", 55225, 2000000));
	assert_true(eb_srv_should_leave(s, "edge-a.fleet.test", 55225, 2000000 + spread + 1));
	/* A pass that chose afresh has followed the change. */
	eb_srv_settled(s);
	assert_false(eb_srv_should_leave(s, "edge-a.fleet.test", 55225, 2000000 + spread + 1));

	eb_srv_take(s, r3, 1, 0, 3000000);
	assert_false(eb_srv_should_leave(s, "edge-a.fleet.test", 55225, 3000000 + spread + 1));
	s = eb_srv_free(s);
}

/* A sink leaving an empty target (issue 26) moves to a peer of its priority, never to a lower
 * priority's fallback, and tries the one it left after its peers and before the fallbacks. */
static void test_leave_peer(void **state)
{
	struct eb_srv_record r[] = {record(10, 10, "edge-a.fleet.test", 55225),
	                            record(10, 10, "edge-b.fleet.test", 55225),
	                            record(20, 10, "site.fleet.test", 55225)};
	struct eb_srv_record alone[] = {record(10, 10, "edge-a.fleet.test", 55225),
	                                record(20, 10, "site.fleet.test", 55225)};
	size_t order[EB_SRV_TARGETS_MAX], n;
	const char *left;
	struct eb_srv *s = NULL;

	(void)state;
	assert_int_equal(eb_srv_new("fleet.test", &s), 0);
	eb_srv_take(s, r, ELEMENTSOF(r), 60, 1000);
	assert_true(eb_srv_has_peer(s, "EDGE-A.fleet.test", 55225));
	assert_true(eb_srv_has_peer(s, "edge-b.fleet.test", 55225));
	assert_false(eb_srv_has_peer(s, "site.fleet.test", 55225));
	assert_false(eb_srv_has_peer(s, "edge-a.fleet.test", 55226));
	assert_false(eb_srv_has_peer(s, "elsewhere.fleet.test", 55225));

	/* RFC 2782's order without a target left; the left one after its peer, before site. */
	n = eb_srv_try_order(s, NULL, 0, order);
	assert_int_equal(n, 3);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(order[i], i);
	left = eb_srv_target(s, 0)->target;
	n = eb_srv_try_order(s, left, 55225, order);
	assert_int_equal(n, 3);
	assert_string_not_equal(eb_srv_target(s, order[0])->target, left);
	assert_string_equal(eb_srv_target(s, order[1])->target, left);
	assert_string_equal(eb_srv_target(s, order[2])->target, "site.fleet.test");
	/* The last of its priority stays where it is. */
	left = eb_srv_target(s, 1)->target;
	n = eb_srv_try_order(s, left, 55225, order);
	assert_int_equal(order[0], 0);
	assert_int_equal(order[1], 1);
	assert_int_equal(order[2], 2);

	eb_srv_take(s, alone, ELEMENTSOF(alone), 60, 2000);
	assert_false(eb_srv_has_peer(s, "edge-a.fleet.test", 55225));
	s = eb_srv_free(s);
}

/* The moment to leave is spread: halfway through the spread, about half a fleet has left. */
static void test_follow_spread(void **state)
{
	struct eb_srv_record r1[] = {record(0, 10, "b1.fleet.test", 55225)};
	struct eb_srv_record r2[] = {record(0, 10, "b2.fleet.test", 55225)};
	const unsigned n = 400;
	unsigned gone = 0;

	(void)state;
	for (unsigned i = 0; i < n; i++) {
		struct eb_srv *s = NULL;

		assert_int_equal(eb_srv_new("fleet.test", &s), 0);
		eb_srv_take(s, r1, 1, 0, 1000);
		eb_srv_take(s, r2, 1, 0, 31000);
		gone += eb_srv_should_leave(s, "b1.fleet.test", 55225,
		                            31000 + EB_SRV_LEAVE_SPREAD_S * 500);
		s = eb_srv_free(s);
	}
	/* Binomial(400, 1/2): a standard deviation of 10. */
	assert_true(gone >= 140 && gone <= 260);
}

static void test_new(void **state)
{
	struct eb_srv *s = NULL;

	(void)state;
	assert_int_equal(eb_srv_new("", &s), -EINVAL);
	assert_int_equal(eb_srv_new("a..b", &s), -EINVAL);
	assert_int_equal(eb_srv_new("a b", &s), -EINVAL);
	assert_int_equal(eb_srv_new("fleet.test.", &s), 0);
	/* Nothing looked up yet: expired, no target. */
	assert_true(eb_srv_expired(s, 0));
	assert_null(eb_srv_target(s, 0));
	assert_false(eb_srv_still_best(s, "b1.fleet.test", 55225));
	s = eb_srv_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse),          cmocka_unit_test(test_parse_skips),
	    cmocka_unit_test(test_parse_limit),    cmocka_unit_test(test_parse_malformed),
	    cmocka_unit_test(test_order_priority), cmocka_unit_test(test_order_weights),
	    cmocka_unit_test(test_order_second),   cmocka_unit_test(test_random),
	    cmocka_unit_test(test_ttl_floor),      cmocka_unit_test(test_follow),
	    cmocka_unit_test(test_follow_spread),  cmocka_unit_test(test_new),
	    cmocka_unit_test(test_leave_peer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
