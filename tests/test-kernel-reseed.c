/* SPDX-License-Identifier: MIT */
/* Tests for sinks/kernel-reseed.c, what --reseed does after the broker's bits are in: the forced
 * reseed (link seam: ioctl), the seed files rewritten, the generation bumped, and a failure at
 * any step reported as one, the generation left where it was. */
#include <errno.h>
#include <fcntl.h>
#include <linux/random.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cmocka.h>

#include "../sinks/kernel-reseed.h"
#include "../sinks/kernel.h"

static unsigned n_reseed;
static int reseed_errno;

int __wrap_ioctl(int fd, unsigned long request, ...);
int __wrap_ioctl(int fd, unsigned long request, ...)
{
	(void)fd;
	if (request != RNDRESEEDCRNG)
		fail_msg("unexpected ioctl %lu", request);
	n_reseed++;
	if (reseed_errno) {
		errno = reseed_errno;
		return -1;
	}
	return 0;
}

static char dir[64], seed[128], gen[128];

static int setup(void **state)
{
	(void)state;
	n_reseed = 0;
	reseed_errno = 0;
	snprintf(dir, sizeof(dir), "/tmp/test-kernel-reseed.XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(seed, sizeof(seed), "%s/random-seed", dir);
	/* Its directory does not exist yet, as /run/entropy-broker before the first reseed. */
	snprintf(gen, sizeof(gen), "%s/run/generation", dir);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static size_t read_file(const char *path, void *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	assert_true(fd >= 0);
	n = read(fd, buf, size);
	close(fd);
	assert_true(n >= 0);
	return (size_t)n;
}

static void test_success(void **state)
{
	const char *files[] = {seed, "/nonexistent/seed"};
	uint8_t old[512], now[1024];
	char text[64];
	const char *step = NULL;
	struct stat st;
	uint64_t g = 0;

	(void)state;
	memset(old, 0xa5, sizeof(old));
	write_file(seed, old, sizeof(old));
	assert_int_equal(kernel_reseed_finish(-1, files, 2, gen, &g, &step), 0);
	assert_int_equal(n_reseed, 1);
	assert_int_equal(g, 1);
	/* The seed file: the same size, new bytes, 0600; the absent one is left absent. */
	assert_int_equal(read_file(seed, now, sizeof(now)), sizeof(old));
	assert_memory_not_equal(now, old, sizeof(old));
	assert_int_equal(stat(seed, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(access("/nonexistent/seed", F_OK), -1);
	memset(text, 0, sizeof(text));
	read_file(gen, text, sizeof(text) - 1);
	assert_string_equal(text, "1\n");
	assert_int_equal(stat(gen, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);
	/* A second copy's reseed: the generation goes on. */
	assert_int_equal(kernel_reseed_finish(-1, files, 1, gen, &g, &step), 0);
	assert_int_equal(g, 2);
	memset(text, 0, sizeof(text));
	read_file(gen, text, sizeof(text) - 1);
	assert_string_equal(text, "2\n");
}

/* Without CAP_SYS_ADMIN the kernel refuses RNDRESEEDCRNG: a failure, named, and nothing after
 * it is done (the generation would tell applications the kernel is fresh). */
static void test_reseed_refused(void **state)
{
	const char *files[] = {seed};
	uint8_t old[64], now[64];
	const char *step = NULL;
	uint64_t g = 77;

	(void)state;
	memset(old, 0x5a, sizeof(old));
	write_file(seed, old, sizeof(old));
	reseed_errno = EPERM;
	assert_int_equal(kernel_reseed_finish(-1, files, 1, gen, &g, &step), -EPERM);
	assert_string_equal(step, "RNDRESEEDCRNG");
	assert_int_equal(g, 77);
	assert_int_equal(access(gen, F_OK), -1);
	assert_int_equal(read_file(seed, now, sizeof(now)), sizeof(old));
	assert_memory_equal(now, old, sizeof(old));
	/* Before init the kernel answers ENODATA: that is no reseed either. */
	reseed_errno = ENODATA;
	assert_int_equal(kernel_reseed_finish(-1, files, 1, gen, &g, &step), -ENODATA);
	assert_string_equal(step, "RNDRESEEDCRNG");
}

/* A generation file that is not a number this program wrote is not overwritten, and the step
 * says so; a seed file that is a directory fails its step. */
static void test_bad_files(void **state)
{
	const char *files[] = {dir};
	const char *step = NULL;
	uint64_t g = 0;

	(void)state;
	assert_int_equal(kernel_reseed_finish(-1, files, 1, gen, &g, &step), -EISDIR);
	assert_string_equal(step, "seed file");
	assert_int_equal(access(gen, F_OK), -1);
	snprintf(gen, sizeof(gen), "%s/generation", dir);
	write_file(gen, "twelve\n", 7);
	assert_int_equal(kernel_reseed_finish(-1, files, 0, gen, &g, &step), -EBADMSG);
	assert_string_equal(step, "generation");
	write_file(gen, "41\n", 3);
	assert_int_equal(kernel_reseed_finish(-1, files, 0, gen, &g, &step), 0);
	assert_int_equal(g, 42);
}

/* The rewritten seed carries systemd's mark, so that systemd-random-seed (with
 * SYSTEMD_RANDOM_SEED_CREDIT=1) credits it at the next boot as it would a seed of its own; the
 * generation file does not. Run in the build directory, which is on a disk file system more often
 * than /tmp; skipped where the file system keeps no user xattrs. */
static void test_creditable_mark(void **state)
{
	const char *files[] = {seed};
	char dir2[64], mark[8], cmd[128];
	const char *step = NULL;
	uint8_t old[512];
	uint64_t g = 0;
	ssize_t n;

	(void)state;
	snprintf(dir2, sizeof(dir2), "test-kernel-reseed.XXXXXX");
	assert_non_null(mkdtemp(dir2));
	snprintf(seed, sizeof(seed), "%s/random-seed", dir2);
	memset(old, 0xa5, sizeof(old));
	write_file(seed, old, sizeof(old));
	if (setxattr(seed, "user.probe", "1", 1, 0) < 0) {
		assert_int_equal(errno, EOPNOTSUPP);
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir2);
		assert_int_equal(system(cmd), 0);
		skip();
	}
	assert_int_equal(removexattr(seed, "user.probe"), 0);
	assert_int_equal(kernel_reseed_finish(-1, files, 1, gen, &g, &step), 0);
	n = getxattr(seed, "user.random-seed-creditable", mark, sizeof(mark));
	assert_int_equal(n, 1);
	assert_memory_equal(mark, "1", 1);
	/* Only a seed file is marked: the generation is no seed. */
	assert_int_equal(getxattr(gen, "user.random-seed-creditable", mark, sizeof(mark)), -1);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir2);
	assert_int_equal(system(cmd), 0);
}

/* The trigger's line, and lines that only look like it. */
static void test_fork_record(void **state)
{
	static const char fork[] = "6,1234,5678901,-;random: crng reseeded due to virtual machine "
				   "fork\n";
	static const char *const not_fork[] = {
	    "6,1,2,-;random: crng init done\n",
	    "4,1,2,-;audit: comm=\"x\" random: crng reseeded due to virtual machine fork\n",
	    "6,1,2,-;random: crng reseeded due to virtual machine\n",
	    "random: crng reseeded due to virtual machine fork\n",
	    "6,1,2,-;other\n SUBSYSTEM=random: crng reseeded due to virtual machine fork\n",
	};

	(void)state;
	assert_true(kernel_reseed_is_fork_record(fork, sizeof(fork) - 1));
	assert_false(kernel_reseed_is_fork_record(fork, 20));
	for (size_t i = 0; i < sizeof(not_fork) / sizeof(not_fork[0]); i++)
		assert_false(kernel_reseed_is_fork_record(not_fork[i], strlen(not_fork[i])));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_success, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reseed_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_files, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_creditable_mark, setup, teardown),
	    cmocka_unit_test(test_fork_record),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
