/* SPDX-License-Identifier: MIT */
/* What session.c, session-io.c, session-auth.c, session-dispatch.c, session-clones.c and
 * session-poll.c share; nothing outside a session uses it.
 *
 * The settle rule. A session's socket is edge-triggered (EPOLLET): epoll says it is ready once,
 * when it becomes so, and a session whose io events, come-back and frame timer were not
 * brought up to date after a change waits for an edge that never comes. So every entry point of
 * the module leaves each session it changed in one of these ends:
 *   session_settle()             its events, buffers, come-back and frame timer brought to rest;
 *   session_pump()               which ends in one of the others;
 *   session_free()               gone;
 *   session_come_back()          on the come-back list: the pump runs in the next iteration;
 *   session_offload_handshake()  a worker has it, and handshake_done() pumps or settles it.
 * The entry points: on_poll() and on_comeback() (session-poll.c), on_timer() and
 * on_frame_timer() (sd-event), handshake_done() (a worker's step back on the loop),
 * session_new() and session_new_proxied()
 * (accept), answer_get() and session_tell_asleep() (the broker's run source, through a GET's
 * answer pointer and hooks.set_asleep), session_rebind() (a reload) and session_disconnect() (an
 * admin). One that changed nothing may return as it is (on_timer() for a READY session does);
 * session_goodbye(), after the loop has ended, writes its last word itself and is settled by the
 * session_free() that follows.
 *
 * Builds with assertions check it: session_send() and session_set_state() mark a session changed
 * (session_mark()), the ends above clear the mark, and SESSION_ENTRY() at the top of every entry
 * point asserts, when the outermost one returns, that no session is left marked; a callback of
 * these files handed to sd-event, or stored as a step's done or a GET's answer, that does not open
 * with SESSION_ENTRY() is refused by scripts/check-source (session-entry). */
#pragma once

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "broker.h"
#include "conf.h"
#include "macro.h"
#include "proto.h"
#include "session.h"

/* Only for sessions past authentication: every state from SESSION_HELLO on has a user. */
static inline const struct eb_user *session_user(const struct session *s)
{
	assert(s->reg.user >= 0);
	return &s->broker->conf->users[s->reg.user];
}

static inline const char *session_user_name(const struct session *s)
{
	return s->reg.user >= 0 ? s->broker->conf->users[s->reg.user].name : "(unauthenticated)";
}

/* session.c: the settle rule's bookkeeping (above), in builds with assertions. */
#ifndef NDEBUG
/* s changed: it must reach one of the rule's ends before the entry point returns. */
void session_mark(struct session *s);
/* s reached one of the ends. */
void session_unmark(struct session *s);
unsigned session_enter(void);
void session_leave(const unsigned *depth);
#define SESSION_ENTRY()                                                                            \
	_cleanup_(session_leave) _unused_ const unsigned session_entry_ = session_enter()
#else
static inline void session_mark(struct session *s)
{
	(void)s;
}
static inline void session_unmark(struct session *s)
{
	(void)s;
}
#define SESSION_ENTRY() ((void)0)
#endif

/* session.c: state, and the handshake on a worker. */
/* Every change of state goes through here, so that the broker's counts (registry_move()) and
 * status follow. */
void session_set_state(struct session *s, enum session_state state);
/* A last ERROR, then CLOSING: a waiting GET is withdrawn, the pump flushes and lingers. */
void session_refuse(struct session *s, enum eb_error_code code, const char *text);
/* The pump runs for s in the next loop iteration (the come-back list, session-poll.c): how a
 * change made outside s's own turn ends (answer_get(), session_tell_asleep()), and how the pump
 * comes back for bytes TLS or rbuf already hold. */
void session_come_back(struct session *s);
/* Hands the handshake's next step to a worker (broker->workers); the session is the worker's
 * until the step comes back, and then pumped or settled. */
void session_offload_handshake(struct session *s);

/* session-io.c: the buffers and the pump. */
bool session_has_room(const struct session *s, size_t bytes);
/* Buffers a frame; the caller checked session_has_room(). */
int session_send(struct session *s, const struct eb_msg *m);
void session_send_retry(struct session *s, enum eb_msg_type type, uint32_t ms);
/* After every step, the session brought to rest: the io events its state asks for, buffers
 * emptied given back, a come-back (the come-back list) for bytes TLS or the read buffer already
 * hold, and the frame timer. Not while a worker holds the session. */
void session_settle(struct session *s);
void session_pump(struct session *s);

/* session-poll.c: the broker's one epoll set of the sessions' sockets and its come-back list. */
/* The socket joins the set watching events (EPOLLET and the rest), and leaves it: before its fd
 * closes, and off the come-back list too. */
int session_poll_add(struct session *s, uint32_t events);
void session_poll_remove(struct session *s);
/* What the socket is watched for, when it changed. */
void session_poll_set(struct session *s, uint32_t events);
/* Takes session_come_back() back (declared above; session-poll.c's too). */
void session_stay(struct session *s);
/* A session's memory, freed during a batch, is kept until its end (true: it is on the
 * graveyard, marked dead); false: free it now. */
bool session_poll_bury(struct session *s);
/* session.c: the socket is ready. */
void session_on_io(struct session *s);

/* session-auth.c: who the peer is, and the limits it meets. */
/* Names the peer in s->peer, and its address for the per-address limits in *ret_addr (family 0
 * when it has none). */
void session_describe_peer(struct session *s, int fd, const struct sockaddr *peer,
                           socklen_t peer_len, const char *listener, struct peer_addr *ret_addr);
/* The same for a client a load balancer's PROXY header named (NULL: a LOCAL header, the balancer
 * speaking for itself); both addresses are AF_INET or AF_INET6. */
void session_describe_proxied(struct session *s, const struct sockaddr_storage *client,
                              const struct sockaddr_storage *balancer, const char *listener,
                              struct peer_addr *ret_addr);
/* Maps a plain unix peer to its user by SO_PEERCRED: -EACCES for nobody, -EBUSY at the user's
 * max-sessions. */
int session_identify_unix(struct session *s);
void session_refuse_identity(struct session *s, int r);
/* Drives the TLS handshake; once done, binds the user its PSK identity names. A negative errno
 * ends the session. */
int session_handshake(struct session *s);
/* The same, for a step already taken (on a worker): r is what eb_conn_handshake() returned. */
int session_handshake_result(struct session *s, int r);

/* session-clones.c: a guest's copies. At each GET: the session draws, and another session of its
 * guest user and key that draws too makes both clones (counted, marked, logged once). */
void session_clones_draw(struct session *s);
/* s leaves READY: its key's slot forgets it. */
void session_clones_leave(struct session *s);

/* session-dispatch.c: what a frame means. */
void session_handle_frame(struct session *s, const struct eb_frame *f);
