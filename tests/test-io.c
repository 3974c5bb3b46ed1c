/* SPDX-License-Identifier: MIT */
/* Tests for shared/io.c's eb_read_all(), with read(2) doubled (-Wl,--wrap=read) by a script of
 * what each call returns: short reads joined up, EINTR retried, the end of the input as a short
 * count, an error as its negative errno. One test reads a real pipe, unwrapped. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "io.h"
#include "macro.h"

#define FAKE_FD 1000

/* One read(2) call: at most n bytes (0: end of input), or -1 with err. */
struct step {
	ssize_t n;
	int err;
};

static struct {
	const struct step *steps;
	size_t n_steps, at;
	uint8_t next; /* the byte value the fake input continues with */
} script;

ssize_t __real_read(int fd, void *buf, size_t len);
ssize_t __wrap_read(int fd, void *buf, size_t len);
ssize_t __wrap_read(int fd, void *buf, size_t len)
{
	const struct step *s;
	uint8_t *p = buf;

	if (fd != FAKE_FD)
		return __real_read(fd, buf, len);
	assert_true(script.at < script.n_steps); /* no read past the script */
	s = &script.steps[script.at++];
	if (s->n < 0) {
		errno = s->err;
		return -1;
	}
	len = MIN(len, (size_t)s->n);
	for (size_t i = 0; i < len; i++)
		p[i] = script.next++;
	return (ssize_t)len;
}

static void run(const struct step *steps, size_t n_steps)
{
	script.steps = steps;
	script.n_steps = n_steps;
	script.at = 0;
	script.next = 0;
}

/* The bytes 0, 1, 2 ... in order: nothing lost or doubled where short reads join. */
static void assert_counting(const uint8_t *buf, size_t n)
{
	for (size_t i = 0; i < n; i++)
		assert_int_equal(buf[i], (uint8_t)i);
}

static void test_short_reads_join(void **state)
{
	static const struct step steps[] = {{3, 0}, {1, 0}, {100, 0}};
	uint8_t buf[20];

	(void)state;
	run(steps, ELEMENTSOF(steps));
	assert_int_equal(eb_read_all(FAKE_FD, buf, sizeof(buf)), 20);
	assert_int_equal(script.at, 3);
	assert_counting(buf, sizeof(buf));
}

static void test_eintr_retried(void **state)
{
	static const struct step steps[] = {{-1, EINTR}, {5, 0}, {-1, EINTR}, {-1, EINTR}, {5, 0}};
	uint8_t buf[10];

	(void)state;
	run(steps, ELEMENTSOF(steps));
	assert_int_equal(eb_read_all(FAKE_FD, buf, sizeof(buf)), 10);
	assert_int_equal(script.at, 5);
	assert_counting(buf, sizeof(buf));
}

/* The end of the input before len is a short count, and no read after it. */
static void test_eof_short_count(void **state)
{
	static const struct step steps[] = {{4, 0}, {-1, EINTR}, {3, 0}, {0, 0}};
	uint8_t buf[16];

	(void)state;
	run(steps, ELEMENTSOF(steps));
	assert_int_equal(eb_read_all(FAKE_FD, buf, sizeof(buf)), 7);
	assert_int_equal(script.at, 4);
	assert_counting(buf, 7);
}

static void test_eof_at_once(void **state)
{
	static const struct step steps[] = {{0, 0}};
	uint8_t buf[4];

	(void)state;
	run(steps, ELEMENTSOF(steps));
	assert_int_equal(eb_read_all(FAKE_FD, buf, sizeof(buf)), 0);
}

/* An error after some bytes is the error, not the count. */
static void test_error_after_bytes(void **state)
{
	static const struct step steps[] = {{2, 0}, {-1, EIO}};
	uint8_t buf[8];

	(void)state;
	run(steps, ELEMENTSOF(steps));
	assert_int_equal(eb_read_all(FAKE_FD, buf, sizeof(buf)), -EIO);
	assert_int_equal(script.at, 2);
}

static void test_zero_length_reads_nothing(void **state)
{
	uint8_t buf[1];

	(void)state;
	run(NULL, 0);
	assert_int_equal(eb_read_all(FAKE_FD, buf, 0), 0);
	assert_int_equal(script.at, 0);
}

/* The real read(2) on a pipe: what was written, then the end when the writer closes. */
static void test_real_pipe(void **state)
{
	uint8_t out[64], in[100];
	int p[2];

	(void)state;
	for (size_t i = 0; i < sizeof(out); i++)
		out[i] = (uint8_t)(i * 7);
	assert_int_equal(pipe(p), 0);
	assert_int_equal(eb_write_all(p[1], out, 30), 0);
	assert_int_equal(eb_write_all(p[1], out + 30, 34), 0);
	close(p[1]);
	assert_int_equal(eb_read_all(p[0], in, sizeof(in)), 64);
	assert_memory_equal(in, out, sizeof(out));
	close(p[0]);
	assert_int_equal(eb_read_all(-1, in, sizeof(in)), -EBADF);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_short_reads_join),
	    cmocka_unit_test(test_eintr_retried),
	    cmocka_unit_test(test_eof_short_count),
	    cmocka_unit_test(test_eof_at_once),
	    cmocka_unit_test(test_error_after_bytes),
	    cmocka_unit_test(test_zero_length_reads_nothing),
	    cmocka_unit_test(test_real_pipe),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
