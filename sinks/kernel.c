/* SPDX-License-Identifier: MIT */
#include "kernel.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/random.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/utsname.h>
#include <time.h>

#include "macro.h"
#include "proto.h"

int eb_kernel_open(int *ret_fd)
{
	int fd = open("/dev/random", O_RDONLY | O_CLOEXEC | O_NOCTTY);

	if (fd < 0)
		return negative_errno();
	*ret_fd = fd;
	return 0;
}

int eb_kernel_add_entropy(int fd, const void *buf, size_t len, uint32_t credit_bits)
{
	_cleanup_free_ struct rand_pool_info *info = NULL;
	int r;

	/* The ceiling is the protocol's: no DATA frame carries more. */
	if (len == 0 || len > EB_DATA_MAX || credit_bits > 8 * (uint64_t)len)
		return -EINVAL;
	info = malloc(sizeof(*info) + len);
	if (!info)
		return -ENOMEM;
	info->entropy_count = (int)credit_bits;
	info->buf_size = (int)len;
	memcpy(info->buf, buf, len);
	r = ioctl(fd, RNDADDENTROPY, info);
	r = r < 0 ? negative_errno() : 0;
	explicit_bzero(info->buf, len);
	return r;
}

int eb_kernel_reseed(int fd)
{
	return ioctl(fd, RNDRESEEDCRNG) < 0 ? negative_errno() : 0;
}

int eb_kernel_followup(int fd, bool ready_before, bool modern, enum eb_kernel_followup *ret)
{
	int r;

	if (!ready_before) {
		*ret = EB_KERNEL_FOLLOWUP_NONE;
		return 0;
	}
	/* Before 5.18 the credited bits stay counted in the input pool until the CRNG's own
	 * reseed takes them; the ioctl is what 5.18 made the way to do it at once. */
	if (!modern) {
		*ret = EB_KERNEL_FOLLOWUP_SCHEDULED;
		return 0;
	}
	r = eb_kernel_reseed(fd);
	if (r < 0)
		return r;
	*ret = EB_KERNEL_FOLLOWUP_RESEEDED;
	return 0;
}

int eb_kernel_entropy_count(int fd, int *ret_bits)
{
	int bits;

	if (ioctl(fd, RNDGETENTCNT, &bits) < 0)
		return negative_errno();
	*ret_bits = bits;
	return 0;
}

int eb_kernel_wait_writable(int fd, int timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	int r;

	r = poll(&p, 1, timeout_ms);
	if (r < 0)
		return negative_errno();
	return r > 0 && (p.revents & POLLOUT);
}

int eb_kernel_crng_ready(void)
{
	uint8_t b;
	ssize_t k;

	do
		k = getrandom(&b, 1, GRND_NONBLOCK);
	while (k < 0 && errno == EINTR);
	explicit_bzero(&b, sizeof(b));
	if (k < 0)
		return errno == EAGAIN ? 0 : negative_errno();
	return 1;
}

bool eb_kernel_release_is_modern(const char *release)
{
	unsigned major, minor;

	if (!release || sscanf(release, "%u.%u", &major, &minor) != 2)
		return true;
	return major > 5 || (major == 5 && minor >= 18);
}

bool eb_kernel_is_modern(void)
{
	struct utsname u;

	if (uname(&u) < 0)
		return true;
	return eb_kernel_release_is_modern(u.release);
}

bool eb_kernel_suspended_between(int64_t gap_before_ns, int64_t gap_now_ns, int64_t slack_ns)
{
	return gap_now_ns - gap_before_ns > slack_ns;
}

int64_t eb_kernel_suspend_gap_ns(void)
{
	struct timespec b, m;

	/* Read the monotonic clock second: a preemption between the two reads can only make the
	 * gap look smaller, never invent a suspend. */
	clock_gettime(CLOCK_BOOTTIME, &b);
	clock_gettime(CLOCK_MONOTONIC, &m);
	return ((int64_t)b.tv_sec - m.tv_sec) * 1000000000 + (b.tv_nsec - m.tv_nsec);
}
