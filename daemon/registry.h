/* SPDX-License-Identifier: MIT */
/* The broker's sessions as the broker counts them: the list, every count (sessions, local and
 * network slots, handshakes, sources, sinks, each user's), the handshakes indexed by address,
 * which new peer is admitted and which handshake makes way for it. It knows a session's state,
 * roles, user and address, nothing of its connection or frames: session.c embeds a
 * struct registry_entry in each session and moves it from state to state through
 * registry_move(). The functions of registry.c are the only writers of a count
 * (scripts/check-source's registry-write rule refuses a write anywhere else in daemon/). */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "handshakes.h"
#include "list.h"

enum session_state {
	SESSION_OUTSIDE,   /* not in the registry: being built, or being freed */
	SESSION_HANDSHAKE, /* TLS in progress */
	SESSION_HELLO,     /* waiting for HELLO */
	SESSION_READY,
	SESSION_CLOSING, /* flushing a last ERROR, then closed */
	_SESSION_STATE_MAX,
	_SESSION_STATE_INVALID = -EINVAL,
};

/* What the registry keeps of a session. Written by registry.c alone; anyone may read it. */
struct registry_entry {
	enum session_state state;
	int user;       /* index into conf->users, -1 before it is known */
	unsigned roles; /* granted at HELLO: what READY counts it as */
	bool local;     /* plain unix, no TLS: a slot of max-local-sessions, else of max-sessions */
	bool authenticated; /* it left HANDSHAKE for HELLO: an end after that is no failed one */
	struct eb_list_node node;         /* in registry.sessions, unless OUTSIDE */
	struct eb_list_node closing_node; /* in registry.closing while CLOSING */
	struct handshake hs;              /* in registry.handshakes while in HANDSHAKE */
};

/* The limits a new peer meets at accept (the configuration's). */
struct registry_limits {
	unsigned max_sessions;       /* network sessions, handshakes included */
	unsigned max_local_sessions; /* plain unix sessions */
	unsigned max_handshakes;
	unsigned max_handshakes_per_address;
};

/* The loop's alone. Every field is written in registry.c only; others read the counts. */
struct registry {
	struct eb_list sessions; /* of registry_entry.node: every session not OUTSIDE */
	unsigned n_sessions;
	unsigned n_local, n_network; /* slots held: HANDSHAKE, HELLO or READY, plain unix or TLS */
	unsigned n_handshakes;
	unsigned n_sources, n_sinks; /* READY, by the roles granted at HELLO */
	struct eb_list closing;      /* of registry_entry.closing_node, oldest first */
	unsigned n_closing;          /* counted apart from the slots (max-lingering) */
	unsigned *user_sessions;     /* parallel to conf->users: sessions in HELLO or READY */
	unsigned n_users;
	unsigned n_sessions_high; /* the most sessions at once since registry_reset_high() */
	struct handshakes handshakes;
};

/* Room for n_users' counts; -ENOMEM. */
int registry_init(struct registry *r, unsigned n_users);
/* Frees the counts and the index; the sessions must all have left. */
void registry_done(struct registry *r);

/* A new entry, OUTSIDE: a peer from addr (family 0: unknown), accepted at now. */
void registry_entry_init(struct registry_entry *e, bool local, const struct peer_addr *addr,
                         uint64_t now);
/* Moves e to state, and with it every count a state implies: e is a session, a slot, a handshake
 * (indexed by address), one of its user's, a source or a sink, or one of the closing, exactly as
 * its state says. A user's count also moves in registry_bind_user() and registry_rebind(), the
 * high mark in registry_reset_high(). A handshake that ends without HELLO stays charged to its
 * address a while (handshakes.h); now is the loop's clock. Moving to the state e is in does
 * nothing. */
void registry_move(struct registry *r, struct registry_entry *e, enum session_state state,
                   uint64_t now);
/* Before READY: the roles it will be counted as. */
void registry_set_roles(struct registry_entry *e, unsigned roles);
/* Binds e (in HELLO) to user, or returns -EBUSY when user has max_sessions already. */
int registry_bind_user(struct registry *r, struct registry_entry *e, unsigned user,
                       unsigned max_sessions);

/* Admission of a new peer e, built but OUTSIDE, at the time e->hs.accepted_usec. Decides, and
 * frees nothing (the index forgets charges that ran out): returns NULL to admit, or the name of the
 * limit it is refused at. A network peer may be admitted in place of a handshake that must make way
 * (the oldest, if it stalled HANDSHAKE_EVICT_AGE_USEC, else the newest of the address holding the
 * most): *ret_evict names it, and the caller ends it before e joins; else *ret_evict is NULL. */
const char *registry_admit(struct registry *r, const struct registry_limits *l,
                           const struct registry_entry *e, struct registry_entry **ret_evict);
/* A handshake older than this may give its slot to a new one when all are taken: ours finish in
 * milliseconds, so only a peer that stalls on purpose (or a dead one) is that old. */
#define HANDSHAKE_EVICT_AGE_USEC (1000000ULL)

/* The oldest closing session while more than max_lingering linger, else NULL. */
struct registry_entry *registry_lingering_excess(const struct registry *r, unsigned max_lingering);

/* A walk of the READY sessions, the one others get (besides registry_any() at the end and
 * registry_rebind()'s at a reload). Nothing may leave the registry inside the walk. */
struct registry_entry *registry_next_ready(const struct registry *r,
                                           const struct registry_entry *after);
#define registry_foreach_ready(e, r)                                                               \
	for ((e) = registry_next_ready((r), NULL); (e); (e) = registry_next_ready((r), (e)))
/* Any session, for the end of the broker (NULL: none left). */
struct registry_entry *registry_any(const struct registry *r);

/* A reload, in one step: decide(e, userdata) says each session's user in the new configuration
 * (its index, or -1), and may close it (moving it to CLOSING, where it is still counted in the
 * old indexes); then every session's user is that, and each user's sessions are counted afresh in
 * counts (n_users of them, zeroed; taken). Returns how many sessions are CLOSING after it. */
unsigned registry_rebind(struct registry *r, unsigned *counts, unsigned n_users,
                         int (*decide)(struct registry_entry *e, void *userdata), void *userdata);
/* After the heap was trimmed: the high mark starts again from the sessions now. */
void registry_reset_high(struct registry *r);
