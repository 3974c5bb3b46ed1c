/* SPDX-License-Identifier: MIT */
/* The kernel's RNG through /dev/random's ioctls, each in a small function a test can double. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Opens /dev/random for the ioctls (read-only: they check CAP_SYS_ADMIN, not the mode). */
int eb_kernel_open(int *ret_fd);

/* RNDADDENTROPY: mixes len bytes in and credits credit_bits. The kernel does not check the credit
 * against the buffer, so this does: credit_bits > 8 * len is -EINVAL and reaches no ioctl. Needs
 * CAP_SYS_ADMIN (-EPERM). */
int eb_kernel_add_entropy(int fd, const void *buf, size_t len, uint32_t credit_bits);

/* RNDRESEEDCRNG: the CRNG reseeds from the input pool now. -ENODATA while the CRNG is not yet
 * initialised; -ENOTTY or -EINVAL on kernels before 4.17. */
int eb_kernel_reseed(int fd);

/* What a seed needs after its bits were credited, by the state the CRNG was in when the first of
 * them went in. */
enum eb_kernel_followup {
	/* Not initialised: the credit counts, and the kernel initialises its CRNG (at 256 credited
	 * bits) with a reseed from the input pool that holds them. Nothing to ask. */
	EB_KERNEL_FOLLOWUP_NONE,
	/* Initialised, 5.18 and later: the bits were mixed into the input pool without credit;
	 * RNDRESEEDCRNG has just made the CRNG take them in. */
	EB_KERNEL_FOLLOWUP_RESEEDED,
	/* Initialised, before 5.18: the bits are counted in the input pool, and the CRNG takes
	 * them in at its own next reseed. Nothing asked. */
	EB_KERNEL_FOLLOWUP_SCHEDULED,
	_EB_KERNEL_FOLLOWUP_MAX,
	_EB_KERNEL_FOLLOWUP_INVALID = -EINVAL,
};

/* Does what a seed needs after crediting (above): RNDRESEEDCRNG exactly when ready_before and
 * modern. A failed reseed is its negative errno (-EPERM without CAP_SYS_ADMIN). */
int eb_kernel_followup(int fd, bool ready_before, bool modern, enum eb_kernel_followup *ret);

/* RNDGETENTCNT: the input pool's credited bits (256 for ever after init on 5.18+). */
int eb_kernel_entropy_count(int fd, int *ret_bits);

/* Waits up to timeout_ms (-1: forever) for /dev/random to want writers (POLLOUT): before 5.18
 * while the pool is below write_wakeup_threshold, on 5.18+ only before init. 1 when it does,
 * 0 on timeout. */
int eb_kernel_wait_writable(int fd, int timeout_ms);

/* Whether the CRNG is initialised: getrandom(GRND_NONBLOCK) answers instead of EAGAIN. */
int eb_kernel_crng_ready(void);

/* Whether a kernel release ("6.1.0-13-amd64") has the 5.18 RNG, where credit counts only until
 * init and a forced reseed is how fresh input reaches the CRNG. Unparsable: true, the present. */
bool eb_kernel_release_is_modern(const char *release);

/* The same for the running kernel (uname). */
bool eb_kernel_is_modern(void);

/* Whether the gap between CLOCK_BOOTTIME and CLOCK_MONOTONIC grew by more than slack_ns between
 * two samples of it: the system was suspended in between (CLOCK_MONOTONIC stops in suspend,
 * CLOCK_BOOTTIME does not). */
bool eb_kernel_suspended_between(int64_t gap_before_ns, int64_t gap_now_ns, int64_t slack_ns);

/* CLOCK_BOOTTIME - CLOCK_MONOTONIC, in ns: the time spent suspended since boot. */
int64_t eb_kernel_suspend_gap_ns(void);
