/* SPDX-License-Identifier: MIT */
/* A connected broker client's messages: PUT and its ACKs, GET and its answers, SLEEP and WAKE,
 * STATUS and REPORT, each within its timeout. Making and connecting the client is
 * client-connect.c's. */
#include "client.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "backoff.h"
#include "client-internal.h"
#include "conn.h"
#include "macro.h"
#include "report.h"
#include "sigpipe.h"
#include "time-util.h"

/* SLEEP and WAKE frames taken while waiting for one answer (or while asleep) before the broker is
 * judged to flood: a broker sends one at a threshold, and one more at the other. */
#define UNASKED_MAX 16
/* How long a DATA of 0 bytes is taken to ask a sink to wait, as an EMPTY would: the protocol
 * allows it, but asking again at once would spin against a broker that sends nothing else. */
#define ZERO_DATA_RETRY_MS 1000
/* The longest SLEEP honoured; the protocol leaves clamping retry_ms to the client. */
#define SLEEP_MAX_MS (10 * 60 * 1000)

void eb_client_disconnect(struct eb_client *c)
{
	struct eb_sigpipe_guard g;

	if (!c->conn)
		return;
	eb_sigpipe_block(&g);
	eb_conn_shutdown(c->conn);
	eb_sigpipe_restore(&g);
	c->conn = eb_conn_free(c->conn);
	c->puts_in_flight = c->gets_in_flight = 0;
	c->asleep = false;
	c->ended = false;
	c->unserved_end = !c->served;
	if (c->served)
		eb_backoff_reset(&c->backoff);
	c->served = false;
}

/* What a wait of timeout_ms may last, given the caller's deadline (eb_client_set_deadline()) and
 * that of eb_client_connect_retry(): at least 1 ms, so that a deadline passed is -ETIMEDOUT. */
int client_bounded(const struct eb_client *c, int timeout_ms)
{
	uint64_t now = eb_now_ms(), t = (uint64_t)MAX(timeout_ms, 1);

	if (c->deadline_ms)
		t = MIN(t, c->deadline_ms > now ? c->deadline_ms - now : 1);
	if (c->connect_deadline_ms)
		t = MIN(t, c->connect_deadline_ms > now ? c->connect_deadline_ms - now : 1);
	return (int)t;
}

bool eb_client_connected(const struct eb_client *c)
{
	return c->conn != NULL;
}

int eb_client_fd(const struct eb_client *c)
{
	return c->conn ? eb_conn_fd(c->conn) : -EBADF;
}

int client_fail(struct eb_client *c, int r, const char *what)
{
	snprintf(c->last_error, sizeof(c->last_error), "%s", what ? what : strerror(-r));
	eb_client_disconnect(c);
	return r;
}

int client_send(struct eb_client *c, const struct eb_msg *m)
{
	struct eb_sigpipe_guard g;
	int n, r;

	n = eb_msg_encode(m, c->buf, sizeof(c->buf));
	if (n < 0)
		return n;
	eb_sigpipe_block(&g);
	r = eb_conn_write_full(c->conn, c->buf, (size_t)n, client_bounded(c, c->timeout_ms));
	eb_sigpipe_restore(&g);
	if (m->type == EB_MSG_PUT)
		explicit_bzero(c->buf, (size_t)n);
	if (r < 0)
		return client_fail(c, r, NULL);
	return 0;
}

/* The errno a caller can act on for each ERROR code; the rest (PROTOCOL, INTERNAL) are -EPROTO. */
static const int error_errno[_EB_ERR_MAX] = {
    [EB_ERR_AUTH] = -EACCES,
    [EB_ERR_FORBIDDEN] = -EACCES,
    [EB_ERR_VERSION] = -EPROTONOSUPPORT,
    [EB_ERR_TOO_LARGE] = -EMSGSIZE,
    [EB_ERR_SHUTDOWN] = -ESHUTDOWN,
    [EB_ERR_BUSY] = -EBUSY,
};

static int broker_error(struct eb_client *c, const struct eb_msg_error *e)
{
	int r = e->code > 0 && e->code < _EB_ERR_MAX ? error_errno[e->code] : 0;

	/* Cut short if it must be: the broker's name and text can fill it alone. */
	if (snprintf(c->last_error, sizeof(c->last_error), "broker %s: %s (%s)", c->current_text,
	             e->text, eb_error_code_to_string(e->code)) < 0)
		c->last_error[0] = '\0';
	eb_client_disconnect(c);
	c->error_code = e->code;
	return r < 0 ? r : -EPROTO;
}

/* Reads one message; SLEEP and WAKE are absorbed here and reported as 1 so callers loop. */
static int read_msg(struct eb_client *c, int timeout_ms, struct eb_msg *ret)
{
	struct eb_frame f;
	int r;

	r = eb_conn_read_full(c->conn, c->buf, EB_FRAME_HEADER_SIZE, client_bounded(c, timeout_ms));
	if (r == -ETIMEDOUT)
		return r;
	if (r == -ECANCELED)
		return client_fail(c, r, "stopped");
	if (r < 0)
		return client_fail(c, r,
		                   r == -ECONNRESET ? "the broker closed the connection" : NULL);
	/* The header says how much to read next; the codec judges it before a byte more is. */
	r = eb_frame_header_parse(c->buf, EB_FRAME_HEADER_SIZE, &f);
	if (r == -EMSGSIZE)
		return client_fail(c, r, "the broker sent an oversized frame");
	if (r < 0)
		return client_fail(c, -EBADMSG, "the broker sent a malformed frame");
	r = eb_conn_read_full(c->conn, c->buf + EB_FRAME_HEADER_SIZE, f.length,
	                      client_bounded(c, c->timeout_ms));
	if (r < 0)
		return client_fail(c, r, r == -ECANCELED ? "stopped" : NULL);
	f.payload = c->buf + EB_FRAME_HEADER_SIZE;
	r = eb_msg_decode(&f, ret);
	if (r < 0)
		return client_fail(c, -EBADMSG, "the broker sent a malformed frame");
	switch (ret->type) {
	case EB_MSG_ERROR:
		return broker_error(c, &ret->error);
	case EB_MSG_SLEEP:
		c->asleep = true;
		c->wake_deadline_ms =
		    eb_now_ms() + MIN(ret->retry.retry_ms, (uint32_t)SLEEP_MAX_MS);
		return 1;
	case EB_MSG_WAKE:
		c->asleep = false;
		return 1;
	case EB_MSG_HELLO:
	case EB_MSG_WELCOME:
	case EB_MSG_PUT:
	case EB_MSG_PUT_ACK:
	case EB_MSG_GET:
	case EB_MSG_DATA:
	case EB_MSG_EMPTY:
	case EB_MSG_QUOTA:
	case EB_MSG_STATUS_REQ:
	case EB_MSG_STATUS:
	case EB_MSG_REPORT_REQ:
	case EB_MSG_REPORT:
	case EB_MSG_ACTION_REQ:
	case EB_MSG_ACTION:
	case EB_MSG_STATE_REQ:
	case EB_MSG_STATE:
	case _EB_MSG_MAX:
	case _EB_MSG_INVALID:
		break;
	}
	return 0;
}

/* Reads the next message that is not SLEEP or WAKE, within timeout_ms in all: a broker that
 * sends SLEEP or WAKE without end neither holds the caller past its time nor keeps it busy. */
int client_read_answer(struct eb_client *c, int timeout_ms, struct eb_msg *ret)
{
	uint64_t end = eb_now_ms() + (uint64_t)MAX(timeout_ms, 0);
	int r;

	for (unsigned unasked = 0;; unasked++) {
		uint64_t now = eb_now_ms();

		if (unasked > UNASKED_MAX)
			return client_fail(
			    c, -EPROTO,
			    "the broker sent SLEEP or WAKE again and again instead of an answer");
		r = read_msg(c, now < end ? (int)(end - now) : 0, ret);
		if (r != 1)
			return r;
	}
}

/* Sends m and reads the broker's answer into it, which must be a want; what says otherwise. */
static int transact(struct eb_client *c, struct eb_msg *m, enum eb_msg_type want, const char *what)
{
	int r;

	if (!c->conn)
		return -ENOTCONN;
	r = client_send(c, m);
	if (r >= 0)
		r = client_read_answer(c, c->timeout_ms, m);
	if (r >= 0 && m->type != want)
		r = client_fail(c, -EPROTO, what);
	if (r >= 0)
		c->served = true;
	return r;
}

static int drain_acks(struct eb_client *c, unsigned keep)
{
	while (c->puts_in_flight > keep) {
		struct eb_msg m;
		int r = client_read_answer(c, c->timeout_ms, &m);

		if (r < 0)
			return r == -ETIMEDOUT
			           ? client_fail(c, r, "the broker did not acknowledge in time")
			           : r;
		if (m.type != EB_MSG_PUT_ACK)
			return client_fail(c, -EPROTO,
			                   "the broker answered a PUT with something else");
		c->puts_in_flight--;
		c->bits_credited += m.put_ack.credited_bits;
		c->served = true;
	}
	return 0;
}

int eb_client_put(struct eb_client *c, const void *data, size_t len, uint32_t credit_bits)
{
	struct eb_msg m = {.type = EB_MSG_PUT};
	int r;

	if (!c->conn)
		return -ENOTCONN;
	r = client_srv_follow(c);
	if (r < 0)
		return r;
	while (len > 0) {
		size_t n = MIN(len, (size_t)EB_DATA_MAX);
		uint32_t credit = (uint32_t)((uint64_t)credit_bits * n / len);

		m.put.data = data;
		m.put.len = (uint32_t)n;
		m.put.credit_bits = credit;
		r = client_send(c, &m);
		if (r < 0)
			return r;
		c->puts_in_flight++;
		r = drain_acks(c, c->put_window - 1);
		if (r < 0)
			return r;
		data = (const uint8_t *)data + n;
		len -= n;
		credit_bits -= credit;
	}
	return 0;
}

int eb_client_flush(struct eb_client *c)
{
	if (!c->conn)
		return -ENOTCONN;
	return drain_acks(c, 0);
}

bool eb_client_asleep(const struct eb_client *c)
{
	return c->asleep;
}

int eb_client_wait_wake(struct eb_client *c)
{
	int r = eb_client_flush(c);

	if (r < 0)
		return r;
	for (unsigned unasked = 0; c->asleep; unasked++) {
		uint64_t now = eb_now_ms();
		struct eb_msg m;

		/* A SLEEP and a WAKE are what a broker sends at its two thresholds: more than a few
		 * while a source rests are a flood, not news. */
		if (unasked > UNASKED_MAX)
			return client_fail(c, -EPROTO,
			                   "the broker sent SLEEP or WAKE again and again");
		if (now >= c->wake_deadline_ms) {
			c->asleep = false;
			break;
		}
		r = read_msg(c, (int)MIN(c->wake_deadline_ms - now, (uint64_t)1 << 30), &m);
		/* A caller's deadline (eb_client_set_deadline()) passed first is a timeout, said as
		 * one; otherwise the wait ran out because the rest is over. */
		if (r == -ETIMEDOUT && c->deadline_ms && eb_now_ms() >= c->deadline_ms &&
		    c->deadline_ms < c->wake_deadline_ms)
			return r;
		if (r == -ETIMEDOUT) {
			c->asleep = false;
			break;
		}
		if (r < 0)
			return r;
		if (r == 0)
			return client_fail(c, -EPROTO, "unexpected message while asleep");
	}
	return 0;
}

int eb_client_poll_wake(struct eb_client *c)
{
	struct pollfd pfd;

	if (!c->conn)
		return -ENOTCONN;
	for (unsigned unasked = 0; c->asleep; unasked++) {
		struct eb_msg m;
		int r;

		if (eb_now_ms() >= c->wake_deadline_ms) {
			c->asleep = false;
			break;
		}
		if (unasked > UNASKED_MAX)
			return client_fail(c, -EPROTO,
			                   "the broker sent SLEEP or WAKE again and again");
		/* Only what has arrived: a frame begun is read whole, within the timeout. */
		pfd = (struct pollfd){.fd = eb_conn_fd(c->conn), .events = POLLIN};
		if (!eb_conn_pending(c->conn) && poll(&pfd, 1, 0) <= 0)
			break;
		r = read_msg(c, c->timeout_ms, &m);
		if (r < 0)
			return r;
		if (r == 0)
			return client_fail(c, -EPROTO, "unexpected message while asleep");
	}
	return 0;
}

int eb_client_request(struct eb_client *c, size_t len, enum eb_get_mode mode)
{
	struct eb_msg m = {.type = EB_MSG_GET};
	int r;

	if (!c->conn)
		return -ENOTCONN;
	if (len == 0 || len > EB_DATA_MAX)
		return -EINVAL;
	r = client_srv_follow(c);
	if (r < 0)
		return r;
	if (c->gets_in_flight >= EB_CLIENT_GETS_MAX)
		return -EBUSY;
	m.get.bits = (uint32_t)len * 8;
	m.get.mode = mode;
	r = client_send(c, &m);
	if (r < 0)
		return r;
	c->asked[c->gets_in_flight++] = (uint32_t)len;
	return 0;
}

int eb_client_end_requests(struct eb_client *c)
{
	struct eb_sigpipe_guard g;

	if (!c->conn)
		return -ENOTCONN;
	if (c->no_end)
		return -EOPNOTSUPP;
	if (c->ended)
		return 0;
	eb_sigpipe_block(&g);
	if (eb_conn_is_tls(c->conn))
		eb_conn_shutdown(c->conn);
	else
		(void)shutdown(eb_conn_fd(c->conn), SHUT_WR);
	eb_sigpipe_restore(&g);
	c->ended = true;
	return 0;
}

bool eb_client_ended(const struct eb_client *c)
{
	return c->ended;
}

int eb_client_receive(struct eb_client *c, void *buf, size_t size, size_t *ret_len,
                      uint32_t *ret_bits, uint32_t *ret_retry_ms)
{
	struct eb_msg m;
	uint32_t asked;
	bool ended = c->ended;
	int r;

	if (!c->conn)
		return -ENOTCONN;
	if (c->gets_in_flight == 0)
		return -EINVAL;
	/* The broker holds a GET up to 250 ms before EMPTY; allow for that beyond the timeout. */
	r = client_read_answer(c, c->timeout_ms + 1000, &m);
	/* A broker that ends the session before it answers what came before the client's end
	 * predates the rule (docs/protocol.md 1.1): this client keeps its side open from now. */
	if (r < 0 && ended)
		c->no_end = true;
	if (r < 0)
		return r == -ETIMEDOUT ? client_fail(c, r, "the broker did not answer in time") : r;
	asked = c->asked[0];
	c->gets_in_flight--;
	memmove(c->asked, c->asked + 1, c->gets_in_flight * sizeof(*c->asked));
	/* Three answers to a GET; any other message is a broker out of step. */
	if (m.type == EB_MSG_DATA) {
		/* More than asked is a violation (docs/protocol.md, 3.6): what the broker means by
		 * it is unknown, so none of it is taken. */
		if (m.data.len > asked || m.data.len > size) {
			explicit_bzero(c->buf, sizeof(c->buf));
			snprintf(c->last_error, sizeof(c->last_error),
			         "the broker sent DATA of %" PRIu32 " bytes for a GET of %" PRIu32,
			         m.data.len, asked);
			eb_client_disconnect(c);
			return -EPROTO;
		}
		c->served = true;
		/* Nothing, though allowed, is no answer to act on: wait as after EMPTY. */
		if (m.data.len == 0) {
			*ret_retry_ms = ZERO_DATA_RETRY_MS;
			return -EAGAIN;
		}
		memcpy(buf, m.data.data, m.data.len);
		explicit_bzero(c->buf, EB_FRAME_HEADER_SIZE + 4 + m.data.len + 4);
		*ret_len = m.data.len;
		*ret_bits = m.data.bits;
		*ret_retry_ms = 0;
		return 0;
	}
	if (m.type == EB_MSG_EMPTY || m.type == EB_MSG_QUOTA) {
		c->served = true;
		*ret_retry_ms = m.retry.retry_ms;
		return m.type == EB_MSG_EMPTY ? -EAGAIN : -EDQUOT;
	}
	return client_fail(c, -EPROTO, "the broker answered a GET with something else");
}

void eb_client_set_deadline(struct eb_client *c, uint64_t deadline_ms)
{
	c->deadline_ms = deadline_ms;
}

void eb_client_set_cancel(struct eb_client *c, int fd, short events)
{
	c->cancel_fd = fd;
	c->cancel_events = events;
	if (c->conn)
		eb_conn_set_cancel(c->conn, fd, events);
}

int eb_client_set_chain(struct eb_client *c, const uint64_t *ids, unsigned n)
{
	if (n > EB_CHAIN_MAX)
		return -E2BIG;
	c->n_chain = (uint8_t)n;
	if (n > 0)
		memcpy(c->chain, ids, n * sizeof(*ids));
	return 0;
}

int eb_client_status(struct eb_client *c, struct eb_msg_status *ret)
{
	uint8_t version = c->status_v0 ? 0 : EB_STATUS_VERSION;
	struct eb_msg m = {.type = EB_MSG_STATUS_REQ, .status_req = {.version = version}};
	int r;

	c->error_code = 0;
	r = transact(c, &m, EB_MSG_STATUS, "the broker answered STATUS with something else");
	/* A broker older than STATUS's versions refuses a STATUS_REQ with a payload as malformed,
	 * and closes (docs/protocol.md 8): ask it again, once, for the first layout. */
	if (r < 0 && version > 0 && c->error_code == EB_ERR_PROTOCOL) {
		c->status_v0 = true;
		r = client_reconnect(c);
		if (r < 0)
			return r;
		return eb_client_status(c, ret);
	}
	if (r < 0)
		return r;
	if (m.status.version != version)
		return client_fail(c, -EPROTO, "the broker answered STATUS in another layout");
	*ret = m.status;
	return 0;
}

int eb_client_report(struct eb_client *c, uint8_t table, uint64_t after, struct eb_msg_report *ret)
{
	struct eb_msg m = {
	    .type = EB_MSG_REPORT_REQ,
	    .report_req = {.table = table, .version = EB_REPORT_VERSION, .after = after}};
	int r;

	r = transact(c, &m, EB_MSG_REPORT, "the broker answered REPORT_REQ with something else");
	if (r < 0)
		return r;
	if (m.report.table != table || m.report.version != EB_REPORT_VERSION)
		return client_fail(c, -EPROTO,
		                   "the broker answered REPORT_REQ with another table or version");
	*ret = m.report;
	return 0;
}

int eb_client_action(struct eb_client *c, const struct eb_msg_action_req *q,
                     struct eb_msg_action *ret)
{
	struct eb_msg m = {.type = EB_MSG_ACTION_REQ, .action_req = *q};
	int r;

	r = transact(c, &m, EB_MSG_ACTION, "the broker answered ACTION_REQ with something else");
	if (r < 0)
		return r;
	if (m.action.action != q->action)
		return client_fail(c, -EPROTO, "the broker answered another action");
	*ret = m.action;
	return 0;
}

int eb_client_state(struct eb_client *c, struct eb_msg_state *ret)
{
	struct eb_msg m = {.type = EB_MSG_STATE_REQ};
	int r;

	r = transact(c, &m, EB_MSG_STATE, "the broker answered STATE_REQ with something else");
	if (r < 0)
		return r;
	*ret = m.state;
	return 0;
}

uint64_t eb_client_bits_credited(const struct eb_client *c)
{
	return c->bits_credited;
}

const char *eb_client_broker(const struct eb_client *c)
{
	return c->current >= 0 ? c->current_text : "(none)";
}

const char *eb_client_last_error(const struct eb_client *c)
{
	return c->last_error[0] ? c->last_error : "no error";
}
