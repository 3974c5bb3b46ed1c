/* SPDX-License-Identifier: MIT */
/* What session.c, session-io.c, session-auth.c, session-dispatch.c and session-clones.c share;
 * nothing outside a session uses it. */
#pragma once

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "broker.h"
#include "conf.h"
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

/* session.c: state, and the handshake on a worker. */
/* Every change of state goes through here, so that the broker's counts (registry_move()) and
 * status follow. */
void session_set_state(struct session *s, enum session_state state);
/* A last ERROR, then CLOSING: a waiting GET is withdrawn, the pump flushes and lingers. */
void session_refuse(struct session *s, enum eb_error_code code, const char *text);
/* Hands the handshake's next step to a worker (broker->workers); the session is the worker's
 * until the step comes back, and then pumped or settled. */
void session_offload_handshake(struct session *s);

/* session-io.c: the buffers and the pump. */
bool session_has_room(const struct session *s, size_t bytes);
/* Buffers a frame; the caller checked session_has_room(). */
int session_send(struct session *s, const struct eb_msg *m);
void session_send_retry(struct session *s, enum eb_msg_type type, uint32_t ms);
/* After every step, the session brought to rest: the io events its state asks for, buffers
 * emptied given back, a come-back (the defer source) for bytes TLS or the read buffer already
 * hold, and the frame timer. Not while a worker holds the session. */
void session_settle(struct session *s);
void session_pump(struct session *s);

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
