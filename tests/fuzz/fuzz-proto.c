/* SPDX-License-Identifier: MIT */
/* Fuzzes the wire protocol: frame parsing, message decoding, and the re-encoding round trip. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "proto.h"
#include "report.h"

/* A few frames of the largest size are plenty; longer inputs only slow the fuzzer down. */
#define INPUT_MAX (4 * EB_FRAME_MAX)

/* Every row of an accepted REPORT reads back, each re-encodes to its own bytes, and they are
 * exactly count rows in increasing id order. */
static void check_report(const struct eb_msg_report *m)
{
	struct eb_report_rows it;
	uint8_t row_buf[EB_REPORT_SESSION_ROW_MAX];
	const uint8_t *p = m->rows;
	uint64_t last = 0;
	unsigned n = 0;
	int r;

	check(m->count <= EB_REPORT_ROWS_MAX);
	eb_report_rows_init(&it, m);
	for (;;) {
		struct eb_report_history_row h;
		struct eb_report_session s;
		struct eb_report_user u;
		uint64_t id;
		int k;

		if (m->table == EB_REPORT_HISTORY) {
			r = eb_report_next_history(&it, &h);
			if (r <= 0)
				break;
			check(eb_history_kind_to_string(h.kind));
			k = eb_report_history_encode(&h, row_buf, sizeof(row_buf));
			id = eb_report_history_id(&h);
		} else if (m->table == EB_REPORT_SESSIONS) {
			r = eb_report_next_session(&it, &s);
			if (r <= 0)
				break;
			check(eb_source_health_to_string(s.health));
			k = eb_report_session_encode(&s, row_buf, sizeof(row_buf));
			id = s.id;
		} else {
			check(m->table == EB_REPORT_USERS);
			r = eb_report_next_user(&it, &u);
			if (r <= 0)
				break;
			k = eb_report_user_encode(&u, row_buf, sizeof(row_buf));
			id = u.id;
		}
		check(k > 0 && memcmp(row_buf, p, (size_t)k) == 0);
		check(id > last);
		p += k;
		last = id;
		n++;
	}
	check(r == 0);
	check(n == m->count);
	check(m->next == 0 || m->next == last);
}

static void check_msg(const struct eb_frame *f, const uint8_t *frame, size_t n)
{
	static uint8_t out[EB_FRAME_MAX];
	struct eb_msg m;
	char roles[64];
	int r;

	r = eb_msg_decode(f, &m);
	if (r < 0) {
		check(r == -EBADMSG);
		return;
	}
	check(m.type == f->type);

	/* A message the decoder accepts is one the encoder would write, byte for byte: there is
	 * exactly one encoding of every message. */
	r = eb_msg_encode(&m, out, sizeof(out));
	check(r >= 0);
	check((size_t)r == n);
	check(memcmp(out, frame, n) == 0);
	check(eb_msg_encode(&m, out, n - 1) == -ENOBUFS);

	switch (m.type) {
	case EB_MSG_HELLO:
		check(strlen(m.hello.kind) <= EB_KIND_MAX);
		check(eb_roles_to_string(m.hello.roles, roles, sizeof(roles))[0] != '\0');
		break;
	case EB_MSG_WELCOME:
		check(strlen(m.welcome.user) <= EB_KIND_MAX);
		check(eb_roles_to_string(m.welcome.roles, roles, sizeof(roles))[0] != '\0');
		break;
	case EB_MSG_PUT:
		check(m.put.len >= 1 && m.put.len <= EB_DATA_MAX);
		check(m.put.data == f->payload + 8);
		check(m.put.credit_bits <= 8 * (uint64_t)m.put.len);
		break;
	case EB_MSG_DATA:
		check(m.data.len <= EB_DATA_MAX);
		check(m.data.bits <= 8 * (uint64_t)m.data.len);
		break;
	case EB_MSG_GET:
		check(m.get.bits >= 8 && m.get.bits <= EB_DATA_MAX * 8 && m.get.bits % 8 == 0);
		break;
	case EB_MSG_ERROR:
		check(eb_error_code_to_string(m.error.code));
		check(strlen(m.error.text) <= EB_TEXT_MAX);
		break;
	case EB_MSG_REPORT:
		check_report(&m.report);
		break;
	case EB_MSG_PUT_ACK:
	case EB_MSG_REPORT_REQ:
	case EB_MSG_EMPTY:
	case EB_MSG_SLEEP:
	case EB_MSG_WAKE:
	case EB_MSG_QUOTA:
	case EB_MSG_STATUS_REQ:
	case EB_MSG_STATUS:
	case EB_MSG_STATE_REQ:
		break;
	case EB_MSG_ACTION_REQ:
		check(eb_action_to_string(m.action_req.action));
		check(strlen(m.action_req.user) <= EB_KIND_MAX);
		break;
	case EB_MSG_ACTION:
		check(eb_action_result_to_string(m.action.result));
		check(strlen(m.action.text) <= EB_TEXT_MAX);
		break;
	case EB_MSG_STATE:
		check(eb_upstream_state_to_string(m.state.upstream));
		check(!(m.state.flags & EB_STATE_DRAINED) == !m.state.drained_by[0]);
		break;
	case _EB_MSG_MAX:
	case _EB_MSG_INVALID:
		check(!"decoded an invalid type");
	}
}

/* Reads the header length without the codec, to check its -EAGAIN and -EMSGSIZE. */
static void check_refusal(int r, const uint8_t *data, size_t size)
{
	size_t length;

	if (size < EB_FRAME_HEADER_SIZE) {
		check(r == -EAGAIN);
		return;
	}
	length = (size_t)data[4] << 24 | (size_t)data[5] << 16 | (size_t)data[6] << 8 | data[7];
	if (r == -EAGAIN)
		check(length <= EB_FRAME_PAYLOAD_MAX && EB_FRAME_HEADER_SIZE + length > size);
	if (r == -EMSGSIZE)
		check(length > EB_FRAME_PAYLOAD_MAX);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > INPUT_MAX)
		return 0;

	/* The input is a byte stream as a receive buffer would hold it: frames back to back. */
	while (size > 0) {
		struct eb_frame f;
		size_t n;
		int r;

		r = eb_frame_parse(data, size, &f, &n);
		if (r < 0) {
			check(r == -EAGAIN || r == -EBADMSG || r == -EMSGSIZE);
			check_refusal(r, data, size);
			break;
		}
		check(n >= EB_FRAME_HEADER_SIZE && n <= size);
		check(n == EB_FRAME_HEADER_SIZE + (size_t)f.length);
		check(f.payload == data + EB_FRAME_HEADER_SIZE);
		check(eb_msg_type_to_string(f.type));

		check_msg(&f, data, n);

		data += n;
		size -= n;
	}

	return 0;
}
