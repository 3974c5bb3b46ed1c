/* SPDX-License-Identifier: MIT */
/* Link seams for eb-sink-kernel-seam: the real program with the kernel doubled, so the
 * integration tests and the benchmark run it against a live broker without CAP_SYS_ADMIN and
 * see exactly what it asked of the kernel.
 *
 *   ioctl        RNDADDENTROPY, RNDRESEEDCRNG and RNDGETENTCNT are recorded, one line each, to
 *                $EB_SEAM_LOG ("<ms> RNDADDENTROPY entropy_count=N buf_size=M"), and succeed,
 *                or fail with errno $EB_SEAM_ERRNO; RNDRESEEDCRNG alone fails with errno
 *                $EB_SEAM_RESEED_ERRNO (a process without the right to it). Other requests
 *                reach the real ioctl.
 *   eb_kernel_crng_ready
 *                with $EB_SEAM_CRNG_FROM_COUNT set, the CRNG is initialised exactly while the
 *                recorded count is 256 or more, as on 5.18+ (start below it with
 *                $EB_SEAM_ENTCNT), and RNDRESEEDCRNG fails with ENODATA before that, as there.
 *   uname        $EB_SEAM_RELEASE replaces the release, to take the before-5.18 path.
 *   eb_kernel_wait_writable
 *                with $EB_SEAM_RELEASE set, /dev/random "wants writers" while the recorded
 *                count (from $EB_SEAM_ENTCNT, default 256, plus what RNDADDENTROPY credited)
 *                is below 256, as a pre-5.18 kernel with write_wakeup_threshold 256 would.
 *   clock_gettime
 *                with $EB_SEAM_SUSPEND_AT_MS set, CLOCK_BOOTTIME jumps an hour ahead of
 *                CLOCK_MONOTONIC that many ms after start, as after a suspend. */
#include <errno.h>
#include <fcntl.h>
#include <linux/random.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "kernel.h"

int __real_ioctl(int fd, unsigned long request, ...);
int __wrap_ioctl(int fd, unsigned long request, ...);
int __real_uname(struct utsname *u);
int __wrap_uname(struct utsname *u);
int __real_eb_kernel_wait_writable(int fd, int timeout_ms);
int __wrap_eb_kernel_wait_writable(int fd, int timeout_ms);
int __real_clock_gettime(clockid_t id, struct timespec *ts);
int __wrap_clock_gettime(clockid_t id, struct timespec *ts);
int __real_eb_kernel_crng_ready(void);
int __wrap_eb_kernel_crng_ready(void);

static int entcnt = -1;
static int64_t start_ms = -1;

/* A test's own knob: a bad value is the test's bug, so it aborts rather than guesses. */
static long long env_num(const char *name, long long def)
{
	const char *e = getenv(name);
	char *end;
	long long v;

	if (!e)
		return def;
	errno = 0;
	v = strtoll(e, &end, 10);
	if (errno != 0 || end == e || *end != '\0')
		abort();
	return v;
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	__real_clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

__attribute__((constructor)) static void seam_init(void)
{
	start_ms = mono_ms();
	entcnt = (int)env_num("EB_SEAM_ENTCNT", 256);
}

static void record(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void record(const char *fmt, ...)
{
	const char *path = getenv("EB_SEAM_LOG");
	char line[256];
	va_list ap;
	int n, fd;

	if (!path)
		return;
	n = snprintf(line, sizeof(line), "%lld ", (long long)(mono_ms() - start_ms));
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	line[n++] = '\n';
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		abort();
	if (write(fd, line, (size_t)n) != n)
		abort();
	close(fd);
}

static int seam_result(void)
{
	int e = (int)env_num("EB_SEAM_ERRNO", 0);

	if (e > 0) {
		errno = e;
		return -1;
	}
	return 0;
}

int __wrap_ioctl(int fd, unsigned long request, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, request);
	arg = va_arg(ap, void *);
	va_end(ap);
	switch (request) {
	case RNDADDENTROPY: {
		const struct rand_pool_info *info = arg;

		record("RNDADDENTROPY entropy_count=%d buf_size=%d", info->entropy_count,
		       info->buf_size);
		if (seam_result() < 0)
			return -1;
		entcnt += info->entropy_count;
		return 0;
	}
	case RNDRESEEDCRNG:
		record("RNDRESEEDCRNG");
		if (env_num("EB_SEAM_RESEED_ERRNO", 0) > 0) {
			errno = (int)env_num("EB_SEAM_RESEED_ERRNO", 0);
			return -1;
		}
		if (getenv("EB_SEAM_CRNG_FROM_COUNT") && entcnt < 256) {
			errno = ENODATA;
			return -1;
		}
		return seam_result();
	case RNDGETENTCNT:
		record("RNDGETENTCNT %d", entcnt);
		*(int *)arg = entcnt;
		return 0;
	default:
		return __real_ioctl(fd, request, arg);
	}
}

int __wrap_uname(struct utsname *u)
{
	const char *e = getenv("EB_SEAM_RELEASE");
	int r = __real_uname(u);

	if (r >= 0 && e)
		snprintf(u->release, sizeof(u->release), "%s", e);
	return r;
}

int __wrap_eb_kernel_wait_writable(int fd, int timeout_ms)
{
	struct timespec ts = {.tv_sec = timeout_ms / 1000,
	                      .tv_nsec = (timeout_ms % 1000) * 1000000L};

	if (!getenv("EB_SEAM_RELEASE"))
		return __real_eb_kernel_wait_writable(fd, timeout_ms);
	if (entcnt < 256)
		return 1;
	nanosleep(&ts, NULL);
	return 0;
}

int __wrap_clock_gettime(clockid_t id, struct timespec *ts)
{
	long long at = env_num("EB_SEAM_SUSPEND_AT_MS", -1);
	int r = __real_clock_gettime(id, ts);

	if (r >= 0 && id == CLOCK_BOOTTIME && at >= 0 && mono_ms() - start_ms >= at)
		ts->tv_sec += 3600;
	return r;
}

int __wrap_eb_kernel_crng_ready(void)
{
	if (!getenv("EB_SEAM_CRNG_FROM_COUNT"))
		return __real_eb_kernel_crng_ready();
	return entcnt >= 256;
}
