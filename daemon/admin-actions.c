/* SPDX-License-Identifier: MIT */
/* What an admin may do at runtime, and the state it reads back. Each action is logged with the
 * admin's user and peer, and every admin's actions together are rate-limited. */
#include "admin-actions.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "conf.h"
#include "log.h"
#include "macro.h"
#include "proto.h"
#include "registry.h"
#include "session.h"
#include "time-util.h"
#include "upstream.h"

/* The journal's line for an action taken (catalog/entropy-broker.catalog). */
#define MSGID_ADMIN_ACTION "40401eb0e42f4a2eb6e079e25c6c8c37"

struct asker {
	const char *user, *peer;
	uint64_t id;
};

_printf_(5, 6) static void answer(struct eb_msg *ret, const struct eb_msg_action_req *q,
                                  enum eb_action_result result, uint32_t sessions, const char *fmt,
                                  ...)
{
	va_list ap;

	*ret = (struct eb_msg){
	    .type = EB_MSG_ACTION,
	    .action = {.action = q->action, .result = (uint8_t)result, .sessions = sessions}};
	va_start(ap, fmt);
	(void)vsnprintf(ret->action.text, sizeof(ret->action.text), fmt, ap);
	va_end(ap);
}

/* One journal line per action taken, with who asked in its own fields. */
static void log_action(const struct asker *a, const struct eb_msg_action_req *q, const char *text)
{
	char fields[256];

	snprintf(fields, sizeof(fields),
	         "MESSAGE_ID=" MSGID_ADMIN_ACTION "\nEB_ACTION=%s\nEB_ADMIN_USER=%s",
	         eb_action_to_string(q->action), a->user);
	log_struct(LOG_NOTICE, fields, "Admin %s (%s): %s", a->user, a->peer, text);
}

static void drain(struct broker *b, const struct asker *a, const struct eb_msg_action_req *q,
                  bool on, struct eb_msg *ret)
{
	if (b->drained == on) {
		if (on)
			answer(ret, q, EB_ACTION_UNCHANGED, 0, "already drained by %s",
			       b->drained_by);
		else
			answer(ret, q, EB_ACTION_UNCHANGED, 0, "not drained");
		return;
	}
	b->drained = on;
	b->drained_ms = on ? eb_wall_ms() : 0;
	snprintf(b->drained_by, sizeof(b->drained_by), "%s", on ? a->user : "");
	if (on)
		answer(ret, q, EB_ACTION_DONE, 0,
		       "drained: the balancers' agent answers \"drain\", sessions carry on");
	else
		answer(ret, q, EB_ACTION_DONE, 0, "undrained: the agent answers by the pool level");
	log_action(a, q, ret->action.text);
	broker_notify_status(b);
}

/* Closes the ready sessions that match (one id, or every session of a user) but the asker's;
 * returns how many. They are gathered first: closing one moves it out of the ready list. */
static int disconnect(struct broker *b, const struct asker *a, uint64_t id, int user, unsigned *ret)
{
	_cleanup_free_ struct session **v = NULL;
	const struct registry_entry *e;
	unsigned n = 0;

	v = malloc(MAX(b->registry.n_sessions, 1u) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	registry_foreach_ready(e, &b->registry) {
		struct session *s = session_of(e);

		if (s->id == a->id || n >= b->registry.n_sessions)
			continue;
		if (id ? s->id == id : e->user == user)
			v[n++] = s;
	}
	for (unsigned i = 0; i < n; i++)
		session_disconnect(v[i], "disconnected by an admin");
	*ret = n;
	return 0;
}

static void disconnect_action(struct broker *b, const struct asker *a,
                              const struct eb_msg_action_req *q, struct eb_msg *ret)
{
	const struct eb_user *u = NULL;
	unsigned n = 0;
	int r;

	if (q->action == EB_ACTION_DISCONNECT && q->session == a->id) {
		answer(ret, q, EB_ACTION_UNCHANGED, 0,
		       "session %" PRIu64 " is this one: leave to close it", q->session);
		return;
	}
	if (q->action == EB_ACTION_DISCONNECT_USER) {
		u = eb_conf_find_user(b->conf, q->user);
		if (!u) {
			answer(ret, q, EB_ACTION_NOT_FOUND, 0, "no user %s in the configuration",
			       q->user);
			return;
		}
	}
	r = disconnect(b, a, q->session, u ? (int)(u - b->conf->users) : -1, &n);
	if (r < 0) {
		log_oom();
		answer(ret, q, EB_ACTION_NOT_FOUND, 0, "out of memory");
		return;
	}
	if (n == 0) {
		if (u)
			answer(ret, q, EB_ACTION_NOT_FOUND, 0, "user %s has no other session",
			       q->user);
		else
			answer(ret, q, EB_ACTION_NOT_FOUND, 0, "no session %" PRIu64, q->session);
		return;
	}
	if (u)
		answer(ret, q, EB_ACTION_DONE, n, "disconnected %u session%s of user %s", n,
		       n == 1 ? "" : "s", q->user);
	else
		answer(ret, q, EB_ACTION_DONE, n, "disconnected session %" PRIu64, q->session);
	log_action(a, q, ret->action.text);
}

void admin_action(struct broker *b, struct registry_entry *asker, const struct eb_msg_action_req *q,
                  struct eb_msg *ret)
{
	struct session *s = session_of(asker);
	const struct asker a = {b->conf->users[asker->user].name, s->peer, s->id};
	uint64_t now = broker_now(b);
	unsigned held = 0;

	if (!eb_ratelimit_below(&b->actions, now, &held)) {
		uint64_t end = b->actions.begin_usec + b->actions.interval_usec;

		answer(ret, q, EB_ACTION_LIMITED, 0,
		       "more than %u actions in %llu s: try again later", ADMIN_ACTIONS_BURST,
		       (unsigned long long)(ADMIN_ACTIONS_INTERVAL_USEC / 1000000));
		ret->action.retry_ms = (uint32_t)MAX((end > now ? end - now : 0) / 1000, 1u);
		log_peer(b, PEER_LOG_REFUSED, LOG_WARNING, "Admin %s (%s): %s refused, %s", a.user,
		         a.peer, eb_action_to_string(q->action), ret->action.text);
		return;
	}
	switch ((enum eb_action)q->action) {
	case EB_ACTION_DRAIN:
	case EB_ACTION_UNDRAIN:
		drain(b, &a, q, q->action == EB_ACTION_DRAIN, ret);
		return;
	case EB_ACTION_DISCONNECT:
	case EB_ACTION_DISCONNECT_USER:
		disconnect_action(b, &a, q, ret);
		return;
	case _EB_ACTION_MAX:
	case _EB_ACTION_INVALID:
		break;
	}
	/* The codec refuses any other action. */
	answer(ret, q, EB_ACTION_NOT_FOUND, 0, "unknown action");
}

/* Texts that come from elsewhere (a configuration's error, a resolver's words, a path) go out as
 * printable ASCII, "?" for anything else, so that no cut inside a UTF-8 sequence or a newline
 * makes the message one the codec refuses. */
static void copy_printable(char *dst, size_t size, const char *src)
{
	size_t i;

	for (i = 0; i + 1 < size && src[i]; i++)
		dst[i] = src[i] >= 0x20 && src[i] < 0x7f ? src[i] : '?';
	dst[i] = '\0';
}

static void upstream_state(struct broker *b, struct eb_msg_state *st)
{
	struct upstream_view v;

	if (!b->upstream)
		return;
	upstream_get_view(b->upstream, &v);
	st->flags |= EB_STATE_UPSTREAM;
	st->upstream = (uint8_t)v.state;
	st->upstream_since_ms = v.since_ms;
	st->upstream_data_ms = v.data_ms;
	copy_printable(st->upstream_broker, sizeof(st->upstream_broker), v.broker);
	if (v.state == EB_UPSTREAM_FAILING)
		copy_printable(st->upstream_reason, sizeof(st->upstream_reason), v.reason);
}

void admin_state(struct broker *b, struct eb_msg *ret)
{
	struct eb_msg_state *st;

	*ret = (struct eb_msg){.type = EB_MSG_STATE};
	st = &ret->state;
	*st = (struct eb_msg_state){
	    .reloads = b->reloads,
	    .reload_failures = b->reload_failures,
	    .config_loaded_ms = b->config_loaded_ms,
	    .last_reload_ms = b->last_reload_ms,
	};
	if (b->drained) {
		st->flags |= EB_STATE_DRAINED;
		st->drained_ms = b->drained_ms;
		snprintf(st->drained_by, sizeof(st->drained_by), "%s", b->drained_by);
	}
	if (b->stopping)
		st->flags |= EB_STATE_STOPPING;
	if (b->reload_error)
		st->flags |= EB_STATE_RELOAD_FAILED;
	copy_printable(st->reload_text, sizeof(st->reload_text), b->reload_text);
	upstream_state(b, st);
}
