/* SPDX-License-Identifier: MIT */
/* Tests for sinks/kernel.c: what exactly reaches the kernel's ioctls (link seam: ioctl), the
 * reseed that follows a late seed, the release check that picks the 5.18 path, and the suspend
 * test. */
#include <errno.h>
#include <linux/random.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>

#include <cmocka.h>

#include "../sinks/kernel.h"
#include "proto.h"

static unsigned n_ioctl;
static int last_fd;
static unsigned long last_request;
static int last_count, last_size;
static uint8_t last_buf[EB_DATA_MAX];
static int fail_errno;

int __wrap_ioctl(int fd, unsigned long request, ...);
int __wrap_ioctl(int fd, unsigned long request, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, request);
	arg = va_arg(ap, void *);
	va_end(ap);
	n_ioctl++;
	last_fd = fd;
	last_request = request;
	if (request == RNDADDENTROPY) {
		const struct rand_pool_info *info = arg;

		last_count = info->entropy_count;
		last_size = info->buf_size;
		memcpy(last_buf, info->buf, (size_t)info->buf_size);
	} else if (request == RNDGETENTCNT) {
		*(int *)arg = 193;
	}
	if (fail_errno) {
		errno = fail_errno;
		return -1;
	}
	return 0;
}

static int setup(void **state)
{
	(void)state;
	n_ioctl = 0;
	last_request = 0;
	last_count = last_size = -1;
	fail_errno = 0;
	return 0;
}

static void test_add_entropy_passes_exact_credit(void **state)
{
	uint8_t buf[32];

	(void)state;
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7 + 1);
	assert_int_equal(eb_kernel_add_entropy(42, buf, sizeof(buf), 256), 0);
	assert_int_equal(n_ioctl, 1);
	assert_int_equal(last_fd, 42);
	assert_int_equal(last_request, RNDADDENTROPY);
	assert_int_equal(last_count, 256);
	assert_int_equal(last_size, 32);
	assert_memory_equal(last_buf, buf, sizeof(buf));

	/* Less credit than bytes, and none: mixed in, credited as said. */
	assert_int_equal(eb_kernel_add_entropy(42, buf, 17, 5), 0);
	assert_int_equal(last_count, 5);
	assert_int_equal(last_size, 17);
	assert_int_equal(eb_kernel_add_entropy(42, buf, 32, 0), 0);
	assert_int_equal(last_count, 0);
	assert_int_equal(n_ioctl, 3);
}

static void test_add_entropy_refuses_overcredit(void **state)
{
	static uint8_t big[EB_DATA_MAX + 1];

	(void)state;
	/* The kernel would credit whatever entropy_count says; 8 bits a byte is the most. */
	assert_int_equal(eb_kernel_add_entropy(3, big, 32, 257), -EINVAL);
	assert_int_equal(eb_kernel_add_entropy(3, big, 0, 0), -EINVAL);
	assert_int_equal(eb_kernel_add_entropy(3, big, sizeof(big), 0), -EINVAL);
	assert_int_equal(n_ioctl, 0);
	assert_int_equal(eb_kernel_add_entropy(3, big, EB_DATA_MAX, 8 * EB_DATA_MAX), 0);
	assert_int_equal(last_size, EB_DATA_MAX);
	assert_int_equal(last_count, 8 * EB_DATA_MAX);
}

static void test_errors_are_negative_errno(void **state)
{
	uint8_t buf[8] = {0};
	int bits = -1;

	(void)state;
	fail_errno = EPERM;
	assert_int_equal(eb_kernel_add_entropy(3, buf, sizeof(buf), 64), -EPERM);
	fail_errno = ENODATA;
	assert_int_equal(eb_kernel_reseed(3), -ENODATA);
	assert_int_equal(last_request, RNDRESEEDCRNG);
	fail_errno = 0;
	assert_int_equal(eb_kernel_reseed(5), 0);
	assert_int_equal(last_fd, 5);
	assert_int_equal(eb_kernel_entropy_count(5, &bits), 0);
	assert_int_equal(last_request, RNDGETENTCNT);
	assert_int_equal(bits, 193);
	fail_errno = ENOTTY;
	bits = -1;
	assert_int_equal(eb_kernel_entropy_count(5, &bits), -ENOTTY);
	assert_int_equal(bits, -1); /* ret_* written only on success */
}

static void test_followup(void **state)
{
	enum eb_kernel_followup f = _EB_KERNEL_FOLLOWUP_INVALID;

	(void)state;
	/* Credited before init: the kernel initialised (or will) from a reseed that holds the
	 * bits; no ioctl, on any kernel. */
	assert_int_equal(eb_kernel_followup(7, false, true, &f), 0);
	assert_int_equal(f, EB_KERNEL_FOLLOWUP_NONE);
	assert_int_equal(eb_kernel_followup(7, false, false, &f), 0);
	assert_int_equal(f, EB_KERNEL_FOLLOWUP_NONE);
	assert_int_equal(n_ioctl, 0);

	/* Already initialised before 5.18: nothing asked, the CRNG's own reseed takes them. */
	assert_int_equal(eb_kernel_followup(7, true, false, &f), 0);
	assert_int_equal(f, EB_KERNEL_FOLLOWUP_SCHEDULED);
	assert_int_equal(n_ioctl, 0);

	/* Already initialised on 5.18+: exactly one RNDRESEEDCRNG, on the descriptor given. */
	assert_int_equal(eb_kernel_followup(7, true, true, &f), 0);
	assert_int_equal(f, EB_KERNEL_FOLLOWUP_RESEEDED);
	assert_int_equal(n_ioctl, 1);
	assert_int_equal(last_fd, 7);
	assert_int_equal(last_request, RNDRESEEDCRNG);

	/* A refused reseed is the caller's to report; *ret is left alone. */
	f = _EB_KERNEL_FOLLOWUP_INVALID;
	fail_errno = EPERM;
	assert_int_equal(eb_kernel_followup(7, true, true, &f), -EPERM);
	assert_int_equal(f, _EB_KERNEL_FOLLOWUP_INVALID);
	assert_int_equal(n_ioctl, 2);
}

static void test_release_is_modern(void **state)
{
	(void)state;
	assert_true(eb_kernel_release_is_modern("5.18.0"));
	assert_true(eb_kernel_release_is_modern("6.1.0-13-amd64"));
	assert_true(eb_kernel_release_is_modern("6.18.44-fc-v1098"));
	assert_true(eb_kernel_release_is_modern("10.0"));
	assert_false(eb_kernel_release_is_modern("5.17.15"));
	assert_false(eb_kernel_release_is_modern("5.15.0-91-generic"));
	assert_false(eb_kernel_release_is_modern("4.19.0-26-amd64"));
	assert_true(eb_kernel_release_is_modern("garbage"));
	assert_true(eb_kernel_release_is_modern(NULL));
}

static void test_suspended_between(void **state)
{
	const int64_t s = 1000000000;

	(void)state;
	assert_false(eb_kernel_suspended_between(5 * s, 5 * s, 2 * s));
	assert_false(eb_kernel_suspended_between(5 * s, 7 * s, 2 * s));
	assert_true(eb_kernel_suspended_between(5 * s, 7 * s + 1, 2 * s));
	assert_true(eb_kernel_suspended_between(0, 3600 * s, 2 * s));
	/* Never suspended: the live gap is zero, less the time between its two clock reads. */
	assert_true(eb_kernel_suspend_gap_ns() > -s / 10);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_add_entropy_passes_exact_credit, setup),
	    cmocka_unit_test_setup(test_add_entropy_refuses_overcredit, setup),
	    cmocka_unit_test_setup(test_errors_are_negative_errno, setup),
	    cmocka_unit_test_setup(test_followup, setup),
	    cmocka_unit_test(test_release_is_modern),
	    cmocka_unit_test(test_suspended_between),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
