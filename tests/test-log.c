/* SPDX-License-Identifier: MIT */
/* Where log lines go: journald's stream (with the "<N>" level prefix) when stderr is the stream
 * systemd named in $JOURNAL_STREAM, so that a process that has exited keeps its unit; stderr as
 * "program: message" when told "console". stderr is a socket pair of the test's own. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"

static int saved_stderr = -1;
static int reader = -1;

/* stderr becomes one end of a socket pair; $JOURNAL_STREAM names it when |journal|. */
static void redirect_stderr(bool journal)
{
	int sv[2];
	struct stat st;
	char env[64];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	saved_stderr = dup(STDERR_FILENO);
	assert_true(saved_stderr >= 0);
	assert_int_equal(dup2(sv[1], STDERR_FILENO), STDERR_FILENO);
	close(sv[1]);
	reader = sv[0];
	assert_int_equal(fstat(STDERR_FILENO, &st), 0);
	snprintf(env, sizeof(env), "%llu:%llu", (unsigned long long)st.st_dev,
	         (unsigned long long)st.st_ino);
	if (journal)
		assert_int_equal(setenv("JOURNAL_STREAM", env, 1), 0);
	else
		assert_int_equal(unsetenv("JOURNAL_STREAM"), 0);
}

/* What was written to stderr so far, stderr put back. */
static void take_stderr(char *buf, size_t size)
{
	ssize_t n;

	fflush(stderr);
	assert_int_equal(dup2(saved_stderr, STDERR_FILENO), STDERR_FILENO);
	close(saved_stderr);
	saved_stderr = -1;
	n = recv(reader, buf, size - 1, MSG_DONTWAIT);
	buf[n > 0 ? n : 0] = '\0';
	close(reader);
	reader = -1;
}

static int clean_env(void **state)
{
	(void)state;
	unsetenv("EB_LOG_TARGET");
	unsetenv("EB_LOG_LEVEL");
	unsetenv("JOURNAL_STREAM");
	return 0;
}

/* The checker's FILE:LINE line, as "systemctl status" must show it: on the stream, level 3. */
static void test_stream_line(void **state)
{
	char out[512];
	int r;

	(void)state;
	redirect_stderr(true);
	log_setup("/usr/sbin/eb-brokerd");
	errno = 0;
	r = log_error_errno(EINVAL, "%s:%d: unknown key 'rle'", "/etc/eb.conf", 12);
	log_info("configuration good");
	take_stderr(out, sizeof(out));
	assert_int_equal(r, -EINVAL);
	assert_int_equal(errno, 0);
	assert_string_equal(out, "<3>/etc/eb.conf:12: unknown key 'rle'\n"
	                         "<6>configuration good\n");
}

/* A line longer than the limit is cut, and still ends the stream's line. */
static void test_stream_long_line(void **state)
{
	static char big[4096], out[8192];
	size_t n;

	(void)state;
	memset(big, 'x', sizeof(big) - 1);
	redirect_stderr(true);
	log_setup("eb-test");
	log_warning("%s", big);
	take_stderr(out, sizeof(out));
	n = strlen(out);
	assert_true(n > 1000 && n < sizeof(big));
	assert_memory_equal(out, "<4>xxx", 6);
	assert_int_equal(out[n - 1], '\n');
	assert_null(memchr(out, '\n', n - 1));
}

/* A line with journal fields needs the native protocol: it never goes down the stream. */
static void test_fields_not_on_stream(void **state)
{
	char out[512];

	(void)state;
	redirect_stderr(true);
	log_setup("eb-test");
	log_struct(LOG_NOTICE, "EB_TEST_FIELD=1", "a structured line");
	take_stderr(out, sizeof(out));
	assert_null(strstr(out, "<5>"));
}

/* Not the stream, or told "console": "program: message" on stderr, no level prefix. */
static void test_console(void **state)
{
	char out[512];

	(void)state;
	redirect_stderr(false);
	log_setup("/usr/bin/eb-test");
	log_error("no broker at %s", "tcp://192.0.2.1:55225");
	take_stderr(out, sizeof(out));
	assert_string_equal(out, "eb-test: no broker at tcp://192.0.2.1:55225\n");

	redirect_stderr(true);
	setenv("EB_LOG_TARGET", "console", 1);
	log_setup("eb-test");
	log_notice("told console");
	take_stderr(out, sizeof(out));
	assert_string_equal(out, "eb-test: told console\n");
}

/* Below the level, nothing at all; debug when asked. */
static void test_level(void **state)
{
	char out[512];

	(void)state;
	redirect_stderr(true);
	log_setup("eb-test");
	log_debug("hidden");
	setenv("EB_LOG_LEVEL", "debug", 1);
	log_setup("eb-test");
	log_debug("shown");
	take_stderr(out, sizeof(out));
	assert_string_equal(out, "<7>shown\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_stream_line, clean_env),
	    cmocka_unit_test_setup(test_stream_long_line, clean_env),
	    cmocka_unit_test_setup(test_fields_not_on_stream, clean_env),
	    cmocka_unit_test_setup(test_console, clean_env),
	    cmocka_unit_test_setup(test_level, clean_env),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
