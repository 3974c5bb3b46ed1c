/* SPDX-License-Identifier: MIT */
/* Tests for daemon/registry.c (with the handshake index it owns) alone: entries driven through
 * their states as sessions are, every count checked against a recount at each step; admission at
 * every limit, deciding and changing nothing; the stalled handshake that makes way, and the
 * busiest address's; a failed handshake charged to its address; the lingering past their limit;
 * and a reload's rebind with sessions in every state. No broker, no sockets, no clock: times are
 * given. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "../daemon/registry.h"
#include "macro.h"
#include "proto.h"

#define SEC 1000000ULL
#define T0  (1000 * SEC)

static const struct registry_limits limits = {
    .max_sessions = 4,
    .max_local_sessions = 2,
    .max_handshakes = 3,
    .max_handshakes_per_address = 2,
};

/* For tests about something else than the limits at accept. */
static const struct registry_limits wide = {100, 100, 100, 100};

static struct peer_addr ipv4(uint8_t last)
{
	struct peer_addr a = {.family = AF_INET, .bytes = {192, 0, 2, last}};

	return a;
}

/* Every count, recounted from the entries: what registry_move() keeps must always agree. */
static void check_counts(const struct registry *r)
{
	const struct registry_entry *e;
	unsigned n = 0, local = 0, network = 0, hs = 0, src = 0, snk = 0, closing = 0;
	unsigned users[8] = {0};

	eb_list_foreach(e, &r->sessions, node) {
		assert_int_not_equal(e->state, SESSION_OUTSIDE);
		n++;
		if (e->state == SESSION_CLOSING) {
			closing++;
			continue;
		}
		*(e->local ? &local : &network) += 1;
		hs += e->state == SESSION_HANDSHAKE;
		src += e->state == SESSION_READY && (e->roles & EB_ROLE_SOURCE);
		snk += e->state == SESSION_READY && (e->roles & EB_ROLE_SINK);
		if (e->user >= 0 && e->state != SESSION_HANDSHAKE)
			users[e->user]++;
	}
	assert_int_equal(n, r->n_sessions);
	assert_int_equal(local, r->n_local);
	assert_int_equal(network, r->n_network);
	assert_int_equal(hs, r->n_handshakes);
	assert_int_equal(src, r->n_sources);
	assert_int_equal(snk, r->n_sinks);
	assert_int_equal(closing, r->n_closing);
	for (unsigned u = 0; u < r->n_users; u++)
		assert_int_equal(users[u], r->user_sessions[u]);
}

static void move(struct registry *r, struct registry_entry *e, enum session_state s, uint64_t now)
{
	registry_move(r, e, s, now);
	assert_int_equal(e->state, s);
	check_counts(r);
}

/* A network entry admitted and in HANDSHAKE, or a local one in HELLO. */
static void join_within(struct registry *r, const struct registry_limits *l,
                        struct registry_entry *e, bool local, uint8_t addr, uint64_t now)
{
	struct registry_entry *evict = NULL;
	struct peer_addr a = local ? (struct peer_addr){} : ipv4(addr);

	registry_entry_init(e, local, &a, now);
	assert_null(registry_admit(r, l, e, &evict));
	assert_null(evict);
	move(r, e, local ? SESSION_HELLO : SESSION_HANDSHAKE, now);
}

static void join(struct registry *r, struct registry_entry *e, bool local, uint8_t addr,
                 uint64_t now)
{
	join_within(r, &limits, e, local, addr, now);
}

static void test_states_and_counts(void **state)
{
	struct registry r;
	struct registry_entry e;
	struct peer_addr a = ipv4(1);

	(void)state;
	assert_int_equal(registry_init(&r, 2), 0);
	registry_entry_init(&e, false, &a, T0);
	assert_int_equal(e.state, SESSION_OUTSIDE);
	assert_int_equal(e.user, -1);
	check_counts(&r);
	assert_int_equal(r.n_sessions, 0); /* built, not yet counted */

	move(&r, &e, SESSION_HANDSHAKE, T0);
	assert_int_equal(r.n_sessions, 1);
	assert_int_equal(r.n_network, 1);
	assert_int_equal(r.n_handshakes, 1);
	assert_true(e.hs.addr_counted);
	assert_ptr_equal(handshakes_oldest(&r.handshakes), &e.hs);

	move(&r, &e, SESSION_HELLO, T0);
	assert_true(e.authenticated);
	assert_int_equal(r.n_handshakes, 0);
	assert_int_equal(registry_bind_user(&r, &e, 1, 5), 0);
	assert_int_equal(e.user, 1);
	check_counts(&r);
	assert_int_equal(r.user_sessions[1], 1);

	registry_set_roles(&e, EB_ROLE_SOURCE | EB_ROLE_SINK);
	move(&r, &e, SESSION_READY, T0);
	assert_int_equal(r.n_sources, 1);
	assert_int_equal(r.n_sinks, 1);
	assert_ptr_equal(registry_next_ready(&r, NULL), &e);
	assert_null(registry_next_ready(&r, &e));

	/* Moving to the state it is in changes nothing. */
	move(&r, &e, SESSION_READY, T0);
	assert_int_equal(r.n_sources, 1);

	move(&r, &e, SESSION_CLOSING, T0);
	assert_int_equal(r.n_sessions, 1);
	assert_int_equal(r.n_network, 0); /* a closing session holds no slot */
	assert_int_equal(r.n_closing, 1);
	assert_int_equal(r.n_sources + r.n_sinks + r.user_sessions[1], 0);
	assert_null(registry_next_ready(&r, NULL));

	move(&r, &e, SESSION_OUTSIDE, T0);
	assert_int_equal(r.n_sessions, 0);
	assert_int_equal(r.n_closing, 0);
	registry_done(&r);
}

/* Admission decides and changes nothing: no count moves, no entry leaves. */
static const char *admit(struct registry *r, struct registry_entry *e, bool local, uint8_t addr,
                         uint64_t now, struct registry_entry **ret_evict)
{
	unsigned n = r->n_sessions, hs = r->n_handshakes;
	struct peer_addr a = local ? (struct peer_addr){} : ipv4(addr);
	const char *limit;

	registry_entry_init(e, local, &a, now);
	limit = registry_admit(r, &limits, e, ret_evict);
	assert_int_equal(r->n_sessions, n);
	assert_int_equal(r->n_handshakes, hs);
	assert_int_equal(e->state, SESSION_OUTSIDE);
	check_counts(r);
	return limit;
}

static void test_admission_local(void **state)
{
	struct registry r;
	struct registry_entry e[3], *evict;

	(void)state;
	assert_int_equal(registry_init(&r, 1), 0);
	join(&r, &e[0], true, 0, T0);
	join(&r, &e[1], true, 0, T0);
	assert_string_equal(admit(&r, &e[2], true, 0, T0, &evict), "max-local-sessions");
	assert_null(evict);
	/* Local sessions take no network slot: a network peer still gets in. */
	assert_null(admit(&r, &e[2], false, 9, T0, &evict));
	/* One that ends makes room at once, though it lingers. */
	move(&r, &e[0], SESSION_CLOSING, T0);
	assert_null(admit(&r, &e[2], true, 0, T0, &evict));
	for (unsigned i = 0; i < 2; i++) {
		move(&r, &e[i], SESSION_CLOSING, T0);
		move(&r, &e[i], SESSION_OUTSIDE, T0);
	}
	registry_done(&r);
}

static void test_admission_network(void **state)
{
	struct registry r;
	struct registry_entry e[6], *evict;

	(void)state;
	assert_int_equal(registry_init(&r, 1), 0);
	/* Per address: two handshakes from .1, the third refused, another address admitted. */
	join(&r, &e[0], false, 1, T0);
	join(&r, &e[1], false, 1, T0);
	assert_string_equal(admit(&r, &e[2], false, 1, T0, &evict), "max-handshakes-per-address");
	join(&r, &e[2], false, 2, T0);
	/* Every handshake slot taken, all young: the busiest address (.1, two) makes way for an
	 * address with none, its newest. */
	assert_null(admit(&r, &e[3], false, 3, T0, &evict));
	assert_ptr_equal(evict, &e[1]);
	/* For a newcomer from .2 (which would hold two), .1's two are not more: refused. */
	assert_string_equal(admit(&r, &e[3], false, 2, T0, &evict), "max-handshakes");
	assert_null(evict);

	/* Handshakes done free their handshake slots but keep their session slots: past
	 * max-sessions no network peer gets in. */
	for (unsigned i = 0; i < 3; i++)
		move(&r, &e[i], SESSION_HELLO, T0);
	join(&r, &e[3], false, 4, T0);
	assert_string_equal(admit(&r, &e[4], false, 5, T0, &evict), "max-sessions");
	for (unsigned i = 0; i < 4; i++) {
		move(&r, &e[i], SESSION_CLOSING, T0);
		move(&r, &e[i], SESSION_OUTSIDE, T0);
	}
	registry_done(&r);
}

static void test_evict_oldest_stalled(void **state)
{
	struct registry r;
	struct registry_entry e[4], *evict;

	(void)state;
	assert_int_equal(registry_init(&r, 1), 0);
	join(&r, &e[0], false, 1, T0);
	join(&r, &e[1], false, 2, T0 + SEC / 2);
	join(&r, &e[2], false, 3, T0 + SEC / 2);
	/* Within HANDSHAKE_EVICT_AGE_USEC of the oldest, with one address each: refused. */
	assert_string_equal(admit(&r, &e[3], false, 4, T0 + SEC - 1, &evict), "max-handshakes");
	/* The oldest has stalled that long: it makes way, and is only named, not ended. */
	assert_null(admit(&r, &e[3], false, 4, T0 + HANDSHAKE_EVICT_AGE_USEC, &evict));
	assert_ptr_equal(evict, &e[0]);
	assert_int_equal(e[0].state, SESSION_HANDSHAKE);
	/* The caller ends it; a handshake made to give way failed, and is charged to .1. */
	move(&r, &e[0], SESSION_CLOSING, T0 + SEC);
	move(&r, &e[0], SESSION_OUTSIDE, T0 + SEC);
	join(&r, &e[3], false, 4, T0 + SEC);
	assert_ptr_equal(handshakes_oldest(&r.handshakes), &e[1].hs);
	for (unsigned i = 1; i < 4; i++) {
		move(&r, &e[i], SESSION_CLOSING, T0 + SEC);
		move(&r, &e[i], SESSION_OUTSIDE, T0 + SEC);
	}
	registry_done(&r);
}

/* A handshake that fails is charged to its address for HANDSHAKE_CHARGE_USEC from its accept; one
 * that succeeds is not. */
static void test_failed_handshake_charged(void **state)
{
	struct registry r;
	struct registry_entry e[3], *evict;

	(void)state;
	assert_int_equal(registry_init(&r, 1), 0);
	join(&r, &e[0], false, 1, T0);
	move(&r, &e[0], SESSION_CLOSING, T0 + 1);
	move(&r, &e[0], SESSION_OUTSIDE, T0 + 1);
	join(&r, &e[1], false, 1, T0 + 2);
	assert_string_equal(admit(&r, &e[2], false, 1, T0 + 3, &evict),
	                    "max-handshakes-per-address");
	assert_null(admit(&r, &e[2], false, 1, T0 + HANDSHAKE_CHARGE_USEC, &evict));
	/* e[1] authenticates: its address is charged nothing when it ends. */
	move(&r, &e[1], SESSION_HELLO, T0 + 4);
	move(&r, &e[1], SESSION_CLOSING, T0 + 5);
	move(&r, &e[1], SESSION_OUTSIDE, T0 + 5);
	assert_int_equal(handshakes_from(&r.handshakes, &e[1].hs.addr, T0 + HANDSHAKE_CHARGE_USEC),
	                 0);
	registry_done(&r);
}

/* A peer that rotates its addresses, each handshake failing at once: each address stays charged
 * for a second, but the table keeps at most HANDSHAKE_IDLE_MAX of them, the oldest forgotten. */
static void test_idle_addresses_bounded(void **state)
{
	struct handshakes h = {0};

	(void)state;
	for (unsigned i = 0; i < HANDSHAKE_IDLE_MAX + 500; i++) {
		struct handshake hs = {
		    .addr = {.family = AF_INET,
		             .bytes = {10, (uint8_t)(i >> 16), (uint8_t)(i >> 8), (uint8_t)i}},
		    .accepted_usec = T0};

		handshakes_add(&h, &hs);
		handshakes_remove(&h, &hs, true, T0 + 1);
		assert_true(h.n_idle <= HANDSHAKE_IDLE_MAX + 1);
		assert_true(h.n_addrs <= HANDSHAKE_IDLE_MAX + 1);
	}
	handshakes_free(&h);
}

static void test_user_limit(void **state)
{
	struct registry r;
	struct registry_entry e[3];

	(void)state;
	assert_int_equal(registry_init(&r, 2), 0);
	for (unsigned i = 0; i < 3; i++)
		join_within(&r, &wide, &e[i], true, 0, T0);
	assert_int_equal(registry_bind_user(&r, &e[0], 0, 2), 0);
	assert_int_equal(registry_bind_user(&r, &e[1], 0, 2), 0);
	assert_int_equal(registry_bind_user(&r, &e[2], 0, 2), -EBUSY);
	assert_int_equal(e[2].user, -1);
	check_counts(&r);
	/* A session that ends gives its user's place back. */
	move(&r, &e[0], SESSION_CLOSING, T0);
	assert_int_equal(registry_bind_user(&r, &e[2], 0, 2), 0);
	for (unsigned i = 0; i < 3; i++) {
		move(&r, &e[i], SESSION_CLOSING, T0);
		move(&r, &e[i], SESSION_OUTSIDE, T0);
	}
	registry_done(&r);
}

static void test_lingering_excess(void **state)
{
	struct registry r;
	struct registry_entry e[3];

	(void)state;
	assert_int_equal(registry_init(&r, 1), 0);
	for (unsigned i = 0; i < 3; i++) {
		join(&r, &e[i], true, 0, T0);
		move(&r, &e[i], SESSION_CLOSING, T0);
	}
	assert_null(registry_lingering_excess(&r, 3));
	assert_ptr_equal(registry_lingering_excess(&r, 2), &e[0]);
	move(&r, &e[0], SESSION_OUTSIDE, T0);
	assert_null(registry_lingering_excess(&r, 2));
	assert_ptr_equal(registry_lingering_excess(&r, 1), &e[1]);
	for (unsigned i = 1; i < 3; i++)
		move(&r, &e[i], SESSION_OUTSIDE, T0);
	registry_done(&r);
}

/* The reload: old users a (0), b (1), c (2); the new file drops a, rotates b's key and keeps c,
 * which comes first in it. */
enum { OLD_A, OLD_B, OLD_C };
enum { NEW_C, NEW_B, N_NEW };

struct reload {
	struct registry *r;
	unsigned decided;
	uint64_t now;
};

static int decide(struct registry_entry *e, void *userdata)
{
	struct reload *rl = userdata;

	rl->decided++;
	/* Counted in the old indexes while deciding. */
	if (e->state == SESSION_HANDSHAKE || e->user < 0)
		return -1;
	if (e->user == OLD_C)
		return NEW_C;
	if (e->state != SESSION_CLOSING)
		/* a is gone, and b's key changed: closed, as session_rebind() does. */
		registry_move(rl->r, e, SESSION_CLOSING, rl->now);
	return e->user == OLD_B ? NEW_B : -1;
}

static void test_rebind(void **state)
{
	struct registry r;
	struct registry_entry hs, hello_a, ready_b, ready_c, hello_c, closing_b;
	struct reload rl = {.r = &r, .now = T0};
	unsigned *counts;

	(void)state;
	assert_int_equal(registry_init(&r, 3), 0);
	join_within(&r, &wide, &hs, false, 1, T0);
	join_within(&r, &wide, &hello_a, true, 0, T0);
	assert_int_equal(registry_bind_user(&r, &hello_a, OLD_A, 9), 0);
	join_within(&r, &wide, &ready_b, true, 0, T0);
	assert_int_equal(registry_bind_user(&r, &ready_b, OLD_B, 9), 0);
	registry_set_roles(&ready_b, EB_ROLE_SINK);
	move(&r, &ready_b, SESSION_READY, T0);
	join_within(&r, &wide, &ready_c, true, 0, T0);
	assert_int_equal(registry_bind_user(&r, &ready_c, OLD_C, 9), 0);
	registry_set_roles(&ready_c, EB_ROLE_SOURCE);
	move(&r, &ready_c, SESSION_READY, T0);
	join_within(&r, &wide, &hello_c, false, 2, T0);
	move(&r, &hello_c, SESSION_HELLO, T0);
	assert_int_equal(registry_bind_user(&r, &hello_c, OLD_C, 9), 0);
	join_within(&r, &wide, &closing_b, true, 0, T0);
	assert_int_equal(registry_bind_user(&r, &closing_b, OLD_B, 9), 0);
	move(&r, &closing_b, SESSION_CLOSING, T0);
	assert_int_equal(r.user_sessions[OLD_C], 2);

	counts = calloc(N_NEW, sizeof(*counts));
	assert_non_null(counts);
	assert_int_equal(registry_rebind(&r, counts, N_NEW, decide, &rl), 3);
	assert_int_equal(rl.decided, 6);
	/* One step: the users now index the new file, and so do the counts. */
	assert_int_equal(r.n_users, N_NEW);
	assert_int_equal(r.user_sessions[NEW_C], 2);
	assert_int_equal(r.user_sessions[NEW_B], 0);
	assert_int_equal(ready_c.user, NEW_C);
	assert_int_equal(hello_c.user, NEW_C);
	assert_int_equal(closing_b.user, NEW_B);
	assert_int_equal(hs.user, -1);
	assert_int_equal(hs.state, SESSION_HANDSHAKE); /* carries on */
	assert_int_equal(hello_a.state, SESSION_CLOSING);
	assert_int_equal(ready_b.state, SESSION_CLOSING);
	assert_int_equal(r.n_sinks, 0);
	assert_int_equal(r.n_sources, 1);
	check_counts(&r);

	for (struct registry_entry *e; (e = registry_any(&r));) {
		move(&r, e, SESSION_CLOSING, T0);
		move(&r, e, SESSION_OUTSIDE, T0);
	}
	registry_done(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_states_and_counts),
	    cmocka_unit_test(test_admission_local),
	    cmocka_unit_test(test_admission_network),
	    cmocka_unit_test(test_evict_oldest_stalled),
	    cmocka_unit_test(test_failed_handshake_charged),
	    cmocka_unit_test(test_idle_addresses_bounded),
	    cmocka_unit_test(test_user_limit),
	    cmocka_unit_test(test_lingering_excess),
	    cmocka_unit_test(test_rebind),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
