/* SPDX-License-Identifier: MIT */
/* eb-sink-kernel --watch-fork: the kernel's log watched for a VM fork, and the VM's RTC for the
 * jump a resume from a saved state leaves, and the copy's reseed (RESEED_UNIT, which runs
 * --reseed) started at each. */
#pragma once

#include <errno.h>

#define RESEED_UNIT "eb-seed-reseed.service"

struct fork_watch_options {
	const char *kmsg; /* the kernel's log, /dev/kmsg */
	const char *rtc;  /* the RTC's seconds since the epoch; NULL: no clock trigger */
	unsigned interval_s;
	int grace_s; /* how long a clock jump waits for the kernel's line; -1: auto */
};

#define FORK_WATCH_RTC_DEFAULT "/sys/class/rtc/rtc0/since_epoch"
#define FORK_WATCH_DEFAULTS                                                                        \
	{                                                                                          \
		.kmsg = "/dev/kmsg", .rtc = FORK_WATCH_RTC_DEFAULT, .interval_s = 5, .grace_s = -1 \
	}

/* --watch-fork's options, in the order eb-sink-kernel.c lists them. */
enum fork_watch_option {
	FORK_WATCH_KMSG,
	FORK_WATCH_RTC,
	FORK_WATCH_CLOCK_INTERVAL,
	FORK_WATCH_FORK_GRACE,
	_FORK_WATCH_OPTION_MAX,
	_FORK_WATCH_OPTION_INVALID = -EINVAL,
};

/* One of them (opt: an enum fork_watch_option) into o; a bad value is logged, naming the option,
 * and -ERANGE. */
int fork_watch_option(struct fork_watch_options *o, int opt, const char *arg);

/* Reads kmsg (/dev/kmsg: one record a read) from its end on, and at each record
 * kernel_reseed_is_fork_record() knows starts RESEED_UNIT with systemctl --no-block, logging a
 * line with its MESSAGE_ID. Every interval_s it reads the RTC and starts the unit, with a line of
 * its own, when the RTC jumped ahead of CLOCK_BOOTTIME (clock-jump.h), after grace_s unless the
 * kernel's fork line came meanwhile. Returns 0 when kmsg ends (a test's FIFO), else a negative
 * errno, logged. */
int fork_watch_run(const struct fork_watch_options *o);
