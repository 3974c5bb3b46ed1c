/* SPDX-License-Identifier: MIT */
/* Fuzzes eb-sink-egd's request parser on a client's byte stream, and the ring buffer that the
 * requests' counts drive, against a plain reference queue. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egd-buffer.h"
#include "egd-proto.h"
#include "fuzz.h"
#include "macro.h"

/* eb-sink-egd reads at most a few requests ahead; 64 KiB is hundreds of the longest. */
#define INPUT_MAX (64 * 1024)

/* What the ring must hold, in order: the bytes put and not yet taken. */
struct model {
	uint8_t bytes[INPUT_MAX];
	size_t head, len;
};

static void check_request(const uint8_t *data, size_t size, const struct egd_request *q, size_t n)
{
	struct egd_request p;
	size_t m;

	check(n >= 1 && n <= EGD_REQUEST_MAX && n <= size);
	check(q->cmd == data[0]);
	check(q->count <= EGD_COUNT_MAX);
	check(q->cmd >= EGD_CMD_LEVEL && q->cmd < _EGD_CMD_MAX);
	switch (q->cmd) {
	case EGD_CMD_LEVEL:
	case EGD_CMD_PID:
		check(n == 1 && q->count == 0 && q->bits == 0 && !q->data);
		break;
	case EGD_CMD_READ:
	case EGD_CMD_READ_BLOCK:
		check(n == 2 && q->count == data[1] && q->bits == 0 && !q->data);
		break;
	case EGD_CMD_WRITE:
		check(n == 4 + (size_t)q->count);
		check(q->data == data + 4 && q->data + q->count <= data + size);
		check(q->bits == ((unsigned)data[1] << 8 | data[2]));
		break;
	case _EGD_CMD_MAX:
	case _EGD_CMD_INVALID:
		check(!"parsed an invalid command");
	}

	/* Every proper prefix of a whole request asks for more bytes, and parses nothing. */
	for (size_t k = 0; k < n; k++) {
		p = (struct egd_request){.cmd = _EGD_CMD_INVALID};
		m = SIZE_MAX;
		check(egd_request_parse(data, k, &p, &m) == 0);
		check(p.cmd == _EGD_CMD_INVALID && m == SIZE_MAX);
	}
	/* Bytes after it do not change it. */
	check(egd_request_parse(data, n, &p, &m) == 1);
	check(m == n && memcmp(&p, q, sizeof(p)) == 0);
}

/* Puts a WRITE's bytes into the ring as the refill thread would, and takes a READ's count out as
 * a client would, checking both against the model. */
static void drive_buffer(struct egd_buffer *b, struct model *md, const struct egd_request *q)
{
	static uint8_t out[EGD_COUNT_MAX];
	size_t want, k;

	switch (q->cmd) {
	case EGD_CMD_WRITE:
		want = MIN((size_t)q->count, egd_buffer_space(b));
		k = egd_buffer_put(b, q->data, q->count);
		check(k == want);
		check(md->head + md->len + k <= sizeof(md->bytes));
		memcpy(md->bytes + md->head + md->len, q->data, k);
		md->len += k;
		break;
	case EGD_CMD_READ:
	case EGD_CMD_READ_BLOCK:
		want = MIN((size_t)q->count, md->len);
		k = egd_buffer_take(b, out, q->count);
		check(k == want);
		check(memcmp(out, md->bytes + md->head, k) == 0);
		md->head += k;
		md->len -= k;
		break;
	case EGD_CMD_LEVEL:
	case EGD_CMD_PID:
		break;
	case _EGD_CMD_MAX:
	case _EGD_CMD_INVALID:
		check(!"parsed an invalid command");
	}
	check(egd_buffer_level(b) == md->len);
	check(egd_buffer_level(b) + egd_buffer_space(b) == egd_buffer_capacity(b));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct model md;
	_cleanup_(egd_buffer_freep) struct egd_buffer *b = NULL;
	size_t capacity;
	int r;

	if (size > INPUT_MAX)
		return 0;

	/* A small ring wraps often; its size varies with the input so that every offset is hit. */
	capacity = EGD_BUFFER_MIN + size % EGD_BUFFER_MIN;
	check(egd_buffer_new(capacity, &b) == 0);
	check(egd_buffer_capacity(b) == capacity && egd_buffer_level(b) == 0);
	md.head = md.len = 0;

	/* The input is what a client sent, as eb-sink-egd's input buffer holds it. */
	while (size > 0) {
		struct egd_request q = {.cmd = _EGD_CMD_INVALID};
		size_t n = SIZE_MAX;

		r = egd_request_parse(data, size, &q, &n);
		if (r < 0) {
			check(r == -EBADMSG);
			check(data[0] > EGD_CMD_PID);
			check(q.cmd == _EGD_CMD_INVALID && n == SIZE_MAX);
			break;
		}
		if (r == 0) {
			/* Only a request cut short waits for more. */
			check(q.cmd == _EGD_CMD_INVALID && n == SIZE_MAX);
			check(size < EGD_REQUEST_MAX);
			check(data[0] <= EGD_CMD_PID && data[0] != EGD_CMD_LEVEL &&
			      data[0] != EGD_CMD_PID);
			break;
		}
		check(r == 1);
		check_request(data, size, &q, n);
		drive_buffer(b, &md, &q);
		data += n;
		size -= n;
	}

	egd_buffer_clear(b);
	check(egd_buffer_level(b) == 0 && egd_buffer_space(b) == capacity);
	return 0;
}
