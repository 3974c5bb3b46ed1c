/* SPDX-License-Identifier: MIT */
/* The admin's runtime messages: ACTION_REQ and ACTION (drain, disconnect), STATE_REQ and STATE
 * (the drain, the reloads, the upstream), as proto.c's three switches call them. */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "macro.h"
#include "proto-internal.h"

/*
 * Layouts (big-endian; docs/protocol.md 3.14 to 3.17 has the tables):
 *
 *   ACTION_REQ  u8 action, u8 reserved[3], u64 session, text user
 *   ACTION      u8 action, u8 result, u8 reserved[2], u32 sessions, u32 retry_ms, text text
 *   STATE_REQ   (empty)
 *   STATE       u8 flags, u8 upstream, u8 reserved[2], u32 reloads, u32 reload_failures,
 *               u8 reserved[4], u64 config_loaded_ms, u64 last_reload_ms, u64 drained_ms,
 *               u64 upstream_since_ms, u64 upstream_data_ms, text drained_by,
 *               text reload_text, text upstream_broker, text upstream_reason
 */
#define ACTION_REQ_FIXED 14
#define ACTION_FIXED     14
#define STATE_FIXED      56

static bool action_valid(unsigned a)
{
	return a > 0 && a < _EB_ACTION_MAX;
}

static int action_req_validate(const struct eb_msg_action_req *q, size_t *ret_size)
{
	size_t n;
	int r;

	if (!action_valid(q->action))
		return -EINVAL;
	r = eb_proto_text_length(q->user, EB_KIND_MAX, &n);
	if (r < 0)
		return r;
	/* Each action has its one target and no other, so each request has one encoding. */
	switch ((enum eb_action)q->action) {
	case EB_ACTION_DISCONNECT:
		if (q->session == 0 || n != 0)
			return -EINVAL;
		break;
	case EB_ACTION_DISCONNECT_USER:
		if (q->session != 0 || n == 0)
			return -EINVAL;
		break;
	case EB_ACTION_DRAIN:
	case EB_ACTION_UNDRAIN:
		if (q->session != 0 || n != 0)
			return -EINVAL;
		break;
	case _EB_ACTION_MAX:
	case _EB_ACTION_INVALID:
		return -EINVAL;
	}
	*ret_size = ACTION_REQ_FIXED + n;
	return 0;
}

static int action_validate(const struct eb_msg_action *a, size_t *ret_size)
{
	size_t n;
	int r;

	if (!action_valid(a->action) || a->result >= _EB_ACTION_RESULT_MAX ||
	    (a->retry_ms != 0) != (a->result == EB_ACTION_LIMITED))
		return -EINVAL;
	r = eb_proto_text_length(a->text, EB_TEXT_MAX, &n);
	if (r < 0)
		return r;
	*ret_size = ACTION_FIXED + n;
	return 0;
}

static int state_validate(const struct eb_msg_state *st, size_t *ret_size)
{
	const char *texts[] = {st->reload_text, st->upstream_broker, st->upstream_reason};
	bool drained = st->flags & EB_STATE_DRAINED;
	size_t n, size = STATE_FIXED;
	int r;

	if ((st->flags & ~EB_STATE_FLAGS) != 0 || st->upstream >= _EB_UPSTREAM_STATE_MAX ||
	    (st->upstream != EB_UPSTREAM_NONE) != !!(st->flags & EB_STATE_UPSTREAM))
		return -EINVAL;
	r = eb_proto_text_length(st->drained_by, EB_KIND_MAX, &n);
	if (r < 0)
		return r;
	/* A drain always says when and who; no drain says neither. */
	if (drained != (n > 0) || drained != (st->drained_ms != 0))
		return -EINVAL;
	size += 2 + n;
	for (size_t i = 0; i < ELEMENTSOF(texts); i++) {
		r = eb_proto_text_length(texts[i], EB_TEXT_MAX, &n);
		if (r < 0)
			return r;
		size += 2 + n;
	}
	*ret_size = size;
	return 0;
}

int eb_admin_msg_validate(const struct eb_msg *m, size_t *ret_size)
{
	switch (m->type) {
	case EB_MSG_ACTION_REQ:
		return action_req_validate(&m->action_req, ret_size);
	case EB_MSG_ACTION:
		return action_validate(&m->action, ret_size);
	case EB_MSG_STATE_REQ:
		*ret_size = 0;
		return 0;
	case EB_MSG_STATE:
		return state_validate(&m->state, ret_size);
	case EB_MSG_HELLO:
	case EB_MSG_WELCOME:
	case EB_MSG_PUT:
	case EB_MSG_PUT_ACK:
	case EB_MSG_GET:
	case EB_MSG_DATA:
	case EB_MSG_EMPTY:
	case EB_MSG_SLEEP:
	case EB_MSG_WAKE:
	case EB_MSG_QUOTA:
	case EB_MSG_ERROR:
	case EB_MSG_STATUS_REQ:
	case EB_MSG_STATUS:
	case EB_MSG_REPORT_REQ:
	case EB_MSG_REPORT:
	case _EB_MSG_MAX:
	case _EB_MSG_INVALID:
		break;
	}
	return -EINVAL;
}

static int state_decode(struct cursor *c, struct eb_msg_state *st)
{
	int r;

	r = take_u8(c, &st->flags);
	if (r >= 0)
		r = take_u8(c, &st->upstream);
	if (r >= 0)
		r = take_zero(c, 2);
	if (r >= 0)
		r = take_be32(c, &st->reloads);
	if (r >= 0)
		r = take_be32(c, &st->reload_failures);
	if (r >= 0)
		r = take_zero(c, 4);
	if (r >= 0)
		r = take_be64(c, &st->config_loaded_ms);
	if (r >= 0)
		r = take_be64(c, &st->last_reload_ms);
	if (r >= 0)
		r = take_be64(c, &st->drained_ms);
	if (r >= 0)
		r = take_be64(c, &st->upstream_since_ms);
	if (r >= 0)
		r = take_be64(c, &st->upstream_data_ms);
	if (r >= 0)
		r = take_text(c, EB_KIND_MAX, st->drained_by);
	if (r >= 0)
		r = take_text(c, EB_TEXT_MAX, st->reload_text);
	if (r >= 0)
		r = take_text(c, EB_TEXT_MAX, st->upstream_broker);
	if (r >= 0)
		r = take_text(c, EB_TEXT_MAX, st->upstream_reason);
	return r;
}

int eb_admin_msg_decode(struct cursor *c, struct eb_msg *m)
{
	struct eb_msg_action_req *q = &m->action_req;
	struct eb_msg_action *a = &m->action;
	int r;

	switch (m->type) {
	case EB_MSG_ACTION_REQ:
		r = take_u8(c, &q->action);
		if (r >= 0)
			r = take_zero(c, 3);
		if (r >= 0)
			r = take_be64(c, &q->session);
		if (r >= 0)
			r = take_text(c, EB_KIND_MAX, q->user);
		return r;
	case EB_MSG_ACTION:
		r = take_u8(c, &a->action);
		if (r >= 0)
			r = take_u8(c, &a->result);
		if (r >= 0)
			r = take_zero(c, 2);
		if (r >= 0)
			r = take_be32(c, &a->sessions);
		if (r >= 0)
			r = take_be32(c, &a->retry_ms);
		if (r >= 0)
			r = take_text(c, EB_TEXT_MAX, a->text);
		return r;
	case EB_MSG_STATE_REQ:
		return 0;
	case EB_MSG_STATE:
		return state_decode(c, &m->state);
	case EB_MSG_HELLO:
	case EB_MSG_WELCOME:
	case EB_MSG_PUT:
	case EB_MSG_PUT_ACK:
	case EB_MSG_GET:
	case EB_MSG_DATA:
	case EB_MSG_EMPTY:
	case EB_MSG_SLEEP:
	case EB_MSG_WAKE:
	case EB_MSG_QUOTA:
	case EB_MSG_ERROR:
	case EB_MSG_STATUS_REQ:
	case EB_MSG_STATUS:
	case EB_MSG_REPORT_REQ:
	case EB_MSG_REPORT:
	case _EB_MSG_MAX:
	case _EB_MSG_INVALID:
		break;
	}
	return -EBADMSG;
}

static void state_encode(struct writer *w, const struct eb_msg_state *st)
{
	put_u8(w, st->flags);
	put_u8(w, st->upstream);
	put_zero(w, 2);
	put_be32(w, st->reloads);
	put_be32(w, st->reload_failures);
	put_zero(w, 4);
	put_be64(w, st->config_loaded_ms);
	put_be64(w, st->last_reload_ms);
	put_be64(w, st->drained_ms);
	put_be64(w, st->upstream_since_ms);
	put_be64(w, st->upstream_data_ms);
	put_text(w, st->drained_by);
	put_text(w, st->reload_text);
	put_text(w, st->upstream_broker);
	put_text(w, st->upstream_reason);
}

void eb_admin_msg_encode(struct writer *w, const struct eb_msg *m)
{
	switch (m->type) {
	case EB_MSG_ACTION_REQ:
		put_u8(w, m->action_req.action);
		put_zero(w, 3);
		put_be64(w, m->action_req.session);
		put_text(w, m->action_req.user);
		return;
	case EB_MSG_ACTION:
		put_u8(w, m->action.action);
		put_u8(w, m->action.result);
		put_zero(w, 2);
		put_be32(w, m->action.sessions);
		put_be32(w, m->action.retry_ms);
		put_text(w, m->action.text);
		return;
	case EB_MSG_STATE_REQ:
		return;
	case EB_MSG_STATE:
		state_encode(w, &m->state);
		return;
	case EB_MSG_HELLO:
	case EB_MSG_WELCOME:
	case EB_MSG_PUT:
	case EB_MSG_PUT_ACK:
	case EB_MSG_GET:
	case EB_MSG_DATA:
	case EB_MSG_EMPTY:
	case EB_MSG_SLEEP:
	case EB_MSG_WAKE:
	case EB_MSG_QUOTA:
	case EB_MSG_ERROR:
	case EB_MSG_STATUS_REQ:
	case EB_MSG_STATUS:
	case EB_MSG_REPORT_REQ:
	case EB_MSG_REPORT:
	case _EB_MSG_MAX:
	case _EB_MSG_INVALID:
		break;
	}
	assert(!"eb_admin_msg_validate() let another type through");
}

static const char *const action_names[_EB_ACTION_MAX] = {
    [EB_ACTION_DRAIN] = "drain",
    [EB_ACTION_UNDRAIN] = "undrain",
    [EB_ACTION_DISCONNECT] = "disconnect",
    [EB_ACTION_DISCONNECT_USER] = "disconnect-user",
};

EB_DEFINE_STRING_TABLE_LOOKUP(eb_action_to_string, enum eb_action, action_names)

static const char *const result_names[_EB_ACTION_RESULT_MAX] = {
    [EB_ACTION_DONE] = "done",
    [EB_ACTION_UNCHANGED] = "unchanged",
    [EB_ACTION_NOT_FOUND] = "not found",
    [EB_ACTION_LIMITED] = "rate-limited",
};

EB_DEFINE_STRING_TABLE_LOOKUP(eb_action_result_to_string, enum eb_action_result, result_names)

static const char *const upstream_names[_EB_UPSTREAM_STATE_MAX] = {
    [EB_UPSTREAM_NONE] = "none",
    [EB_UPSTREAM_CONNECTING] = "connecting",
    [EB_UPSTREAM_CONNECTED] = "connected",
    [EB_UPSTREAM_FAILING] = "failing",
};

EB_DEFINE_STRING_TABLE_LOOKUP(eb_upstream_state_to_string, enum eb_upstream_state, upstream_names)
