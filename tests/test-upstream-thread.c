/* SPDX-License-Identifier: MIT */
/* Tests for daemon/upstream-thread.c, the upstream client's thread on the sink runtime, run in the
 * test's own thread against a scripted broker (the client doubled through -Wl,--wrap=eb_client_*),
 * the test holding the loop's end of the socket pair: the notes the loop hears for a draw, new
 * ids taken between two GETs with a new HELLO before the next one, or with nothing to draw, a
 * refusal retried on the back-off with one FAILED note, and an upstream that hangs up while there
 * is nothing to draw heard at once. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "../daemon/upstream-internal.h"
#include "client.h"
#include "macro.h"
#include "time-util.h"

/* One answer of the scripted broker: DATA of len bytes carrying bits, and what the loop says
 * meanwhile (a command sent, or its end shut). */
struct answer {
	size_t len;
	uint32_t bits;
	uint64_t new_id; /* send a DRAW of 0 bits with this one id; 0: none */
	bool end;        /* shut the loop's end: the thread's run ends */
	bool hang_up;    /* the upstream closes the connection after this answer */
};

static struct fake {
	int loop_fd; /* the loop's end, the test's */
	bool connected;
	int connects;
	int connect_fails, connect_error;
	int end_at_connect;         /* shut the loop's end at this connection (1-based); 0: never */
	uint64_t ids[EB_CHAIN_MAX]; /* eb_client_set_chain()'s */
	unsigned n_ids;
	uint64_t hello_id[8]; /* the first id each connection said in HELLO */
	int asked_on[8];      /* the connection each GET went on */
	size_t n_asked;
	const struct answer *answers;
	size_t n_answers, at;
	int up[2]; /* the connection's socket (eb_client_fd()), and the upstream's end */
} fake;

static struct eb_client *const client = (struct eb_client *)&fake;

static void loop_says(uint64_t bits, uint64_t id)
{
	struct up_cmd cmd = {.type = UP_CMD_DRAW, .bits = bits, .n_chain = 1, .chain = {id}};

	assert_int_equal(send(fake.loop_fd, &cmd, sizeof(cmd), MSG_NOSIGNAL), sizeof(cmd));
}

bool __wrap_eb_client_connected(const struct eb_client *c);
bool __wrap_eb_client_connected(const struct eb_client *c)
{
	(void)c;
	return fake.connected;
}

int __wrap_eb_client_connect(struct eb_client *c);
int __wrap_eb_client_connect(struct eb_client *c)
{
	(void)c;
	if (fake.connect_fails > 0) {
		fake.connect_fails--;
		return fake.connect_error;
	}
	assert_true(fake.connects < (int)ELEMENTSOF(fake.hello_id));
	fake.hello_id[fake.connects++] = fake.n_ids > 0 ? fake.ids[0] : 0;
	fake.connected = true;
	if (fake.connects == fake.end_at_connect)
		assert_return_code(shutdown(fake.loop_fd, SHUT_WR), errno);
	return 0;
}

void __wrap_eb_client_disconnect(struct eb_client *c);
void __wrap_eb_client_disconnect(struct eb_client *c)
{
	(void)c;
	fake.connected = false;
}

int __wrap_eb_client_request(struct eb_client *c, size_t len, enum eb_get_mode mode);
int __wrap_eb_client_request(struct eb_client *c, size_t len, enum eb_get_mode mode)
{
	(void)c;
	(void)len;
	assert_int_equal(mode, EB_GET_FULL);
	assert_true(fake.connected);
	assert_true(fake.n_asked < ELEMENTSOF(fake.asked_on));
	fake.asked_on[fake.n_asked++] = fake.connects;
	return 0;
}

int __wrap_eb_client_receive(struct eb_client *c, void *buf, size_t size, size_t *ret_len,
                             uint32_t *ret_bits, uint32_t *ret_retry_ms);
int __wrap_eb_client_receive(struct eb_client *c, void *buf, size_t size, size_t *ret_len,
                             uint32_t *ret_bits, uint32_t *ret_retry_ms)
{
	const struct answer *a;

	(void)c;
	(void)ret_retry_ms;
	assert_true(fake.connected);
	assert_true(fake.at < fake.n_answers); /* nothing asked beyond the script */
	a = &fake.answers[fake.at++];
	if (a->new_id)
		loop_says(0, a->new_id);
	if (a->end)
		assert_return_code(shutdown(fake.loop_fd, SHUT_WR), errno);
	if (a->hang_up)
		assert_return_code(shutdown(fake.up[1], SHUT_WR), errno);
	assert_true(a->len <= size);
	memset(buf, 0xa5, a->len);
	*ret_len = a->len;
	*ret_bits = a->bits;
	return 0;
}

int __wrap_eb_client_set_chain(struct eb_client *c, const uint64_t *ids, unsigned n);
int __wrap_eb_client_set_chain(struct eb_client *c, const uint64_t *ids, unsigned n)
{
	(void)c;
	assert_true(n <= EB_CHAIN_MAX);
	memcpy(fake.ids, ids, n * sizeof(*ids));
	fake.n_ids = n;
	return 0;
}

/* The stop by shutting the loop's end is not tested here: the test's end is shut to end runs. */
void __wrap_eb_client_set_cancel(struct eb_client *c, int fd, short events);
void __wrap_eb_client_set_cancel(struct eb_client *c, int fd, short events)
{
	(void)c;
	(void)fd;
	(void)events;
}

int __wrap_eb_client_fd(const struct eb_client *c);
int __wrap_eb_client_fd(const struct eb_client *c)
{
	(void)c;
	return fake.connected ? fake.up[0] : -EBADF;
}

const char *__wrap_eb_client_broker(const struct eb_client *c);
const char *__wrap_eb_client_broker(const struct eb_client *c)
{
	(void)c;
	return "unix:/fake";
}

const char *__wrap_eb_client_last_error(const struct eb_client *c);
const char *__wrap_eb_client_last_error(const struct eb_client *c)
{
	(void)c;
	return "FORBIDDEN: fake";
}

/* Runs the thread to its end; what the loop heard, one letter a note (D data, F done, C
 * connected, X failed), and the last FAILED's errno and text. */
static void run(const struct answer *a, size_t n, char *ret_notes, size_t size, int *ret_errno,
                char *ret_text)
{
	static uint8_t buf[UP_NOTE_MAX];
	struct up_thread t = {.client = client};
	int sv[2];
	size_t k = 0;
	ssize_t len;

	fake.answers = a;
	fake.n_answers = n;
	assert_return_code(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), errno);
	fake.loop_fd = sv[0];
	t.fd = sv[1];
	loop_says(256, 1);
	/* A thread that waits for what never comes is a failure too: SIGALRM ends the test. */
	alarm(10);
	assert_null(upstream_thread(&t));
	alarm(0);
	while ((len = recv(sv[0], buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
		struct up_note h;

		assert_true((size_t)len >= sizeof(h));
		memcpy(&h, buf, sizeof(h));
		assert_int_equal(h.len, (size_t)len - sizeof(h));
		assert_true(k + 1 < size);
		switch ((enum up_note_type)h.type) {
		case UP_NOTE_DATA:
			assert_int_equal(buf[sizeof(h)], 0xa5);
			ret_notes[k++] = 'D';
			break;
		case UP_NOTE_DONE:
			ret_notes[k++] = 'F';
			break;
		case UP_NOTE_CONNECTED:
			assert_string_equal(h.text, "unix:/fake");
			ret_notes[k++] = 'C';
			break;
		case UP_NOTE_FAILED:
			ret_notes[k++] = 'X';
			*ret_errno = (int)h.bits;
			memcpy(ret_text, h.text, sizeof(h.text));
			break;
		}
	}
	ret_notes[k] = '\0';
	/* The thread shut its end as it ended: the loop sees EOF. */
	assert_int_equal(len, 0);
	close(sv[0]);
	close(sv[1]);
}

static int setup(void **state)
{
	(void)state;
	fake = (struct fake){.loop_fd = -EBADF};
	assert_return_code(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fake.up), errno);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	close(fake.up[0]);
	close(fake.up[1]);
	return 0;
}

/* A DRAW of 256 bits: 32 bytes asked, two DATA of 128 bits each, DONE. New ids come from the
 * loop while the first DATA is on its way: the connection goes, and the second GET goes on a
 * new one whose HELLO says them. */
static void test_new_ids_between_gets(void **state)
{
	static const struct answer a[] = {
	    {.len = 16, .bits = 128, .new_id = 7},
	    {.len = 16, .bits = 128, .end = true},
	};
	char notes[16], text[EB_TEXT_MAX + 64] = "";
	int err = 0;

	(void)state;
	run(a, ELEMENTSOF(a), notes, sizeof(notes), &err, text);
	assert_string_equal(notes, "CDCDF");
	assert_int_equal(fake.connects, 2);
	assert_int_equal(fake.hello_id[0], 1);
	assert_int_equal(fake.hello_id[1], 7);
	assert_int_equal(fake.n_asked, 2);
	assert_int_equal(fake.asked_on[0], 1);
	assert_int_equal(fake.asked_on[1], 2);
}

/* New ids once the draw is done: a HELLO with them all the same, though there is nothing to ask
 * for (a cycle is for the upstream to see now, not at the next refill). */
static void test_new_ids_when_idle(void **state)
{
	static const struct answer a[] = {{.len = 32, .bits = 256, .new_id = 7}};
	char notes[16], text[EB_TEXT_MAX + 64] = "";
	int err = 0;

	(void)state;
	fake.end_at_connect = 2;
	run(a, ELEMENTSOF(a), notes, sizeof(notes), &err, text);
	assert_string_equal(notes, "CDF");
	assert_int_equal(fake.connects, 2);
	assert_int_equal(fake.hello_id[1], 7);
	assert_int_equal(fake.n_asked, 1);
}

/* A refusal at connect is one FAILED note with its errno and the upstream's words, and is retried
 * after the back-off (at least half its first 1 s): an upstream's administrator may fix it. */
static void test_refusal_retried(void **state)
{
	static const struct answer a[] = {{.len = 32, .bits = 256, .end = true}};
	char notes[16], text[EB_TEXT_MAX + 64] = "";
	int err = 0;
	uint64_t t0 = eb_now_ms();

	(void)state;
	fake.connect_fails = 1;
	fake.connect_error = -EACCES;
	run(a, ELEMENTSOF(a), notes, sizeof(notes), &err, text);
	assert_string_equal(notes, "XCDF");
	assert_int_equal(err, EACCES);
	assert_string_equal(text, "FORBIDDEN: fake");
	assert_int_equal(fake.connects, 1);
	assert_true(eb_now_ms() - t0 >= 500);
}

/* The upstream closes the connection while there is nothing to draw (its broker was killed): the
 * loop hears it at once, with a reason, and a connection is tried right away to know more, which
 * is told as connected once the upstream has said WELCOME, though nothing is asked. */
static void test_hang_up_while_idle(void **state)
{
	static const struct answer a[] = {{.len = 32, .bits = 256, .hang_up = true}};
	char notes[16], text[EB_TEXT_MAX + 64] = "";
	int err = 0;
	uint64_t t0 = eb_now_ms();

	(void)state;
	fake.end_at_connect = 2;
	run(a, ELEMENTSOF(a), notes, sizeof(notes), &err, text);
	assert_string_equal(notes, "CDFXC");
	assert_int_equal(err, ECONNRESET);
	assert_string_equal(text, "the upstream closed the connection");
	assert_int_equal(fake.connects, 2);
	assert_int_equal(fake.n_asked, 1);
	/* Not after a probe's rest: at once. */
	assert_true(eb_now_ms() - t0 < 4000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_new_ids_between_gets, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_new_ids_when_idle, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_refusal_retried, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hang_up_while_idle, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
