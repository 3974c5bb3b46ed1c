/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE 1 /* asprintf() */
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

/* The user and group the code under test believes it runs as; -1: the real ones. */
static uid_t fake_uid = (uid_t)-1;
static gid_t fake_gid = (gid_t)-1;

uid_t __real_geteuid(void);
uid_t __wrap_geteuid(void);
uid_t __wrap_geteuid(void)
{
	return fake_uid != (uid_t)-1 ? fake_uid : __real_geteuid();
}

gid_t __real_getegid(void);
gid_t __wrap_getegid(void);
gid_t __wrap_getegid(void)
{
	return fake_gid != (gid_t)-1 ? fake_gid : __real_getegid();
}

static void run_as(uid_t uid, gid_t gid)
{
	fake_uid = uid;
	fake_gid = gid;
}

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
	/* Root's group is no service's own: as root:root, group reading is refused. */
	run_as(0, 0);
	expect_load(GOOD_HEX "\n", 65, 0640, -EPERM);
	expect_load(GOOD_HEX "\n", 65, 0604, -EPERM);
	expect_load(GOOD_HEX "\n", 65, 0610, -EPERM);
	expect_load(GOOD_HEX "\n", 65, 0644, -EPERM);
	expect_load(GOOD_HEX "\n", 65, 0602, -EPERM);
	run_as((uid_t)-1, (gid_t)-1);
}

/* Service ids no account on the test machine has, so that messages show the numbers. */
#define SVC_UID  60998u
#define SVC_GID  60997u
#define OTHER_ID 60996u

/* path, as uid:gid with mode, loaded by a process running as SVC_UID:SVC_GID. */
static int load_as_service(const char *path, uid_t uid, gid_t gid, mode_t mode)
{
	uint8_t key[EB_KEY_SIZE];
	int r;

	assert_int_equal(chown(path, uid, gid), 0);
	assert_int_equal(chmod(path, mode), 0);
	run_as(SVC_UID, SVC_GID);
	r = eb_key_load(path, key);
	run_as((uid_t)-1, (gid_t)-1);
	return r;
}

/* A service's own group may read its key when root or the service owns it, as chrony keeps its
 * keys (root:_chrony 0640); any other group, other bits for the group, or others, may not. */
static void test_service_group(void **state)
{
	const char *p;

	(void)state;
	if (geteuid() != 0)
		skip(); /* files are given to other owners */
	p = put("svc", GOOD_HEX "\n", 65, 0600);
	assert_int_equal(load_as_service(p, 0, SVC_GID, 0640), 0);
	assert_int_equal(load_as_service(p, SVC_UID, SVC_GID, 0640), 0);
	assert_int_equal(load_as_service(p, 0, SVC_GID, 0440), 0);
	assert_int_equal(load_as_service(p, SVC_UID, OTHER_ID, 0600), 0);
	assert_int_equal(load_as_service(p, OTHER_ID, SVC_GID, 0640), -EPERM);
	assert_int_equal(load_as_service(p, 0, OTHER_ID, 0640), -EPERM);
	assert_int_equal(load_as_service(p, 0, SVC_GID, 0660), -EPERM);
	assert_int_equal(load_as_service(p, 0, SVC_GID, 0650), -EPERM);
	assert_int_equal(load_as_service(p, 0, SVC_GID, 0644), -EPERM);
	assert_int_equal(load_as_service(p, 0, SVC_GID, 0604), -EPERM);
}

/* eb_key_describe_error() as SVC_UID:SVC_GID; fmt takes the path three times. */
#define expect_describe(path, r, fmt)                                                              \
	do {                                                                                       \
		_cleanup_free_ char *got = NULL, *want = NULL;                                     \
                                                                                                   \
		run_as(SVC_UID, SVC_GID);                                                          \
		got = eb_key_describe_error(path, r);                                              \
		run_as((uid_t)-1, (gid_t)-1);                                                      \
		assert_true(asprintf(&want, fmt, path, path, path) > 0);                           \
		assert_non_null(got);                                                              \
		assert_string_equal(got, want);                                                    \
	} while (0)

/* The refusal names the file, its owner, group and mode, who reads it, and the fix. */
static void test_describe(void **state)
{
	const char *p;

	(void)state;
	if (geteuid() != 0)
		skip();
	p = put("svc", GOOD_HEX "\n", 65, 0600);
	assert_int_equal(load_as_service(p, 0, OTHER_ID, 0640), -EPERM);
	expect_describe(p, -EPERM,
	                "key file %s is root:60996 0640 and this runs as 60998:60997: others could "
	                "read it; run \"chown root:60997 %s && chmod 0640 %s\"");
	/* root:root 0600, what "chmod 0600" alone used to leave: the service cannot read it. */
	assert_int_equal(chown(p, 0, 0), 0);
	assert_int_equal(chmod(p, 0600), 0);
	expect_describe(
	    p, -EACCES,
	    "key file %s is root:root 0600 and this runs as 60998:60997: it cannot read "
	    "it; run \"chown root:60997 %s && chmod 0640 %s\"");
	/* The service's own file: 0600 is the fix. */
	assert_int_equal(load_as_service(p, SVC_UID, SVC_GID, 0644), -EPERM);
	expect_describe(
	    p, -EPERM,
	    "key file %s is 60998:60997 0644 and this runs as 60998:60997: others could "
	    "read it; run \"chown 60998 %s && chmod 0600 %s\"");
}

static void test_generate_owned(void **state)
{
	char path[256];
	struct stat st;

	(void)state;
	if (geteuid() != 0)
		skip();
	snprintf(path, sizeof(path), "%s/owned", dir);
	assert_int_equal(eb_key_generate_owned(path, 0, SVC_GID, true), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_uid, 0);
	assert_int_equal(st.st_gid, SVC_GID);
	assert_int_equal(st.st_mode & 07777, 0640);
	assert_int_equal(load_as_service(path, 0, SVC_GID, 0640), 0);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(eb_key_generate_owned(path, SVC_UID, (gid_t)-1, false), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_uid, SVC_UID);
	assert_int_equal(st.st_mode & 07777, 0600);
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
	    cmocka_unit_test(test_default_path), cmocka_unit_test(test_service_group),
	    cmocka_unit_test(test_describe),     cmocka_unit_test(test_generate_owned),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
