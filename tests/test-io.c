/* SPDX-License-Identifier: MIT */
/* Tests for shared/io.c's eb_read_all(), with read(2) doubled (-Wl,--wrap=read) by a script of
 * what each call returns: short reads joined up, EINTR retried, the end of the input as a short
 * count, an error as its negative errno. One test reads a real pipe, unwrapped; eb_replace_file()
 * is tested on real files in a directory of the test's own. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* The directory's entries but . and ..: what a failed or finished replacement left there. */
static unsigned entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	unsigned n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(d);
	return n;
}

static void assert_file(const char *path, const char *want)
{
	char got[64];
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t k;

	assert_true(fd >= 0);
	k = eb_read_all(fd, got, sizeof(got));
	close(fd);
	assert_int_equal(k, strlen(want));
	assert_memory_equal(got, want, (size_t)k);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
}

/* A mark that sees the new file whole, and then fails or not as told. */
static int mark_calls, mark_result;

static int mark(int fd, const char *path)
{
	struct stat st;

	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, 9); /* "head:body": every piece is in */
	assert_non_null(strstr(path, "/file"));
	mark_calls++;
	return mark_result;
}

static void test_replace_file(void **state)
{
	char dir[] = "test-io-XXXXXX", path[64], missing[96];
	const struct iovec two[] = {{(void *)"head:", 5}, {(void *)"body", 4}};
	mode_t old_umask;

	(void)state;
	assert_non_null(mkdtemp(dir)); /* in the test's working directory */
	snprintf(path, sizeof(path), "%s/file", dir);

	/* A new file, from pieces, 0600 whatever the umask lets through. */
	old_umask = umask(0);
	assert_int_equal(eb_replace_file(path, two, ELEMENTSOF(two), NULL), 0);
	umask(old_umask);
	assert_file(path, "head:body");

	/* An existing one replaced whole, with nothing left beside it. */
	assert_int_equal(eb_replace_file(path, &(struct iovec){(void *)"new", 3}, 1, NULL), 0);
	assert_file(path, "new");
	assert_int_equal(entries(dir), 1);

	/* The mark is called on the new file, before it replaces the old; its error fails the
	 * whole and leaves the old file. */
	mark_result = 0;
	assert_int_equal(eb_replace_file(path, two, ELEMENTSOF(two), mark), 0);
	assert_int_equal(mark_calls, 1);
	assert_file(path, "head:body");
	assert_int_equal(eb_replace_file(path, &(struct iovec){(void *)"new", 3}, 1, NULL), 0);
	mark_result = -EIO;
	assert_int_equal(eb_replace_file(path, two, ELEMENTSOF(two), mark), -EIO);
	assert_int_equal(mark_calls, 2);
	assert_file(path, "new");
	assert_int_equal(entries(dir), 1);

	/* No pieces: an empty file. */
	assert_int_equal(eb_replace_file(path, NULL, 0, NULL), 0);
	assert_file(path, "");

	/* A directory that is not there: the errno, and nothing made. */
	snprintf(missing, sizeof(missing), "%s/none/file", dir);
	assert_int_equal(eb_replace_file(missing, two, ELEMENTSOF(two), NULL), -ENOENT);

	/* A rename that cannot happen (path is a non-empty directory): the error, the old entry as
	 * it was, and the temporary file gone. */
	snprintf(missing, sizeof(missing), "%s/sub", dir);
	assert_int_equal(mkdir(missing, 0700), 0);
	snprintf(missing, sizeof(missing), "%s/sub/x", dir);
	assert_int_equal(eb_replace_file(missing, two, 1, NULL), 0);
	snprintf(missing, sizeof(missing), "%s/sub", dir);
	assert_true(eb_replace_file(missing, two, 1, NULL) < 0);
	assert_int_equal(entries(dir), 2);

	assert_int_equal(eb_fsync_parent(path), 0);
	assert_int_equal(eb_fsync_parent("relative"), 0);

	snprintf(missing, sizeof(missing), "%s/sub/x", dir);
	unlink(missing);
	snprintf(missing, sizeof(missing), "%s/sub", dir);
	rmdir(missing);
	unlink(path);
	rmdir(dir);
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
	    cmocka_unit_test(test_replace_file),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
