/* SPDX-License-Identifier: MIT */
/* The counters table of the admin's report: what the broker refused, and its sessions against
 * their limits, as rows of an id and a value. */
#include <assert.h>
#include <errno.h>
#include <stdint.h>

#include "macro.h"
#include "proto-internal.h"
#include "report.h"

int eb_report_counter_encode(const struct eb_report_counter *row, uint8_t *buf, size_t size)
{
	struct writer w;

	assert(row);
	assert(buf || size == 0);

	if (row->id == 0)
		return -EINVAL;
	if (size < EB_REPORT_COUNTER_ROW)
		return -ENOBUFS;
	w = (struct writer){buf, EB_REPORT_COUNTER_ROW};
	put_be64(&w, row->id);
	put_be64(&w, row->value);
	assert(w.left == 0);
	return EB_REPORT_COUNTER_ROW;
}

/* An id this client does not know is a well-formed row all the same: a newer broker counts more,
 * and the client shows what it knows. */
int eb_report_counter_take(struct cursor *c, struct eb_report_counter *ret)
{
	struct eb_report_counter row;
	int r;

	r = take_be64(c, &row.id);
	if (r >= 0)
		r = take_be64(c, &row.value);
	if (r < 0)
		return r;
	if (row.id == 0)
		return -EBADMSG;
	*ret = row;
	return 0;
}

int eb_report_next_counter(struct eb_report_rows *it, struct eb_report_counter *ret)
{
	struct cursor c = {it->p, it->left};
	int r;

	if (it->left == 0)
		return 0;
	r = eb_report_counter_take(&c, ret);
	if (r < 0)
		return -EBADMSG;
	*it = (struct eb_report_rows){c.p, c.left, it->version};
	return 1;
}

static const char *const counter_names[_EB_COUNTER_MAX] = {
    [EB_COUNTER_LIMIT_MAX_SESSIONS] = "limit-max-sessions",
    [EB_COUNTER_LIMIT_MAX_LOCAL_SESSIONS] = "limit-max-local-sessions",
    [EB_COUNTER_LIMIT_MAX_HANDSHAKES] = "limit-max-handshakes",
    [EB_COUNTER_LIMIT_MAX_HANDSHAKES_PER_ADDRESS] = "limit-max-handshakes-per-address",
    [EB_COUNTER_LIMIT_USER_MAX_SESSIONS] = "limit-user-max-sessions",
    [EB_COUNTER_AUTH_UNKNOWN_USER] = "auth-unknown-user",
    [EB_COUNTER_AUTH_WRONG_KEY] = "auth-wrong-key",
    [EB_COUNTER_AUTH_UNMAPPED_PEER] = "auth-unmapped-peer",
    [EB_COUNTER_AUTH_OTHER] = "auth-other",
    [EB_COUNTER_TLS_FAILED] = "tls-failed",
    [EB_COUNTER_PROXY_BAD_HEADER] = "proxy-bad-header",
    [EB_COUNTER_PROXY_NOT_ALLOWED] = "proxy-not-allowed",
    [EB_COUNTER_REFUSED_REQUEST] = "refused-request",
    [EB_COUNTER_CLONES] = "clones",
    [EB_COUNTER_NETWORK_SESSIONS] = "network-sessions",
    [EB_COUNTER_LOCAL_SESSIONS] = "local-sessions",
    [EB_COUNTER_HANDSHAKES] = "handshakes",
    [EB_COUNTER_MAX_SESSIONS] = "max-sessions",
    [EB_COUNTER_MAX_LOCAL_SESSIONS] = "max-local-sessions",
    [EB_COUNTER_MAX_HANDSHAKES] = "max-handshakes",
    [EB_COUNTER_BROKER_ID] = "broker-id",
};

EB_DEFINE_STRING_TABLE_LOOKUP(eb_counter_to_string, enum eb_counter, counter_names)
