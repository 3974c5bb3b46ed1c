/* SPDX-License-Identifier: MIT */
#include "registry.h"

#include <assert.h>
#include <stdlib.h>

#include "macro.h"
#include "proto.h"

int registry_init(struct registry *r, unsigned n_users)
{
	*r = (struct registry){};
	r->user_sessions = calloc(MAX(n_users, 1u), sizeof(*r->user_sessions));
	if (!r->user_sessions)
		return -ENOMEM;
	r->n_users = n_users;
	return 0;
}

void registry_done(struct registry *r)
{
	assert(r->n_sessions == 0);
	free(r->user_sessions);
	handshakes_free(&r->handshakes);
	*r = (struct registry){};
}

void registry_entry_init(struct registry_entry *e, bool local, const struct peer_addr *addr,
                         uint64_t now)
{
	*e = (struct registry_entry){
	    .state = SESSION_OUTSIDE,
	    .user = -1,
	    .local = local,
	    .hs = {.addr = *addr, .accepted_usec = now},
	};
}

static void count_user(struct registry *r, const struct registry_entry *e, int delta)
{
	if (e->user < 0 || (unsigned)e->user >= r->n_users)
		return;
	assert(delta > 0 || r->user_sessions[e->user] > 0);
	r->user_sessions[e->user] += (unsigned)delta;
}

/* What e's state makes it, counted in (+1) or out (-1). The only place a count changes. */
static void count(struct registry *r, struct registry_entry *e, int delta, uint64_t now)
{
	unsigned *slots = e->local ? &r->n_local : &r->n_network;

	switch (e->state) {
	case SESSION_OUTSIDE:
		return;
	case SESSION_HANDSHAKE:
		r->n_handshakes += (unsigned)delta;
		if (delta > 0)
			handshakes_add(&r->handshakes, &e->hs);
		else
			handshakes_remove(&r->handshakes, &e->hs, !e->authenticated, now);
		break;
	case SESSION_HELLO:
		count_user(r, e, delta);
		break;
	case SESSION_READY:
		if (e->roles & EB_ROLE_SOURCE)
			r->n_sources += (unsigned)delta;
		if (e->roles & EB_ROLE_SINK)
			r->n_sinks += (unsigned)delta;
		count_user(r, e, delta);
		break;
	case SESSION_CLOSING:
		if (delta > 0)
			eb_list_append(&r->closing, &e->closing_node);
		else
			eb_list_remove(&r->closing, &e->closing_node);
		r->n_closing += (unsigned)delta;
		return; /* no slot: refused peers that hold their connections take none */
	case _SESSION_STATE_MAX:
	case _SESSION_STATE_INVALID:
		assert(!"no such state");
		return;
	}
	*slots += (unsigned)delta;
}

void registry_move(struct registry *r, struct registry_entry *e, enum session_state state,
                   uint64_t now)
{
	enum session_state from = e->state;

	if (from == state)
		return;
	/* CLOSING and OUTSIDE are the end: nothing comes back from them. */
	assert(from != SESSION_CLOSING || state == SESSION_OUTSIDE);
	if (from == SESSION_HANDSHAKE && state == SESSION_HELLO)
		e->authenticated = true;
	count(r, e, -1, now);
	e->state = state;
	count(r, e, +1, now);
	if (from == SESSION_OUTSIDE) {
		eb_list_prepend(&r->sessions, &e->node);
		r->n_sessions++;
		r->n_sessions_high = MAX(r->n_sessions_high, r->n_sessions);
	} else if (state == SESSION_OUTSIDE) {
		eb_list_remove(&r->sessions, &e->node);
		r->n_sessions--;
	}
}

void registry_set_roles(struct registry_entry *e, unsigned roles)
{
	assert(e->state != SESSION_READY);
	e->roles = roles;
}

int registry_bind_user(struct registry *r, struct registry_entry *e, unsigned user,
                       unsigned max_sessions)
{
	assert(e->state == SESSION_HELLO && e->user < 0 && user < r->n_users);
	if (r->user_sessions[user] >= max_sessions)
		return -EBUSY;
	e->user = (int)user;
	count_user(r, e, +1);
	return 0;
}

static struct registry_entry *entry_of(struct handshake *hs)
{
	return hs ? (struct registry_entry *)((char *)hs - offsetof(struct registry_entry, hs))
	          : NULL;
}

/* An unauthenticated peer can fill neither the network's session slots (its handshakes are capped
 * apart, in total and per address) nor the local socket's (counted apart), and the oldest stalled
 * handshake makes way for a new one. */
const char *registry_admit(struct registry *r, const struct registry_limits *l,
                           const struct registry_entry *e, struct registry_entry **ret_evict)
{
	struct handshake *oldest;
	unsigned mine;

	assert(e->state == SESSION_OUTSIDE);
	*ret_evict = NULL;
	if (e->local)
		return r->n_local >= l->max_local_sessions ? "max-local-sessions" : NULL;
	if (r->n_network >= l->max_sessions)
		return "max-sessions";
	mine = handshakes_from(&r->handshakes, &e->hs.addr, e->hs.accepted_usec);
	if (mine >= l->max_handshakes_per_address)
		return "max-handshakes-per-address";
	if (r->n_handshakes < l->max_handshakes)
		return NULL;
	oldest = handshakes_oldest(&r->handshakes);
	if (oldest && oldest->accepted_usec + HANDSHAKE_EVICT_AGE_USEC <= e->hs.accepted_usec) {
		*ret_evict = entry_of(oldest);
		return NULL;
	}
	/* All young: the address holding the most makes way, if it holds more than the
	 * newcomer's would with it, so that a few addresses churning connections cannot keep
	 * every other address out: the slots end up shared between addresses. */
	*ret_evict = entry_of(handshakes_busiest(&r->handshakes, mine + 1));
	return *ret_evict ? NULL : "max-handshakes";
}

struct registry_entry *registry_lingering_excess(const struct registry *r, unsigned max_lingering)
{
	if (r->n_closing <= max_lingering)
		return NULL;
	return eb_list_first(&r->closing, struct registry_entry, closing_node);
}

struct registry_entry *registry_next_ready(const struct registry *r,
                                           const struct registry_entry *after)
{
	struct eb_list_node *n = after ? after->node.next : r->sessions.first;

	for (; n; n = n->next) {
		struct registry_entry *e = eb_list_entry(n, struct registry_entry, node);

		if (e->state == SESSION_READY)
			return e;
	}
	return NULL;
}

struct registry_entry *registry_any(const struct registry *r)
{
	return r->sessions.first ? eb_list_entry(r->sessions.first, struct registry_entry, node)
	                         : NULL;
}

unsigned registry_rebind(struct registry *r, unsigned *counts, unsigned n_users,
                         int (*decide)(struct registry_entry *e, void *userdata), void *userdata)
{
	struct registry_entry *e;
	unsigned closing = 0;

	/* Decided in the old indexes: a session closed here is counted out of its old user. */
	eb_list_foreach(e, &r->sessions, node) {
		int user = decide(e, userdata);

		assert(user < (int)n_users);
		e->user = user;
		closing += e->state == SESSION_CLOSING;
		if (user >= 0 && (e->state == SESSION_HELLO || e->state == SESSION_READY))
			counts[user]++;
	}
	free(r->user_sessions);
	r->user_sessions = counts;
	r->n_users = n_users;
	return closing;
}

void registry_reset_high(struct registry *r)
{
	r->n_sessions_high = r->n_sessions;
}
