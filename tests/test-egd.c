/* SPDX-License-Identifier: MIT */
/* The EGD sink's request parser and its locked ring buffer, alone. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../sinks/egd-buffer.h"
#include "../sinks/egd-proto.h"
#include "macro.h"

static void expect_need_more(const uint8_t *buf, size_t len)
{
	struct egd_request q;
	size_t size = 12345;

	assert_int_equal(egd_request_parse(buf, len, &q, &size), 0);
	assert_int_equal(size, 12345); /* untouched unless complete */
}

static void test_parse_each_command(void **state)
{
	struct egd_request q;
	size_t size;
	uint8_t write_req[4 + 255];

	(void)state;
	assert_int_equal(egd_request_parse((const uint8_t *)"\x00", 1, &q, &size), 1);
	assert_int_equal(q.cmd, EGD_CMD_LEVEL);
	assert_int_equal(size, 1);

	assert_int_equal(egd_request_parse((const uint8_t *)"\x04\x01\x20", 3, &q, &size), 1);
	assert_int_equal(q.cmd, EGD_CMD_PID);
	assert_int_equal(size, 1); /* the next request's bytes are left alone */

	assert_int_equal(egd_request_parse((const uint8_t *)"\x01\xff", 2, &q, &size), 1);
	assert_int_equal(q.cmd, EGD_CMD_READ);
	assert_int_equal(q.count, 255);
	assert_int_equal(size, 2);

	assert_int_equal(egd_request_parse((const uint8_t *)"\x02\x00", 2, &q, &size), 1);
	assert_int_equal(q.cmd, EGD_CMD_READ_BLOCK);
	assert_int_equal(q.count, 0);

	memset(write_req, 0xa5, sizeof(write_req));
	write_req[0] = 0x03;
	write_req[1] = 0x07; /* 0x07f8 = 2040 bits, big-endian */
	write_req[2] = 0xf8;
	write_req[3] = 255;
	assert_int_equal(egd_request_parse(write_req, sizeof(write_req), &q, &size), 1);
	assert_int_equal(q.cmd, EGD_CMD_WRITE);
	assert_int_equal(q.bits, 2040);
	assert_int_equal(q.count, 255);
	assert_int_equal(size, sizeof(write_req));
	assert_ptr_equal(q.data, write_req + 4);
}

static void test_parse_partial(void **state)
{
	static const uint8_t w[] = {0x03, 0x00, 0x10, 0x03, 'a', 'b', 'c'};

	(void)state;
	expect_need_more(NULL, 0);
	expect_need_more((const uint8_t *)"\x01", 1);
	expect_need_more((const uint8_t *)"\x02", 1);
	/* A write is whole only with its header and all its data. */
	for (size_t n = 1; n < sizeof(w); n++)
		expect_need_more(w, n);
}

static void test_parse_unknown(void **state)
{
	struct egd_request q;
	size_t size;

	(void)state;
	for (unsigned c = 0x05; c <= 0xff; c++) {
		uint8_t b = (uint8_t)c;

		assert_int_equal(egd_request_parse(&b, 1, &q, &size), -EBADMSG);
	}
}

static void test_buffer_ring(void **state)
{
	struct egd_buffer *b = NULL;
	uint8_t in[100], out[100];

	(void)state;
	assert_int_equal(egd_buffer_new(EGD_BUFFER_MIN - 1, &b), -ERANGE);
	assert_int_equal(egd_buffer_new(EGD_BUFFER_MAX + 1, &b), -ERANGE);
	assert_int_equal(egd_buffer_new(64, &b), 0);
	assert_int_equal(egd_buffer_capacity(b), 64);
	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (uint8_t)i;

	/* Only what fits goes in. */
	assert_int_equal(egd_buffer_put(b, in, 100), 64);
	assert_int_equal(egd_buffer_level(b), 64);
	assert_int_equal(egd_buffer_space(b), 0);

	/* Out in order, once. */
	assert_int_equal(egd_buffer_take(b, out, 40), 40);
	assert_memory_equal(out, in, 40);
	/* Wrap around the end. */
	assert_int_equal(egd_buffer_put(b, in + 64, 36), 36);
	assert_int_equal(egd_buffer_take(b, out, 100), 60);
	assert_memory_equal(out, in + 40, 60);
	assert_int_equal(egd_buffer_level(b), 0);
	assert_int_equal(egd_buffer_take(b, out, 10), 0);

	egd_buffer_put(b, in, 10);
	egd_buffer_clear(b);
	assert_int_equal(egd_buffer_level(b), 0);
	egd_buffer_free(b);
}

/* What was taken is wiped in the ring: the memory after a take holds no served byte. */
static void test_buffer_wipes(void **state)
{
	struct egd_buffer *b = NULL;
	uint8_t in[64], out[64];
	const uint8_t *base;

	(void)state;
	assert_int_equal(egd_buffer_new(64, &b), 0);
	memset(in, 0x5a, sizeof(in));
	egd_buffer_put(b, in, sizeof(in));
	egd_buffer_take(b, out, sizeof(out));
	/* The data follow the header in the one mapping; scan the whole of it. */
	base = (const uint8_t *)b;
	for (size_t i = 0; i < 64 + 64; i++)
		assert_int_not_equal(memcmp(base + i, in, 8) == 0, 1);
	egd_buffer_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_each_command), cmocka_unit_test(test_parse_partial),
	    cmocka_unit_test(test_parse_unknown),      cmocka_unit_test(test_buffer_ring),
	    cmocka_unit_test(test_buffer_wipes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
