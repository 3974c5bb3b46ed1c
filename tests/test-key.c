/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "key.h"
#include "macro.h"

#define GOOD_HEX                                                                                   \
	"000102030405060708090a0b0c0d0e0f"                                                         \
	"F0E1D2C3B4A5968778695A4B3C2D1E0f"

static const uint8_t good_key[EB_KEY_SIZE] = {
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
    0xf0, 0xe1, 0xd2, 0xc3, 0xb4, 0xa5, 0x96, 0x87, 0x78, 0x69, 0x5a, 0x4b, 0x3c, 0x2d, 0x1e, 0x0f,
};

static char dir[] = "/tmp/test-key.XXXXXX";

static int setup(void **state)
{
	(void)state;
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[64];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* Writes content (len bytes) to a fresh file in dir with mode; returns its path (static). */
static const char *put(const char *name, const void *content, size_t len, mode_t mode)
{
	static char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	(void)unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, content, len), (ssize_t)len);
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
	return path;
}

static void expect_load(const char *content, size_t len, mode_t mode, int expected)
{
	uint8_t key[EB_KEY_SIZE];
	const char *p = put("k", content, len, mode);

	memset(key, 0xaa, sizeof(key));
	assert_int_equal(eb_key_load(p, key), expected);
	if (expected == 0)
		assert_memory_equal(key, good_key, sizeof(key));
	else
		for (size_t i = 0; i < sizeof(key); i++)
			assert_int_equal(key[i], 0xaa); /* untouched on failure */
}

static void test_good(void **state)
{
	(void)state;
	expect_load(GOOD_HEX "\n", 65, 0600, 0);
	expect_load(GOOD_HEX, 64, 0600, 0);
	expect_load(GOOD_HEX "\n", 65, 0400, 0);
	expect_load(GOOD_HEX "\n", 65, 0700, 0);
}

static void test_mode(void **state)
{
	(void)state;
	expect_load(GOOD_HEX "\n", 65, 0640, -EPERM);
	expect_load(GOOD_HEX "\n", 65, 0604, -EPERM);
	expect_load(GOOD_HEX "\n", 65, 0610, -EPERM);
	expect_load(GOOD_HEX "\n", 65, 0644, -EPERM);
	expect_load(GOOD_HEX "\n", 65, 0602, -EPERM);
}

static void test_length(void **state)
{
	(void)state;
	expect_load("", 0, 0600, -EBADMSG);
	expect_load(GOOD_HEX, 63, 0600, -EBADMSG);
	expect_load(GOOD_HEX "0", 65, 0600, -EBADMSG);
	expect_load(GOOD_HEX "00", 66, 0600, -EBADMSG);
	expect_load(GOOD_HEX "\n\n", 66, 0600, -EBADMSG);
	expect_load(GOOD_HEX "\r\n", 66, 0600, -EBADMSG);
	expect_load(GOOD_HEX " ", 65, 0600, -EBADMSG);
	expect_load(GOOD_HEX "\nx", 66, 0600, -EBADMSG);
	expect_load(GOOD_HEX "\n" GOOD_HEX "\n", 130, 0600, -EBADMSG);
	expect_load(GOOD_HEX "\0", 65, 0600, -EBADMSG);
}

static void test_bad_hex(void **state)
{
	static const char bad[] = {'g', 'G', ' ',        '\n',       ':', '/', '@',
	                           '`', 0,   (char)0xb0, (char)0xe1, 'x', '-', '+'};
	char buf[65];

	(void)state;
	for (size_t pos = 0; pos < 64; pos += 9)
		for (size_t i = 0; i < sizeof(bad); i++) {
			memcpy(buf, GOOD_HEX "\n", 65);
			buf[pos] = bad[i];
			expect_load(buf, 65, 0600, -EBADMSG);
		}
	/* Every byte value at one place: exactly the 22 hex digits decode. */
	for (unsigned c = 0; c < 256; c++) {
		uint8_t key[EB_KEY_SIZE];
		bool hex =
		    (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');

		memcpy(buf, GOOD_HEX "\n", 65);
		buf[63] = (char)c;
		assert_int_equal(eb_key_load(put("k", buf, 65, 0600), key), hex ? 0 : -EBADMSG);
		if (hex) {
			unsigned v = c <= '9' ? c - '0' : (c | 32) - 'a' + 10;
			assert_int_equal(key[31], v);
		}
	}
}

static void test_not_regular(void **state)
{
	char path[256];
	uint8_t key[EB_KEY_SIZE];

	(void)state;
	snprintf(path, sizeof(path), "%s/missing", dir);
	assert_int_equal(eb_key_load(path, key), -ENOENT);
	assert_int_equal(eb_key_load(dir, key), -EISDIR);

	snprintf(path, sizeof(path), "%s/fifo", dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(eb_key_load(path, key), -EBADMSG);

	/* A symlink is not followed, even to a good key. */
	put("target", GOOD_HEX "\n", 65, 0600);
	snprintf(path, sizeof(path), "%s/link", dir);
	assert_int_equal(symlink("target", path), 0);
	assert_int_equal(eb_key_load(path, key), -ELOOP);
}

static void test_generate(void **state)
{
	uint8_t a[EB_KEY_SIZE], b[EB_KEY_SIZE], zero[EB_KEY_SIZE] = {};
	char pa[256], pb[256], content[80];
	struct stat st;
	ssize_t n;
	int fd;

	(void)state;
	snprintf(pa, sizeof(pa), "%s/gen-a", dir);
	snprintf(pb, sizeof(pb), "%s/gen-b", dir);

	umask(0);
	assert_int_equal(eb_key_generate(pa), 0);
	assert_int_equal(eb_key_generate(pb), 0);
	umask(022);

	assert_int_equal(stat(pa, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(st.st_size, 65);

	fd = open(pa, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	n = read(fd, content, sizeof(content));
	close(fd);
	assert_int_equal(n, 65);
	assert_int_equal(content[64], '\n');
	for (int i = 0; i < 64; i++)
		assert_true((content[i] >= '0' && content[i] <= '9') ||
		            (content[i] >= 'a' && content[i] <= 'f'));

	assert_int_equal(eb_key_load(pa, a), 0);
	assert_int_equal(eb_key_load(pb, b), 0);
	assert_memory_not_equal(a, b, sizeof(a));
	assert_memory_not_equal(a, zero, sizeof(a));

	/* Round trip: the hex on disk is the key loaded. */
	for (int i = 0; i < EB_KEY_SIZE; i++) {
		char h[3] = {content[2 * i], content[2 * i + 1], 0};
		assert_int_equal(strtoul(h, NULL, 16), a[i]);
	}

	/* An existing file is never replaced, and is left as it was. */
	assert_int_equal(eb_key_generate(pa), -EEXIST);
	assert_int_equal(eb_key_load(pa, b), 0);
	assert_memory_equal(a, b, sizeof(a));

	/* Nor is a symlink followed to create a file elsewhere. */
	snprintf(pb, sizeof(pb), "%s/dangling", dir);
	assert_int_equal(symlink("nowhere", pb), 0);
	assert_int_equal(eb_key_generate(pb), -EEXIST);
	snprintf(pb, sizeof(pb), "%s/nowhere", dir);
	assert_int_equal(access(pb, F_OK), -1);

	snprintf(pb, sizeof(pb), "%s/no/such/dir", dir);
	assert_int_equal(eb_key_generate(pb), -ENOENT);
	assert_int_equal(eb_key_generate(""), -EINVAL);
}

static void test_default_path(void **state)
{
	_cleanup_free_ char *p = NULL;

	(void)state;
	assert_int_equal(unsetenv("CREDENTIALS_DIRECTORY"), 0);
	assert_null(eb_key_default_path());
	assert_int_equal(setenv("CREDENTIALS_DIRECTORY", "", 1), 0);
	assert_null(eb_key_default_path());
	assert_int_equal(setenv("CREDENTIALS_DIRECTORY", "relative", 1), 0);
	assert_null(eb_key_default_path());
	assert_int_equal(setenv("CREDENTIALS_DIRECTORY", "/run/credentials/x.service", 1), 0);
	p = eb_key_default_path();
	assert_non_null(p);
	assert_string_equal(p, "/run/credentials/x.service/eb.key");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_good),         cmocka_unit_test(test_mode),
	    cmocka_unit_test(test_length),       cmocka_unit_test(test_bad_hex),
	    cmocka_unit_test(test_not_regular),  cmocka_unit_test(test_generate),
	    cmocka_unit_test(test_default_path),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
