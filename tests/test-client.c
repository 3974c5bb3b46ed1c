/* SPDX-License-Identifier: MIT */
/* The broker client's guards against a broker that breaks the protocol: DATA longer than the
 * GET asked (docs/protocol.md 3.6), none of it taken, the client disconnecting and saying why;
 * SLEEP and WAKE without end instead of an answer; a source's rest after SLEEP ending at the
 * SLEEP's retry_ms when no WAKE comes (docs/protocol.md 3.7). The broker is the test's own, on a
 * unix socket, in a thread, answering frame by frame. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "client.h"
#include "io.h"
#include "macro.h"
#include "proto.h"

struct fake {
	int listen_fd;
	uint32_t extra; /* bytes of DATA beyond what the GET asked */
	unsigned wakes; /* WAKE frames sent before the DATA */
	uint32_t asked; /* what the GET asked, in bytes */
	uint32_t
	    sleep_ms; /* a source's broker: SLEEP with this retry_ms to its PUT, never a WAKE */
};

static void send_msg(int fd, const struct eb_msg *m)
{
	static uint8_t buf[EB_FRAME_MAX];
	int n = eb_msg_encode(m, buf, sizeof(buf));

	assert_true(n > 0);
	assert_int_equal(eb_write_all(fd, buf, (size_t)n), 0);
}

/* One frame from the client; its type, and a GET's bytes in *asked. */
static enum eb_msg_type recv_msg(int fd, uint32_t *asked)
{
	static uint8_t buf[EB_FRAME_MAX];
	struct eb_frame f;
	struct eb_msg m;
	size_t size;

	assert_int_equal(eb_read_all(fd, buf, EB_FRAME_HEADER_SIZE), EB_FRAME_HEADER_SIZE);
	assert_int_equal(eb_frame_header_parse(buf, EB_FRAME_HEADER_SIZE, &f), 0);
	assert_int_equal(eb_read_all(fd, buf + EB_FRAME_HEADER_SIZE, f.length), (ssize_t)f.length);
	assert_int_equal(eb_frame_parse(buf, EB_FRAME_HEADER_SIZE + f.length, &f, &size), 0);
	assert_int_equal(eb_msg_decode(&f, &m), 0);
	if (m.type == EB_MSG_GET)
		*asked = m.get.bits / 8;
	return m.type;
}

/* The broker: WELCOME to the HELLO, then DATA of asked + extra bytes to the GET. */
static void *broker(void *arg)
{
	static uint8_t data[EB_DATA_MAX];
	struct fake *fk = arg;
	struct eb_msg m = {.type = EB_MSG_WELCOME};
	int fd = accept4(fk->listen_fd, NULL, NULL, SOCK_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(recv_msg(fd, &fk->asked), EB_MSG_HELLO);
	m.welcome = (struct eb_msg_welcome){
	    .version = 1, .roles = EB_ROLE_SINK, .max_data = EB_DATA_MAX, .user = "me"};
	send_msg(fd, &m);
	if (fk->sleep_ms) {
		/* At high water: the PUT is answered, the source told to rest, and no WAKE comes.
		 */
		assert_int_equal(recv_msg(fd, &fk->asked), EB_MSG_PUT);
		m = (struct eb_msg){.type = EB_MSG_SLEEP, .retry = {.retry_ms = fk->sleep_ms}};
		send_msg(fd, &m);
		m = (struct eb_msg){.type = EB_MSG_PUT_ACK,
		                    .put_ack = {.credited_bits = 0, .accepted_bytes = 16}};
		send_msg(fd, &m);
		while (read(fd, data, sizeof(data)) > 0)
			;
		close(fd);
		return NULL;
	}
	assert_int_equal(recv_msg(fd, &fk->asked), EB_MSG_GET);
	for (unsigned i = 0; i < fk->wakes; i++) {
		m = (struct eb_msg){.type = EB_MSG_WAKE};
		send_msg(fd, &m);
	}
	memset(data, 0x5a, sizeof(data));
	m = (struct eb_msg){.type = EB_MSG_DATA};
	m.data = (struct eb_msg_data){
	    .bits = 8 * (fk->asked + fk->extra), .data = data, .len = fk->asked + fk->extra};
	send_msg(fd, &m);
	/* Wait for the client to go: then the test has read what it will. */
	while (read(fd, data, sizeof(data)) > 0)
		;
	close(fd);
	return NULL;
}

/* A GET of 16 bytes answered, after wakes WAKE frames, with 16 + extra; returns
 * eb_client_receive()'s result. */
static int get_answered_with(uint32_t extra, unsigned wakes, uint8_t *buf, size_t size,
                             size_t *ret_len, char *error, size_t error_size)
{
	const char *tmp = getenv("TMPDIR");
	char dir[256], path[sizeof(dir) + 16], uri[sizeof(path) + 8];
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct fake fk = {.extra = extra, .wakes = wakes};
	struct eb_client *c = NULL;
	uint32_t bits = 0, retry = 0;
	char *err = NULL;
	pthread_t t;
	int r;

	snprintf(dir, sizeof(dir), "%s/test-client-XXXXXX", tmp && *tmp ? tmp : P_tmpdir);
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/sock", dir);
	snprintf(uri, sizeof(uri), "unix:%s", path);
	assert_true(strlen(path) < sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fk.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fk.listen_fd >= 0);
	assert_int_equal(bind(fk.listen_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fk.listen_fd, 1), 0);
	assert_int_equal(pthread_create(&t, NULL, broker, &fk), 0);

	{
		struct eb_client_options o = {
		    .brokers = {uri}, .n_brokers = 1, .roles = EB_ROLE_SINK, .kind = "test"};

		assert_int_equal(eb_client_new(&o, &c, &err), 0);
	}
	assert_int_equal(eb_client_connect(c), 0);
	/* Nothing, or more than a frame holds, is no request. */
	assert_int_equal(eb_client_request(c, 0, EB_GET_FULL), -EINVAL);
	assert_int_equal(eb_client_request(c, EB_DATA_MAX + 1, EB_GET_FULL), -EINVAL);
	/* GETs in flight are bounded: the client keeps what each asked. */
	for (unsigned i = 0; i < EB_CLIENT_GETS_MAX; i++)
		assert_int_equal(eb_client_request(c, 16, EB_GET_FULL), 0);
	assert_int_equal(eb_client_request(c, 16, EB_GET_FULL), -EBUSY);
	r = eb_client_receive(c, buf, size, ret_len, &bits, &retry);
	snprintf(error, error_size, "%s", eb_client_last_error(c));
	eb_client_free(c);
	assert_int_equal(pthread_join(t, NULL), 0);
	close(fk.listen_fd);
	unlink(path);
	rmdir(dir);
	free(err);
	return r;
}

static void test_data_as_asked(void **state)
{
	uint8_t buf[64];
	size_t len = 0;
	char error[256];

	(void)state;
	memset(buf, 0, sizeof(buf));
	assert_int_equal(get_answered_with(0, 0, buf, sizeof(buf), &len, error, sizeof(error)), 0);
	assert_int_equal(len, 16);
	assert_int_equal(buf[0], 0x5a);
	assert_int_equal(buf[15], 0x5a);
	assert_int_equal(buf[16], 0);
}

/* One byte more than asked, though the caller's buffer would hold it: a violation, none of it
 * taken, and the reason given. */
static void test_data_longer_than_asked(void **state)
{
	uint8_t buf[64];
	size_t len = 12345;
	char error[256];

	(void)state;
	memset(buf, 0, sizeof(buf));
	assert_int_equal(get_answered_with(1, 0, buf, sizeof(buf), &len, error, sizeof(error)),
	                 -EPROTO);
	assert_int_equal(len, 12345);
	for (size_t i = 0; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 0);
	assert_non_null(strstr(error, "DATA of 17 bytes for a GET of 16"));
}

/* docs/security.md: at most 16 SLEEP or WAKE frames while an answer is awaited, then the broker
 * is out of step. */
static void test_wakes_before_answer(void **state)
{
	uint8_t buf[64];
	size_t len = 0;
	char error[256];

	(void)state;
	assert_int_equal(get_answered_with(0, 16, buf, sizeof(buf), &len, error, sizeof(error)), 0);
	assert_int_equal(len, 16);
	assert_int_equal(get_answered_with(0, 17, buf, sizeof(buf), &len, error, sizeof(error)),
	                 -EPROTO);
	assert_non_null(strstr(error, "SLEEP or WAKE again and again"));
}

/* A broker older than STATUS's versions (docs/protocol.md 8): a STATUS_REQ with a payload is
 * malformed to it, answered with ERROR(PROTOCOL) and the end of the session; the empty one gets
 * the 52-byte STATUS. It serves two connections, and counts the versioned requests it saw. */
struct old_broker {
	int listen_fd;
	unsigned versioned, empty;
};

static void *old_broker(void *arg)
{
	static uint8_t buf[EB_FRAME_MAX];
	struct old_broker *ob = arg;

	for (int k = 0; k < 2; k++) {
		int fd = accept4(ob->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		struct eb_msg m = {.type = EB_MSG_WELCOME};
		uint32_t asked = 0;
		struct eb_frame f;

		assert_true(fd >= 0);
		assert_int_equal(recv_msg(fd, &asked), EB_MSG_HELLO);
		m.welcome = (struct eb_msg_welcome){
		    .version = 1, .roles = EB_ROLE_ADMIN, .max_data = EB_DATA_MAX, .user = "me"};
		send_msg(fd, &m);
		for (;;) {
			if (eb_read_all(fd, buf, EB_FRAME_HEADER_SIZE) != EB_FRAME_HEADER_SIZE)
				break;
			assert_int_equal(eb_frame_header_parse(buf, EB_FRAME_HEADER_SIZE, &f), 0);
			assert_int_equal(f.type, EB_MSG_STATUS_REQ);
			if (f.length > 0) {
				ob->versioned++;
				m = (struct eb_msg){.type = EB_MSG_ERROR,
				                    .error = {.code = EB_ERR_PROTOCOL}};
				snprintf(m.error.text, sizeof(m.error.text),
				         "malformed STATUS_REQ");
				send_msg(fd, &m);
				break;
			}
			ob->empty++;
			m = (struct eb_msg){.type = EB_MSG_STATUS,
			                    .status = {.pool_bits = 512, .capacity_bits = 4096}};
			send_msg(fd, &m);
		}
		close(fd);
	}
	return NULL;
}

/* eb_client asks for STATUS version 1; a broker older than that refuses and closes, and the
 * client connects again and asks it for version 0, and only version 0 from then on. */
static void test_status_older_broker(void **state)
{
	const char *tmp = getenv("TMPDIR");
	char dir[256], path[sizeof(dir) + 16], uri[sizeof(path) + 8];
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct old_broker ob = {};
	struct eb_client *c = NULL;
	struct eb_msg_status st;
	char *err = NULL;
	pthread_t t;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/test-client-XXXXXX", tmp && *tmp ? tmp : P_tmpdir);
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/sock", dir);
	snprintf(uri, sizeof(uri), "unix:%s", path);
	assert_true(strlen(path) < sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	ob.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(ob.listen_fd >= 0);
	assert_int_equal(bind(ob.listen_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(ob.listen_fd, 2), 0);
	assert_int_equal(pthread_create(&t, NULL, old_broker, &ob), 0);
	{
		struct eb_client_options o = {
		    .brokers = {uri}, .n_brokers = 1, .roles = EB_ROLE_ADMIN, .kind = "test"};

		assert_int_equal(eb_client_new(&o, &c, &err), 0);
	}
	assert_int_equal(eb_client_connect(c), 0);
	assert_int_equal(eb_client_status(c, &st), 0);
	assert_int_equal(st.version, 0);
	assert_int_equal(st.pool_bits, 512);
	assert_int_equal(eb_client_status(c, &st), 0);
	assert_int_equal(st.version, 0);
	eb_client_free(c);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(ob.versioned, 1);
	assert_int_equal(ob.empty, 2);
	close(ob.listen_fd);
	unlink(path);
	rmdir(dir);
	free(err);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	assert_int_equal(clock_gettime(CLOCK_MONOTONIC, &ts), 0);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* docs/protocol.md 3.7 and every source's man page: a source told SLEEP rests until WAKE or the
 * SLEEP's retry_ms, whichever comes first. Here no WAKE comes: the rest ends at retry_ms, not
 * before, and not never. */
static void test_rest_ends_at_retry(void **state)
{
	const char *tmp = getenv("TMPDIR");
	char dir[256], path[sizeof(dir) + 16], uri[sizeof(path) + 8];
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct fake fk = {.sleep_ms = 700};
	struct eb_client *c = NULL;
	uint8_t data[16] = {1};
	uint64_t start, rested;
	char *err = NULL;
	pthread_t t;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/test-client-XXXXXX", tmp && *tmp ? tmp : P_tmpdir);
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/sock", dir);
	snprintf(uri, sizeof(uri), "unix:%s", path);
	assert_true(strlen(path) < sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fk.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fk.listen_fd >= 0);
	assert_int_equal(bind(fk.listen_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fk.listen_fd, 1), 0);
	assert_int_equal(pthread_create(&t, NULL, broker, &fk), 0);
	{
		struct eb_client_options o = {
		    .brokers = {uri}, .n_brokers = 1, .roles = EB_ROLE_SOURCE, .kind = "test"};

		assert_int_equal(eb_client_new(&o, &c, &err), 0);
	}
	assert_int_equal(eb_client_connect(c), 0);
	assert_int_equal(eb_client_put(c, data, sizeof(data), 8), 0);
	assert_int_equal(eb_client_flush(c), 0);
	assert_true(eb_client_asleep(c));
	start = now_ms();
	assert_int_equal(eb_client_wait_wake(c), 0);
	rested = now_ms() - start;
	assert_false(eb_client_asleep(c));
	/* The deadline was set when the SLEEP was read, a moment before start; the upper bound is
	 * generous for a loaded machine, and far below "never". */
	assert_true(rested >= 500);
	assert_true(rested < 20000);
	eb_client_free(c);
	assert_int_equal(pthread_join(t, NULL), 0);
	close(fk.listen_fd);
	unlink(path);
	rmdir(dir);
	free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_data_as_asked),
	    cmocka_unit_test(test_data_longer_than_asked),
	    cmocka_unit_test(test_wakes_before_answer),
	    cmocka_unit_test(test_rest_ends_at_retry),
	    cmocka_unit_test(test_status_older_broker),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
